//! A small seeded generator (splitmix64): a run is reproducible from its seed.

pub struct Random(u64);

impl Random {
    pub fn new(seed: u64) -> Random {
        Random(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A number in [0, n); 0 when n is 0.
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        (self.next_u64() % n as u64) as usize
    }

    /// A secret value: `prefix-` and 32 hex digits.
    pub fn secret(&mut self, prefix: &str) -> String {
        format!("{prefix}-{:016x}{:016x}", self.next_u64(), self.next_u64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_draws_the_same_numbers() {
        let mut a = Random::new(7);
        let mut b = Random::new(7);
        assert_eq!(a.next_u64(), b.next_u64());
        let unit = a.unit();
        assert!((0.0..1.0).contains(&unit));
        assert!(a.below(3) < 3);
        assert_eq!(a.below(0), 0);
    }
}
