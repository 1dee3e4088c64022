//! Replays the fuzz corpora (`fuzz/corpus/<target>/*`) and a set of seeded random inputs through
//! the fuzz targets' checks (`tests/common/fuzz_checks.rs`), so every CI run exercises them.
//!
//! `generate_seed_corpus` (ignored) writes the committed seed files from real logs.

use testkit as common;
use testkit::fuzz_checks;
use testkit::fuzz_jsonl;

use std::path::{Path, PathBuf};

use agentlog::log::{Log, Options};
use common::{payload, Rng};

fn corpus(target: &str) -> Vec<PathBuf> {
    common::fuzz_corpus(target)
}

/// The contents of a target's seed corpus.
fn seed_files(target: &str) -> Vec<Vec<u8>> {
    corpus(target)
        .iter()
        .map(|f| std::fs::read(f).unwrap())
        .collect()
}

/// One of `seeds` with one to three mutations: a flipped bit, a truncation, a random byte, and
/// (with `lines`) a whole line dropped, so that seqs, turns and calls go out of step.
fn mutated(rng: &mut Rng, seeds: &[Vec<u8>], lines: bool) -> Vec<u8> {
    let mut data = seeds[rng.below(seeds.len() as u64) as usize].clone();
    for _ in 0..rng.range(1, 4) {
        if data.is_empty() {
            break;
        }
        let at = rng.below(data.len() as u64) as usize;
        match rng.below(if lines { 4 } else { 3 }) {
            0 => data[at] ^= 1 << rng.below(8),
            1 => data.truncate(at.max(1)),
            2 => data[at] = rng.next() as u8,
            _ => {
                let end = data[at..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(data.len(), |p| at + p + 1);
                let start = data[..at]
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |p| p + 1);
                data.drain(start..end);
            }
        }
    }
    data
}

#[test]
fn segment_decode_corpus() {
    let files = corpus("segment_decode");
    assert!(files.len() >= 4, "the seed corpus is missing");
    for f in files {
        eprintln!("{}", f.display());
        fuzz_checks::segment_decode(&std::fs::read(&f).unwrap());
    }
}

#[test]
fn engine_model_corpus() {
    let files = corpus("engine_model");
    assert!(files.len() >= 4, "the seed corpus is missing");
    for f in files {
        eprintln!("{}", f.display());
        fuzz_checks::engine_model(&std::fs::read(&f).unwrap());
    }
}

#[test]
fn engine_model_random_inputs() {
    let mut rng = Rng(common::seed(0xf022));
    for _ in 0..common::env_count("AGENTLOG_FUZZ_ITERS", 30) {
        let len = rng.range(1, 300) as usize;
        let data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        fuzz_checks::engine_model(&data);
    }
}

#[test]
fn segment_decode_mutated_real_segments() {
    let mut rng = Rng(common::seed(0xdec0));
    let seeds = seed_files("segment_decode");
    for _ in 0..common::env_count("AGENTLOG_FUZZ_ITERS", 30) {
        let data = mutated(&mut rng, &seeds, false);
        if let Some(dump) = std::env::var_os("AGENTLOG_FUZZ_DUMP") {
            std::fs::write(dump, &data).unwrap();
        }
        fuzz_checks::segment_decode(&data);
    }
}

/// Writes the seed corpora from real logs: `cargo test --test fuzz_corpus -- --ignored`.
#[test]
#[ignore = "writes fuzz/corpus; run by hand"]
fn generate_seed_corpus() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    let tmp = tempfile::tempdir().unwrap();
    for (name, n, close) in [
        ("closed", 12u64, true),
        ("abandoned", 9, false),
        ("empty", 0, true),
    ] {
        let dir = tmp.path().join(name);
        let opts = Options::default()
            .segment_size(4 << 10)
            .preallocate(1 << 10)
            .max_event_size(4 << 10);
        let log = Log::open(&dir, opts).unwrap();
        for seq in 0..n {
            let mut p = payload(seq);
            p.truncate(60);
            log.append(&p).unwrap();
        }
        if close {
            log.close().unwrap();
        } else {
            log.abandon();
        }
        let seg = std::fs::read(dir.join("00000000000000000000.seg")).unwrap();
        let idx = std::fs::read(dir.join("00000000000000000000.idx")).unwrap();
        // Index files keep their preallocated size: keep the header and the entries.
        let idx = &idx[..(64 + 4 * n as usize + 4).min(idx.len())];
        let seg = &seg[..seg.len().min(2048)];
        let out = root.join("segment_decode");
        std::fs::write(
            out.join(format!("{name}-with-index")),
            fuzz_checks::join_segment_input(seg, Some(idx), false),
        )
        .unwrap();
        std::fs::write(
            out.join(format!("{name}-alone")),
            fuzz_checks::join_segment_input(seg, None, true),
        )
        .unwrap();
    }
    let mut rng = Rng(7);
    for k in 0..6 {
        let len = 20 + 30 * k;
        let data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        std::fs::write(root.join("engine_model").join(format!("seed-{k}")), data).unwrap();
    }
}

#[test]
fn jsonl_import_corpus() {
    let files = corpus("jsonl_import");
    assert!(files.len() >= 4, "the seed corpus is missing");
    for f in files {
        eprintln!("{}", f.display());
        fuzz_jsonl::jsonl_import(&std::fs::read(&f).unwrap());
    }
}

#[test]
fn jsonl_import_mutated_examples() {
    let mut rng = Rng(common::seed(0x150c));
    let seeds = seed_files("jsonl_import");
    for _ in 0..common::env_count("AGENTLOG_FUZZ_ITERS", 30) {
        let data = mutated(&mut rng, &seeds, true);
        fuzz_jsonl::jsonl_import(&data);
    }
}
