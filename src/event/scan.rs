//! The one hot loop the parser and the writer share: find the next byte of a string that is not
//! copied through as is (`"`, `\` or a control character below 0x20).

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// True for the bytes a JSON string cannot hold raw: `"`, `\` and the control characters.
#[inline]
pub(crate) fn is_special(b: u8) -> bool {
    b == b'"' || b == b'\\' || b < 0x20
}

/// Flags (high bit per byte) the zero bytes of `x`. Bytes above a true zero may be flagged too
/// (borrows run upwards), so only the lowest flag is exact, which is the one we use.
#[inline]
fn zero_bytes(x: u64) -> u64 {
    x.wrapping_sub(ONES) & !x & HIGH
}

/// The index of the first special byte in `bytes` at or after `from`, or `bytes.len()` if none.
/// Eight bytes at a time (SWAR), then byte by byte for the tail.
#[inline]
pub(crate) fn find_special(bytes: &[u8], from: usize) -> usize {
    let mut i = from;
    while let Some(chunk) = bytes.get(i..i + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_le_bytes(word);
        let found = zero_bytes(x ^ (ONES * u64::from(b'"')))
            | zero_bytes(x ^ (ONES * u64::from(b'\\')))
            | (x.wrapping_sub(ONES * 0x20) & !x & HIGH);
        if found != 0 {
            return i + (found.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while let Some(&b) = bytes.get(i) {
        if is_special(b) {
            return i;
        }
        i += 1;
    }
    bytes.len()
}

/// String equality for member names, which are short and often of equal length (`type`, `data`,
/// `time`): compared inline, without a call to `memcmp`.
#[inline]
pub(crate) fn same_name(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_first_special_byte_anywhere() {
        for len in 0..40 {
            for at in 0..=len {
                for special in [b'"', b'\\', 0x00, 0x1F, 0x0A] {
                    let mut bytes = vec![b'a'; len];
                    bytes.extend_from_slice("é🚀\u{7f} ~".as_bytes());
                    if at < len {
                        bytes[at] = special;
                        // a later special byte must not win
                        bytes.push(b'"');
                        assert_eq!(find_special(&bytes, 0), at, "len {len} at {at}");
                    } else {
                        assert_eq!(find_special(&bytes, 0), bytes.len());
                    }
                }
            }
        }
    }

    #[test]
    fn flags_each_byte_value_exactly() {
        for b in 0..=255u8 {
            let mut bytes = [b'x'; 16];
            bytes[9] = b;
            let expected = if is_special(b) { 9 } else { 16 };
            assert_eq!(find_special(&bytes, 0), expected, "byte {b:#x}");
            assert_eq!(find_special(&bytes, 3), expected, "byte {b:#x}");
        }
    }
}
