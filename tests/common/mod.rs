//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// A deterministic payload for `seq`: mostly small, some large, content derived from the seq.
pub fn payload(seq: u64) -> Vec<u8> {
    let mut x = seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let r = next();
    let len = match r % 1000 {
        0 => 20_000 + (r >> 16) as usize % 5_000,
        1..=10 => 1_000 + (r >> 16) as usize % 3_000,
        _ => 40 + (r >> 16) as usize % 300,
    };
    let mut v = Vec::with_capacity(len);
    v.extend_from_slice(&seq.to_le_bytes());
    while v.len() < len {
        v.extend_from_slice(&next().to_le_bytes());
    }
    v.truncate(len.max(8));
    v
}

/// Segment files of a log directory, sorted.
pub fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    v.sort();
    v
}

/// Index files of a log directory, sorted.
pub fn indexes(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "idx"))
        .collect();
    v.sort();
    v
}
