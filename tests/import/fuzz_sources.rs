//! The `source_import` fuzz target's check (`testkit/src/fuzz_source.rs`) on its committed
//! corpus, on every real sample in every way of importing it, and on seeded damage to the
//! samples (lines dropped, repeated, swapped or cut short, values of another type), so every CI
//! run exercises it.
//!
//! `generate_source_seed_corpus` (ignored) writes the committed seeds from the real samples.

use std::path::{Path, PathBuf};

use testkit::fuzz_source::source_import;
use testkit::{env_count, seed, Rng};

use crate::import_formats::data_dir;

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/source_import")
}

/// The real samples' bytes, Codex first.
fn samples() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for sub in ["codex", "claude-code"] {
        out.extend(files_of(&data_dir().join(sub)));
    }
    out
}

/// The name and bytes of each file of `dir`, in name order.
fn files_of(dir: &Path) -> Vec<(String, Vec<u8>)> {
    testkit::files_in(dir)
        .into_iter()
        .map(|f| {
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            let bytes = std::fs::read(&f).unwrap();
            (name, bytes)
        })
        .collect()
}

/// The fuzz input for `file` imported with `flags` (one run or two, `--keep-open` or not, the
/// format given or detected) and the first run cut at `cut`/256 of the lines.
fn input(flags: u8, cut: u8, file: &[u8]) -> Vec<u8> {
    let mut data = vec![flags, cut];
    data.extend_from_slice(file);
    data
}

#[test]
fn source_import_corpus() {
    let files = testkit::fuzz_corpus("source_import");
    assert!(files.len() >= 6, "the seed corpus is missing");
    for f in files {
        eprintln!("{}", f.display());
        source_import(&std::fs::read(&f).unwrap());
    }
}

/// Every real sample: in one run (format detected, then given), and in two runs cut in the
/// middle, the first with and without `--keep-open`.
#[test]
fn source_import_every_sample_every_way() {
    for (i, (name, file)) in samples().into_iter().enumerate() {
        let given = if i < 3 { 4 } else { 4 | 8 };
        for (flags, cut) in [(0, 0), (given, 0), (1, 128), (3, 128), (3 | given, 40)] {
            eprintln!("{name}: flags {flags}, cut {cut}");
            source_import(&input(flags, cut, &file));
        }
    }
}

/// `file` with one to four line-level changes: a line dropped, repeated, swapped with the next,
/// cut short, or a string value of it turned into a number or an object.
fn damaged(rng: &mut Rng, file: &[u8]) -> Vec<u8> {
    let mut lines: Vec<Vec<u8>> = file.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
    for _ in 0..rng.range(1, 5) {
        if lines.len() < 2 {
            break;
        }
        let at = rng.below(lines.len() as u64 - 1) as usize;
        match rng.below(6) {
            0 => {
                lines.remove(at);
            }
            1 => {
                let copy = lines[at].clone();
                lines.insert(at, copy);
            }
            2 => lines.swap(at, at + 1),
            3 => {
                let keep = rng.below(lines[at].len() as u64 + 1) as usize;
                lines[at].truncate(keep);
            }
            kind => {
                // The n-th `":"` string value (a member's value, not a key) becomes 7 or {}.
                let line = &lines[at];
                let starts: Vec<usize> = line
                    .windows(3)
                    .enumerate()
                    .filter(|(_, w)| w == b"\":\"")
                    .map(|(i, _)| i + 2)
                    .collect();
                if starts.is_empty() {
                    continue;
                }
                let start = starts[rng.below(starts.len() as u64) as usize];
                let Some(len) = string_len(&line[start..]) else {
                    continue;
                };
                let with: &[u8] = if kind == 4 { b"7" } else { b"{}" };
                let mut changed = line[..start].to_vec();
                changed.extend_from_slice(with);
                changed.extend_from_slice(&line[start + len..]);
                lines[at] = changed;
            }
        }
    }
    lines.join(&b'\n')
}

/// The length of the JSON string literal `s` starts with (quotes included).
fn string_len(s: &[u8]) -> Option<usize> {
    let mut i = 1;
    while i < s.len() {
        match s[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// Seeded damage to the real samples, and to the files of `AGENTLOG_IMPORT_FILES` (a folder of
/// other transcripts, Codex or Claude Code, when set).
#[test]
fn source_import_damaged_samples() {
    let mut samples = samples();
    if let Some(dir) = std::env::var_os("AGENTLOG_IMPORT_FILES") {
        samples.extend(files_of(Path::new(&dir)));
    }
    let mut rng = Rng(seed(0x50c7));
    for _ in 0..env_count("AGENTLOG_FUZZ_ITERS", 24) {
        let (name, file) = &samples[rng.below(samples.len() as u64) as usize];
        let data = input(rng.next() as u8, rng.next() as u8, &damaged(&mut rng, file));
        if let Some(dump) = std::env::var_os("AGENTLOG_FUZZ_DUMP") {
            std::fs::write(dump, &data).unwrap();
        }
        eprintln!("{name}: flags {}, cut {}", data[0], data[1]);
        source_import(&data);
    }
}

/// Writes the seed corpus: `cargo test --test import -- --ignored generate_source_seed_corpus`.
/// Each small sample whole, the large ones' first lines, in the ways of importing above.
#[test]
#[ignore = "writes fuzz/corpus/source_import; run by hand"]
fn generate_source_seed_corpus() {
    let out = corpus_dir();
    std::fs::create_dir_all(&out).unwrap();
    for (i, (name, file)) in samples().into_iter().enumerate() {
        let mut end = 0;
        for (n, _) in file.iter().enumerate().filter(|(_, &b)| b == b'\n') {
            if n >= 24 << 10 {
                break;
            }
            end = n + 1;
        }
        let flags = [0u8, 1, 3, 4, 3 | 4 | 8, 12][i];
        let stem = name.split("__").nth(1).unwrap_or("sample");
        let path = out.join(format!("seed-{i}-{stem}"));
        std::fs::write(path, input(flags, 128, &file[..end])).unwrap();
    }
}
