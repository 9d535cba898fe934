//! Times the way kubectl shows them: short ages (`45s`, `12m`, `3h`, `4d`).

use jiff::Timestamp;

/// Whole seconds from `then` to `now` (negative when `then` is in the future).
pub fn seconds_between(then: Timestamp, now: Timestamp) -> i64 {
    now.as_second() - then.as_second()
}

/// A short duration: `45s`, `12m`, `3h`, `4d`; a negative one gets a leading `-`.
pub fn short_duration(seconds: i64) -> String {
    let sign = if seconds < 0 { "-" } else { "" };
    let seconds = seconds.unsigned_abs();
    let text = match seconds {
        0..120 => format!("{seconds}s"),
        120..7_200 => format!("{}m", seconds / 60),
        7_200..172_800 => format!("{}h", seconds / 3_600),
        _ => format!("{}d", seconds / 86_400),
    };
    format!("{sign}{text}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_short() {
        assert_eq!(short_duration(45), "45s");
        assert_eq!(short_duration(119), "119s");
        assert_eq!(short_duration(600), "10m");
        assert_eq!(short_duration(3 * 3600), "3h");
        assert_eq!(short_duration(5 * 86_400), "5d");
        assert_eq!(short_duration(-600), "-10m");
    }
}
