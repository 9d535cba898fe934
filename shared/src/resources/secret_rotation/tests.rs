#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use jiff::Timestamp;

use super::*;

fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

fn rotation(every: &str, window: Option<(&[Day], &str, &str)>) -> SecretRotation {
    SecretRotation {
        every: every.to_owned(),
        window: window.map(|(days, start, end)| RotationWindow {
            days: days.to_vec(),
            start: start.to_owned(),
            end: end.to_owned(),
        }),
    }
}

fn schedule(every: &str, window: Option<(&[Day], &str, &str)>) -> Schedule {
    rotation(every, window).schedule(Duration::ZERO).unwrap()
}

#[test]
fn every_reads_weeks_days_hours_minutes_and_seconds() {
    let cases = [
        ("90d", 90 * 86_400),
        ("2w", 14 * 86_400),
        ("12h30m", 45_000),
        ("1d12h", 129_600),
        ("45s", 45),
    ];
    for (text, seconds) in cases {
        assert_eq!(
            parse_every(text),
            Ok(Duration::from_secs(seconds)),
            "{text}"
        );
    }
    for wrong in ["", "90", "d", "1.5h", "-1d", "0s", "1y"] {
        assert!(parse_every(wrong).is_err(), "{wrong} must be refused");
    }
}

#[test]
fn every_below_the_minimum_counts_as_the_minimum() {
    let hour = Duration::from_secs(3_600);
    let declared = rotation("5s", None).schedule(hour).unwrap();
    assert_eq!(declared.every, hour);
    let declared = rotation("2h", None).schedule(hour).unwrap();
    assert_eq!(declared.every, 2 * hour);
}

#[test]
fn without_a_window_the_rotation_falls_after_every_plus_the_objects_offset() {
    let plan = schedule("10d", None);
    let set = at("2026-01-01T00:00:00Z");
    let Planned::At(next) = plan.planned(set, "uid-a", set) else {
        panic!("not due at once");
    };
    let waited = Duration::try_from(set.duration_until(next)).unwrap();
    assert!(waited >= Duration::from_secs(10 * 86_400), "{waited:?}");
    assert!(waited < Duration::from_secs(11 * 86_400), "{waited:?}");
    assert_eq!(plan.planned(set, "uid-a", next), Planned::Due);
    assert_eq!(
        plan.planned(
            set,
            "uid-a",
            next.checked_sub(jiff::SignedDuration::from_secs(1))
                .unwrap()
        ),
        Planned::At(next)
    );
}

#[test]
fn a_fleet_with_one_schedule_is_spread_and_each_object_keeps_its_instant() {
    let plan = schedule("90d", None);
    let set = at("2026-01-01T00:00:00Z");
    let instants: std::collections::BTreeSet<_> = (0..50)
        .map(|n| plan.planned(set, &format!("uid-{n}"), set))
        .map(|planned| match planned {
            Planned::At(next) => next,
            Planned::Due => panic!("not due"),
        })
        .collect();
    assert!(
        instants.len() > 45,
        "spread over {} instants",
        instants.len()
    );
    assert_eq!(
        plan.planned(set, "uid-7", set),
        plan.planned(set, "uid-7", set),
        "deterministic"
    );
    let last = instants.iter().max().unwrap();
    let spread = Duration::try_from(set.duration_until(*last)).unwrap();
    assert!(
        spread <= Duration::from_secs(91 * 86_400),
        "at most a day of spread"
    );
}

#[test]
fn inside_its_window_a_due_rotation_happens_now() {
    let plan = schedule("1h", Some((&[], "00:00", "24:00")));
    let set = at("2026-01-01T00:00:00Z");
    assert_eq!(
        plan.planned(set, "uid", at("2026-01-01T03:00:00Z")),
        Planned::Due
    );
}

#[test]
fn outside_its_window_a_due_rotation_waits_for_the_window_to_open() {
    // 2026-01-01 is a Thursday.
    let plan = schedule("1h", Some((&[Day::Saturday], "02:00", "04:00")));
    let set = at("2026-01-01T00:00:00Z");
    let now = at("2026-01-01T12:00:00Z");
    let Planned::At(next) = plan.planned(set, "uid", now) else {
        panic!("outside the window nothing is due");
    };
    assert!(next >= at("2026-01-03T02:00:00Z"), "{next}");
    assert!(
        next < at("2026-01-03T03:00:00Z"),
        "in the window's first half: {next}"
    );
    assert_eq!(plan.planned(set, "uid", next), Planned::Due);
    // Past the window's close on Saturday: the next Saturday.
    let Planned::At(later) = plan.planned(set, "uid", at("2026-01-03T04:00:00Z")) else {
        panic!("closed");
    };
    assert!(later >= at("2026-01-10T02:00:00Z"), "{later}");
}

#[test]
fn a_due_time_inside_the_window_is_kept() {
    let plan = schedule("1d", Some((&[], "00:00", "24:00")));
    let set = at("2026-01-01T10:00:00Z");
    let Planned::At(next) = plan.planned(set, "uid", set) else {
        panic!("not due");
    };
    assert!(next >= at("2026-01-02T10:00:00Z") && next < at("2026-01-02T12:30:00Z"));
}

#[test]
fn the_window_rule_is_mirrored() {
    let good = rotation("1d", Some((&[], "02:00", "04:00")));
    assert!(good.rule_outcomes().iter().all(|o| o.holds));
    let reversed = rotation("1d", Some((&[], "04:00", "02:00")));
    assert!(reversed.rule_outcomes().iter().any(|o| !o.holds));
    assert!(reversed.schedule(Duration::ZERO).is_err());
    let to_midnight = rotation("1d", Some((&[], "22:00", "24:00")));
    assert!(to_midnight.rule_outcomes().iter().all(|o| o.holds));
}
