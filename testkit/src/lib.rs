//! The test kit shared by agentlog's integration tests (`tests/*/`), benchmarks (`benches/`) and
//! fuzz targets (`fuzz/`): the one seeded RNG, records and the files of a log, session
//! generators, the fuzz checks and (feature `peers`) the benchmarks' peers. See `tests/README.md`.
#![allow(dead_code)]
#![allow(clippy::new_without_default)]

pub mod fuzz_checks;
pub mod fuzz_jsonl;
pub mod fuzz_source;
pub mod gen;
pub mod import_tree;
pub mod nats;
#[cfg(feature = "peers")]
pub mod peers;
pub mod project;
mod rng;
pub mod search;
pub mod secrets;
pub mod session;

pub use rng::Rng;

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

/// Whether a segment file is a compressed (cold) one: it starts with the cold magic.
pub fn is_cold(path: &Path) -> bool {
    std::fs::read(path).unwrap()[..8] == agentlog::log::COLD_MAGIC
}

/// The base seq of a segment or index file, from its name (`<base seq, 20 digits>.seg`).
pub fn base_seq(path: &Path) -> Option<u64> {
    path.file_stem()?.to_str()?.parse().ok()
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

/// The seed of a randomized test: `AGENTLOG_SEED` when set, else a fixed default. Printed so a
/// failure can be replayed.
pub fn seed(default: u64) -> u64 {
    let s = std::env::var("AGENTLOG_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default);
    eprintln!("seed {s} (set AGENTLOG_SEED to replay)");
    s
}

/// A count from the environment variable `var`, else `default`.
pub fn env_count(var: &str, default: u64) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// The files of fuzz target `target`'s committed corpus (`fuzz/corpus/TARGET/`), in name order.
pub fn fuzz_corpus(target: &str) -> Vec<PathBuf> {
    files_in(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fuzz/corpus")
            .join(target),
    )
}

/// The files of `dir` (not its subdirectories), in name order.
pub fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// Copies the files of a directory (not its subdirectories).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// Checks that the log in `dir`, read by a fresh reader, holds exactly `expected` (by seq).
pub fn assert_log_holds(dir: &Path, expected: &[Vec<u8>]) {
    let r = agentlog::log::LogReader::open(dir).unwrap();
    assert_eq!(
        r.len(),
        expected.len() as u64,
        "length of {}",
        dir.display()
    );
    let mut n = 0usize;
    for rec in r.iter() {
        let rec = rec.unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
        assert_eq!(rec.seq, n as u64);
        assert_eq!(rec.payload, expected[n].as_slice(), "seq {n}");
        n += 1;
    }
    assert_eq!(n, expected.len());
}

/// Writes `bytes` at offset `at` of a file's 64-byte header (segment or index) and fixes the
/// header's checksum (CRC-32 of bytes 0..60, at 60..64): a header that says something else and
/// still passes its own check.
pub fn rewrite_header(path: &Path, at: usize, bytes: &[u8]) {
    let mut b = std::fs::read(path).unwrap();
    b[at..at + bytes.len()].copy_from_slice(bytes);
    let crc = crc32fast::hash(&b[..60]);
    b[60..64].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(path, b).unwrap();
}

/// Flips one bit of the byte at `offset` of `path`.
pub fn flip(path: &Path, offset: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[offset] ^= 0x20;
    std::fs::write(path, bytes).unwrap();
}

/// The name libtest gives the test function `name` of the module `module` (`module_path!()`):
/// its path without the crate, for `--exact` when a test runs its own binary as a child.
pub fn test_name(module: &str, name: &str) -> String {
    match module.split_once("::") {
        Some((_, path)) => format!("{path}::{name}"),
        None => name.to_string(),
    }
}
