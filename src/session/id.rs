//! Session ids: checking them, and making new unique, time-sortable ones.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::error::{Error, Result};

/// The longest session id.
pub const MAX_ID_LEN: usize = 128;

/// Checks that `id` is `[A-Za-z0-9._-]{1,128}` and not `.` or `..`: an id is a name, never a path.
pub fn validate_id(id: &str) -> Result<()> {
    let ok = !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        && id != "."
        && id != "..";
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidId(id.to_string()))
    }
}

const CROCKFORD: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// A new session id: 26 characters (a ULID: 48 bits of milliseconds, then 80 random bits, in
/// Crockford base32), so ids sort by creation time. Ids made in the same millisecond by one
/// process still sort in creation order.
pub fn new_id() -> String {
    static LAST: Mutex<(u64, u128)> = Mutex::new((0, 0));
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
        & ((1 << 48) - 1);
    let fresh = {
        use std::collections::hash_map::RandomState;
        use std::hash::BuildHasher;
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let a = RandomState::new().hash_one((now, n, std::process::id()));
        let b = RandomState::new().hash_one((n, now));
        ((u128::from(a) << 64) | u128::from(b)) & ((1u128 << 80) - 1)
    };
    let random = {
        let mut last = crate::util::lock(&LAST);
        let r = if last.0 == now {
            // Same millisecond: increment, so the order of creation is kept.
            (last.1 + 1) & ((1u128 << 80) - 1)
        } else {
            fresh
        };
        *last = (now, r);
        r
    };
    let value = (u128::from(now) << 80) | random;
    let mut out = [0u8; 26];
    for (i, c) in out.iter_mut().enumerate() {
        let shift = 5 * (25 - i);
        *c = CROCKFORD[((value >> shift) & 31) as usize];
    }
    out.iter().map(|&b| b as char).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_checked() {
        for ok in ["a", "sess-0001", "A.b_c-9", &"x".repeat(128)] {
            validate_id(ok).unwrap();
        }
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "/etc",
            "a/b",
            "a b",
            "é",
            &"x".repeat(129),
            "a\0",
        ] {
            assert!(
                matches!(validate_id(bad), Err(Error::InvalidId(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn new_ids_are_valid_unique_and_sorted() {
        let ids: Vec<String> = (0..2000).map(|_| new_id()).collect();
        for id in &ids {
            validate_id(id).unwrap();
            assert_eq!(id.len(), 26);
        }
        let mut sorted = ids.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted, ids);
    }
}
