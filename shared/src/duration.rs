//! Durations as kubectl writes them (`90s`, `1m30s`, `2m`, `1.5h`, `300ms`), parsed by jiff's
//! duration format. A bare number is read as seconds, the form earlier settings used.

use std::time::Duration;

/// Reads a duration; the error says what was given and how to write one.
pub fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<u64>() {
        return Ok(Duration::from_secs(seconds));
    }
    let parsed: jiff::SignedDuration = text
        .parse()
        .map_err(|_| format!("`{text}` is not a duration; write it like 90s, 1m30s or 2m"))?;
    Duration::try_from(parsed).map_err(|_| format!("`{text}` is negative; give a duration >= 0"))
}

/// A duration in the same form, for messages: `1m30s`, `15s`, `250ms`.
pub fn format(duration: Duration) -> String {
    let millis = duration.subsec_millis();
    let total = duration.as_secs();
    let (hours, minutes, seconds) = (total / 3600, total / 60 % 60, total % 60);
    let mut out = String::new();
    if hours > 0 {
        out.push_str(&format!("{hours}h"));
    }
    if minutes > 0 {
        out.push_str(&format!("{minutes}m"));
    }
    if seconds > 0 || (out.is_empty() && millis == 0) {
        out.push_str(&format!("{seconds}s"));
    }
    if millis > 0 {
        out.push_str(&format!("{millis}ms"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_forms_and_bare_seconds_are_read() {
        let cases = [
            ("90s", 90_000),
            ("1m30s", 90_000),
            ("2m", 120_000),
            ("1h", 3_600_000),
            ("1.5h", 5_400_000),
            ("300ms", 300),
            ("15", 15_000),
            (" 60s ", 60_000),
            ("0", 0),
        ];
        for (text, millis) in cases {
            assert_eq!(parse(text), Ok(Duration::from_millis(millis)), "{text}");
        }
    }

    #[test]
    fn other_text_is_refused_with_how_to_write_it() {
        for text in ["soon", "5 parsecs", "", "m"] {
            let error = parse(text).unwrap_err();
            assert!(error.contains("90s, 1m30s or 2m"), "{text}: {error}");
        }
        assert!(parse("-5s").unwrap_err().contains("negative"));
    }

    #[test]
    fn durations_are_written_the_way_they_are_read() {
        for millis in [0, 250, 15_000, 90_000, 3_600_000, 5_430_250] {
            let duration = Duration::from_millis(millis);
            assert_eq!(
                parse(&format(duration)),
                Ok(duration),
                "{}",
                format(duration)
            );
        }
        assert_eq!(format(Duration::from_secs(90)), "1m30s");
    }
}
