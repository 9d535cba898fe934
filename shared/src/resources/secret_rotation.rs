//! `spec.secret.rotation`: a generated client secret rotated on a schedule, and when the next
//! rotation falls. The schedule is pure arithmetic on the time the secret in force was set
//! (`status.secretSetTime`), so the reconciler requeues for that instant instead of polling.
//!
//! A fleet of manifests with one schedule does not rotate at one instant: each object's uid
//! gives it a fixed offset within a spread (a tenth of `every`, at most a day), and a rotation
//! that waits for a window to open is placed within the first half of the window.

use std::time::Duration;

use jiff::civil::{Time, Weekday};
use jiff::{SignedDuration, Timestamp, tz::TimeZone};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::admission::RuleOutcome;

/// The CEL rules of the schema; [`SecretRotation::rule_outcomes`] mirrors them in Rust.
pub(crate) mod rules {
    pub const WINDOW_START_BEFORE_END: &str = "self.start < self.end";
}

/// What `every` looks like: whole numbers of weeks, days, hours, minutes or seconds.
const EVERY_PATTERN: &str = "^([0-9]+[wdhms])+$";
/// A time of day in UTC, `HH:MM`.
const START_PATTERN: &str = "^([01][0-9]|2[0-3]):[0-5][0-9]$";
/// A time of day in UTC, `HH:MM`, or `24:00` for the end of the day.
const END_PATTERN: &str = "^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$";

/// Rotates a generated client secret on a schedule: a new secret is minted and delivered once
/// the secret in force (`status.secretSetTime`) is older than `every`, inside `window` when one
/// is given. `status.nextRotation` says when the next one falls. Each object rotates at its own
/// offset within a spread (a tenth of `every`, at most a day) so that manifests sharing a
/// schedule do not rotate at one instant. An `every` shorter than the reconciler's minimum
/// (`--min-rotation-interval`, one hour by default) counts as that minimum.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretRotation {
    /// How old the secret in force may grow: whole weeks, days, hours, minutes or seconds,
    /// such as `90d`, `2w` or `12h30m`.
    #[schemars(length(min = 2, max = 32), regex(pattern = EVERY_PATTERN))]
    pub every: String,
    /// When a rotation may happen; at any time when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<RotationWindow>,
}

/// The days and the time of day (UTC) a scheduled rotation may happen in. A rotation that
/// falls due outside it waits for the window to open.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": rules::WINDOW_START_BEFORE_END,
        "message": "spec.secret.rotation.window: start must come before end on the same day (UTC, HH:MM; end may be 24:00)"
    }
]))]
pub struct RotationWindow {
    /// The days of the week (UTC) the window opens on; every day when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "set"), length(max = 7))]
    pub days: Vec<Day>,
    /// When the window opens on each of its days, `HH:MM` in UTC.
    #[schemars(regex(pattern = START_PATTERN))]
    pub start: String,
    /// When the window closes on each of its days, `HH:MM` in UTC (`24:00`: at midnight).
    #[schemars(regex(pattern = END_PATTERN))]
    pub end: String,
}

/// A day of the week.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Day {
    Monday,
    Tuesday,
    Wednesday,
    Thursday,
    Friday,
    Saturday,
    Sunday,
}

impl Day {
    fn weekday(self) -> Weekday {
        match self {
            Day::Monday => Weekday::Monday,
            Day::Tuesday => Weekday::Tuesday,
            Day::Wednesday => Weekday::Wednesday,
            Day::Thursday => Weekday::Thursday,
            Day::Friday => Weekday::Friday,
            Day::Saturday => Weekday::Saturday,
            Day::Sunday => Weekday::Sunday,
        }
    }
}

impl SecretRotation {
    /// The CEL rules evaluated in Rust on this object.
    pub(crate) fn rule_outcomes(&self) -> Vec<RuleOutcome> {
        self.window
            .iter()
            .map(|window| {
                RuleOutcome::new(
                    "spec.secret.rotation.window",
                    rules::WINDOW_START_BEFORE_END,
                    window.start < window.end,
                )
            })
            .collect()
    }

    /// The schedule this declares, with `every` raised to `minimum`; an error names the field
    /// and what to write (the schema refuses such a value already; this is for objects that
    /// bypassed it).
    pub fn schedule(&self, minimum: Duration) -> Result<Schedule, String> {
        let every = parse_every(&self.every)
            .map_err(|why| format!("spec.secret.rotation.every: {why}"))?
            .max(minimum)
            .max(Duration::from_secs(1));
        let window = match &self.window {
            Some(window) => Some(Window::of(window)?),
            None => None,
        };
        Ok(Schedule { every, window })
    }
}

