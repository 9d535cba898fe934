//! Exponential backoff with jitter for retried failures. The jitter is passed in as a plain value
//! so that tests never sleep and never depend on randomness.

use std::time::Duration;

/// How long to wait before the n-th retry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    /// The delay before the first retry (before jitter).
    pub base: Duration,
    /// The longest delay.
    pub cap: Duration,
}

impl Default for Backoff {
    /// 1 s, doubling, at most 5 minutes.
    fn default() -> Backoff {
        Backoff {
            base: Duration::from_secs(1),
            cap: Duration::from_secs(300),
        }
    }
}

impl Backoff {
    /// The delay before retry number `attempt` (0 for the first). `jitter` in `[0, 1)` picks a
    /// point between half the delay and the whole of it, so that many resources failing at once
    /// do not retry in step.
    pub fn delay(&self, attempt: u32, jitter: f64) -> Duration {
        let doubled = self
            .base
            .checked_mul(1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX))
            .unwrap_or(self.cap);
        let full = doubled.min(self.cap);
        let jitter = if jitter.is_finite() {
            jitter.clamp(0.0, 1.0)
        } else {
            0.0
        };
        full / 2 + full.mul_f64(jitter / 2.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_cap_and_jitter_stays_within_half() {
        let backoff = Backoff::default();
        let cases = [
            (0, 0.0, 500),
            (0, 0.999_999, 1_000),
            (1, 0.0, 1_000),
            (3, 0.5, 6_000),
            (8, 0.0, 128_000),
            (9, 0.0, 150_000),
            (40, 0.999_999, 300_000),
            (u32::MAX, 0.0, 150_000),
        ];
        for (attempt, jitter, millis) in cases {
            let delay = backoff.delay(attempt, jitter);
            assert!(
                delay.as_millis().abs_diff(millis) <= 1,
                "attempt {attempt}, jitter {jitter}: {delay:?}"
            );
        }
    }

    #[test]
    fn a_bad_jitter_value_is_not_a_panic() {
        let backoff = Backoff::default();
        assert_eq!(backoff.delay(0, f64::NAN), Duration::from_millis(500));
        assert_eq!(backoff.delay(0, -3.0), Duration::from_millis(500));
        assert_eq!(backoff.delay(0, 7.0), Duration::from_secs(1));
    }
}
