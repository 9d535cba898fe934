//! Identifiers: object uids, generated name suffixes, bearer tokens and timestamps.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// 64 unpredictable bits from the standard library's randomly seeded hasher.
pub fn random_u64() -> u64 {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.finish()
}

/// A UUID-shaped object uid.
pub fn new_uid() -> String {
    let (a, b) = (random_u64(), random_u64());
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        (b >> 48) & 0x3fff | 0x8000,
        b & 0xffff_ffff_ffff
    )
}

/// The five-character suffix `generateName` appends, from the API server's alphabet.
pub fn name_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut bits = random_u64();
    (0..5)
        .map(|_| {
            let c = ALPHABET[(bits % ALPHABET.len() as u64) as usize] as char;
            bits /= ALPHABET.len() as u64;
            c
        })
        .collect()
}

/// An opaque bearer token.
pub fn new_token() -> String {
    format!("{:016x}{:016x}", random_u64(), random_u64())
}

/// A token shaped like the API server's service account tokens: a JWT of `claims`, so tools
/// that read a token's claims (expiry, subject, audiences) work on it. The emulator knows its
/// tokens by value; the signature is random bytes, not a signature.
pub fn token_like_jwt(claims: &serde_json::Value) -> String {
    use base64::Engine;
    let encode = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let header = serde_json::json!({"alg": "RS256", "kid": "nauthera-kube-emulator"});
    let signature: Vec<u8> = (0..4).flat_map(|_| random_u64().to_le_bytes()).collect();
    format!(
        "{}.{}.{}",
        encode(header.to_string().as_bytes()),
        encode(claims.to_string().as_bytes()),
        encode(&signature)
    )
}

/// Now, as the API server writes timestamps (RFC 3339, whole seconds, UTC).
pub fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// A short age the way kubectl prints it (`45s`, `3m12s`, `5h`, `12d`), at `now` (Unix seconds).
pub fn human_age_at(timestamp: &str, now: i64) -> String {
    let Ok(then) = timestamp.parse::<jiff::Timestamp>() else {
        return "<unknown>".into();
    };
    human_duration(now - then.as_second())
}

pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    let seconds = seconds.max(0);
    let minutes = seconds / 60;
    let hours = minutes / 60;
    let days = hours / 24;
    match () {
        () if seconds < 120 => format!("{seconds}s"),
        () if minutes < 10 && seconds % 60 != 0 => format!("{minutes}m{}s", seconds % 60),
        () if minutes < 180 => format!("{minutes}m"),
        () if hours < 8 && minutes % 60 != 0 => format!("{hours}h{}m", minutes % 60),
        () if hours < 48 => format!("{hours}h"),
        () if hours < 192 && hours % 24 != 0 => format!("{days}d{}h", hours % 24),
        () if days < 730 => format!("{days}d"),
        () => format!("{}y", days / 365),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uids_are_distinct_and_uuid_shaped() {
        let (a, b) = (new_uid(), new_uid());
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(a.matches('-').count(), 4);
    }

    #[test]
    fn ages_read_like_kubectl() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(190), "3m10s");
        assert_eq!(human_duration(3600), "60m");
        assert_eq!(human_duration(5 * 3600), "5h");
        assert_eq!(human_duration(3 * 86400), "3d");
    }
}