/// Reads `every`: whole numbers of weeks, days, hours, minutes or seconds (`90d`, `1d12h`).
pub fn parse_every(text: &str) -> Result<Duration, String> {
    let malformed = || format!("`{text}` is not a duration; write it like 90d, 2w, 12h or 30m");
    let mut total: u64 = 0;
    let mut number = String::new();
    for c in text.trim().chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let unit: u64 = match c {
            'w' => 7 * 86_400,
            'd' => 86_400,
            'h' => 3_600,
            'm' => 60,
            's' => 1,
            _ => return Err(malformed()),
        };
        let count: u64 = number.parse().map_err(|_| malformed())?;
        total = count
            .checked_mul(unit)
            .and_then(|seconds| total.checked_add(seconds))
            .ok_or_else(malformed)?;
        number.clear();
    }
    if !number.is_empty() || total == 0 {
        return Err(malformed());
    }
    Ok(Duration::from_secs(total))
}

/// A schedule ready for arithmetic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    pub every: Duration,
    pub window: Option<Window>,
}

/// A window ready for arithmetic: the weekdays it opens on (all when empty) and its span of
/// the day, in seconds since midnight UTC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Window {
    days: Vec<Weekday>,
    start: i64,
    end: i64,
}

impl Window {
    fn of(window: &RotationWindow) -> Result<Window, String> {
        let start = seconds_of_day(&window.start)
            .ok_or_else(|| "spec.secret.rotation.window.start: write it as HH:MM".to_owned())?;
        let end = seconds_of_day(&window.end)
            .ok_or_else(|| "spec.secret.rotation.window.end: write it as HH:MM".to_owned())?;
        if start >= end {
            return Err(
                "spec.secret.rotation.window: start must come before end (UTC, HH:MM)".to_owned(),
            );
        }
        Ok(Window {
            days: window.days.iter().map(|d| d.weekday()).collect(),
            start,
            end,
        })
    }

    fn opens_on(&self, day: Weekday) -> bool {
        self.days.is_empty() || self.days.contains(&day)
    }

    fn length(&self) -> Duration {
        Duration::from_secs(u64::try_from(self.end - self.start).unwrap_or(0))
    }

    /// The first instant at or after `at` inside the window, and whether it is the window's
    /// opening (`at` was outside).
    fn first_at_or_after(&self, at: Timestamp) -> Option<(Timestamp, bool)> {
        let date = at.to_zoned(TimeZone::UTC).date();
        (0..8).find_map(|days| {
            let day = date.checked_add(jiff::Span::new().days(days)).ok()?;
            if !self.opens_on(day.weekday()) {
                return None;
            }
            let midnight = day.to_zoned(TimeZone::UTC).ok()?.timestamp();
            let opens = midnight
                .checked_add(SignedDuration::from_secs(self.start))
                .ok()?;
            let closes = midnight
                .checked_add(SignedDuration::from_secs(self.end))
                .ok()?;
            if at >= closes {
                return None;
            }
            Some(if at >= opens {
                (at, false)
            } else {
                (opens, true)
            })
        })
    }
}

fn seconds_of_day(text: &str) -> Option<i64> {
    if text == "24:00" {
        return Some(86_400);
    }
    let time: Time = format!("{text}:00").parse().ok()?;
    Some(i64::from(time.hour()) * 3_600 + i64::from(time.minute()) * 60)
}

/// When the next scheduled rotation falls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Planned {
    /// Now: the secret is old enough and the window is open.
    Due,
    /// Later, at this instant.
    At(Timestamp),
}

impl Schedule {
    /// The longest the spread puts a rotation off: a tenth of `every`, at most a day.
    fn spread(&self) -> Duration {
        (self.every / 10).min(Duration::from_secs(86_400))
    }

    /// When the secret set at `set_at` is rotated, seen at `now`; `key` (the object's uid)
    /// gives the object its own offset. A rotation due while the window is closed (the
    /// reconciler was away, say) waits for the window's next opening.
    pub fn planned(&self, set_at: Timestamp, key: &str, now: Timestamp) -> Planned {
        let offset = self.spread().mul_f64(fraction(key, 0));
        let due = set_at
            .checked_add(
                SignedDuration::try_from(self.every + offset).unwrap_or(SignedDuration::MAX),
            )
            .unwrap_or(Timestamp::MAX);
        let from = due.max(now);
        let Some(window) = &self.window else {
            return if now >= due {
                Planned::Due
            } else {
                Planned::At(due)
            };
        };
        match window.first_at_or_after(from) {
            // Inside the window and due: now.
            Some((_, false)) if now >= due => Planned::Due,
            Some((at, false)) => Planned::At(at),
            // At an opening: placed within the window's first half, so a fleet that fell due
            // while it was closed does not rotate at the instant it opens.
            Some((opens, true)) => {
                let within = (window.length() / 2).mul_f64(fraction(key, 8));
                let within = Duration::from_secs(within.as_secs());
                Planned::At(
                    opens
                        .checked_add(SignedDuration::try_from(within).unwrap_or_default())
                        .unwrap_or(opens),
                )
            }
            None => Planned::At(Timestamp::MAX),
        }
    }
}

/// A fixed fraction in [0, 1) drawn from a key (eight bytes of its SHA-256 from `at`).
fn fraction(key: &str, at: usize) -> f64 {
    let digest = Sha256::digest(key.as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[at..at + 8]);
    // The top 53 bits, as many as an f64 holds exactly.
    (u64::from_be_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests;
