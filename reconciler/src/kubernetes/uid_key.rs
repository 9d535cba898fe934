//! A Kubernetes uid in 16 bytes, for what is kept per resource: the uid text takes a 36-byte
//! allocation besides its 24-byte handle, and there is one per resource.

use sha2::{Digest, Sha256};

/// A uid is a UUID in its canonical form (lowercase, grouped 8-4-4-4-12), whose digits are its
/// value; anything else is known by a digest. Two uids have the same key only if they are the
/// same text, as Kubernetes compares them: `0B6C...` or the digits without dashes are other uids.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UidKey(u128);

impl UidKey {
    pub fn of(uid: &str) -> UidKey {
        if let Some(value) = canonical_uuid(uid) {
            return UidKey(value);
        }
        let digest = Sha256::digest(uid.as_bytes());
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&digest[..16]);
        UidKey(u128::from_le_bytes(bytes))
    }
}

/// The value of a UUID written as Kubernetes writes uids.
fn canonical_uuid(uid: &str) -> Option<u128> {
    if uid.len() != 36 {
        return None;
    }
    uid.bytes()
        .enumerate()
        .try_fold(0u128, |value, (at, byte)| match (at, byte) {
            (8 | 13 | 18 | 23, b'-') => Some(value),
            (8 | 13 | 18 | 23, _) => None,
            (_, b'0'..=b'9') => Some((value << 4) | u128::from(byte - b'0')),
            (_, b'a'..=b'f') => Some((value << 4) | u128::from(byte - b'a' + 10)),
            _ => None,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uid_is_keyed_by_its_digits_or_else_by_a_digest() {
        let uid = "0b6c1f4e-3a7d-4c2e-9f1a-5d8e7b6a4c3d";
        assert_eq!(
            UidKey::of(uid),
            UidKey(0x0b6c1f4e_3a7d_4c2e_9f1a_5d8e7b6a4c3d)
        );
        assert_ne!(
            UidKey::of(uid),
            UidKey::of("0b6c1f4e-3a7d-4c2e-9f1a-5d8e7b6a4c3e")
        );
        // Not a UUID as Kubernetes writes one: a short one, a longer one, other characters,
        // the same digits in capitals or without dashes.
        let others = [
            "web",
            "0b6c1f4e3a7d4c2e9f1a5d8e7b6a4c3d0",
            "not-a-uuid-at-all-but-long-enough!",
            "0B6C1F4E-3A7D-4C2E-9F1A-5D8E7B6A4C3D",
            "0b6c1f4e3a7d4c2e9f1a5d8e7b6a4c3d",
            "0b6c1f4e-3a7d4-c2e-9f1a-5d8e7b6a4c3d",
        ];
        for other in others {
            assert_eq!(UidKey::of(other), UidKey::of(other));
            assert_ne!(UidKey::of(other), UidKey::of(uid));
        }
        assert_ne!(UidKey::of(others[0]), UidKey::of(others[1]));
    }
}
