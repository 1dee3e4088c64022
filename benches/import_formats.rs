//! Import throughput of Codex rollouts and Claude Code transcripts (`agentlog::import`): a tree
//! of copies of the six real samples in `tests/data/import/` (each copy its own session: Codex
//! thread ids and Claude Code file names made unique), imported into a new store per iteration
//! with the default workers. Throughput = the tree's bytes.
//!
//! `cargo bench -p agentlog-benches --bench import_formats` (`AGENTLOG_IMPORT_COPIES`, default 40: copies of the
//! six samples, about 65 MB; `AGENTLOG_BENCH_DIR`, default /tmp: where). With
//! `AGENTLOG_IMPORT_TREE=DIR` the tree is DIR as it is (a copy of a user's `~/.claude/projects` or
//! `~/.codex/sessions`, say): every file in it must import.

use std::path::{Path, PathBuf};
use std::time::Duration;

use agentlog::import::{import_paths, Options};
use agentlog::store::Store;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};

fn bench_dir() -> PathBuf {
    std::env::var_os("AGENTLOG_BENCH_DIR").map_or_else(std::env::temp_dir, PathBuf::from)
}

/// Writes `copies` copies of every sample under `root`; returns the bytes written.
fn make_tree(root: &Path, copies: usize) -> u64 {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/import");
    let mut bytes = 0u64;
    for sub in ["codex", "claude-code"] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(data.join(sub))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        for copy in 0..copies {
            let dir = root.join(sub).join(copy.to_string());
            std::fs::create_dir_all(&dir).unwrap();
            for (k, f) in files.iter().enumerate() {
                let mut text = std::fs::read(f).unwrap();
                let name = if sub == "codex" {
                    // A thread id of its own: the session_meta's id (first line) is the id.
                    let first = text.iter().position(|&b| b == b'\n').unwrap();
                    let head = String::from_utf8(text[..first].to_vec()).unwrap();
                    let v: serde_json::Value = serde_json::from_str(&head).unwrap();
                    let old = v["payload"]["id"].as_str().unwrap().to_owned();
                    let new = format!("{:08x}-0000-7000-8000-{:012x}", copy, k);
                    let head = head.replacen(&old, &new, 1);
                    text.splice(..first, head.into_bytes());
                    format!("rollout-{new}.jsonl")
                } else {
                    format!("{copy:04}-{k}.jsonl")
                };
                bytes += text.len() as u64;
                std::fs::write(dir.join(name), text).unwrap();
            }
        }
    }
    bytes
}

/// The bytes of the `*.jsonl` files under `dir`.
fn jsonl_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            total += jsonl_bytes(&path);
        } else if path.extension().is_some_and(|x| x == "jsonl") {
            total += std::fs::metadata(&path).unwrap().len();
        }
    }
    total
}

fn bench(c: &mut Criterion) {
    let copies: usize = std::env::var("AGENTLOG_IMPORT_COPIES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    let made = tempfile::tempdir_in(bench_dir()).unwrap();
    let given = std::env::var_os("AGENTLOG_IMPORT_TREE").map(PathBuf::from);
    let (tree, bytes) = match given {
        Some(dir) => {
            let bytes = jsonl_bytes(&dir);
            (dir, bytes)
        }
        None => {
            let bytes = make_tree(made.path(), copies);
            (made.path().to_path_buf(), bytes)
        }
    };
    let mut group = c.benchmark_group("import_formats");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    group.throughput(Throughput::Bytes(bytes));
    group.bench_function("tree", |b| {
        b.iter_batched(
            || tempfile::tempdir_in(bench_dir()).unwrap(),
            |store_dir| {
                let store = Store::open(store_dir.path()).unwrap();
                let summary = import_paths(
                    &store,
                    std::slice::from_ref(&tree),
                    &Options::default(),
                    |_, _| {},
                )
                .unwrap();
                assert!(
                    summary.warnings.iter().all(|w| !w.contains("not imported")),
                    "{:?}",
                    summary.warnings
                );
                assert!(!summary.created.is_empty());
                store_dir
            },
            BatchSize::PerIteration,
        );
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
