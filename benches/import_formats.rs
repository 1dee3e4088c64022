//! Import throughput of Codex rollouts and Claude Code transcripts (`agentlog::import`): a tree
//! of copies of the six real samples in `tests/data/import/` (`testkit/src/import_tree.rs`: each copy
//! its own session), imported into a new store per iteration with the default workers.
//! Throughput = the tree's bytes. One tree per format (`codex`, `claude-code`) and one of both
//! (`tree`), so that each format's figure is its own.
//!
//! `cargo bench -p agentlog-benches --bench import_formats` (`AGENTLOG_IMPORT_COPIES`, default 40:
//! copies of the samples, about 65 MB for both formats; `AGENTLOG_BENCH_DIR`, default /tmp:
//! where). With `AGENTLOG_IMPORT_TREE=DIR` the only tree is DIR as it is (a copy of a user's
//! `~/.claude/projects` or `~/.codex/sessions`, say): every file in it must import.
//!
//! For a tree of a gigabyte through the command line, `make_import_tree` writes the same copies
//! (README, "Importing Codex and Claude Code files").

use testkit::import_tree;

use std::path::{Path, PathBuf};
use std::time::Duration;

use agentlog::import::{import_paths, Options};
use agentlog::store::Store;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use import_tree::{make_tree, Which};

fn bench_dir() -> PathBuf {
    std::env::var_os("AGENTLOG_BENCH_DIR").map_or_else(std::env::temp_dir, PathBuf::from)
}

/// The bytes of the `*.jsonl` files under `dir`.
fn jsonl_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).expect("a directory") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            total += jsonl_bytes(&path);
        } else if path.extension().is_some_and(|x| x == "jsonl") {
            total += std::fs::metadata(&path).expect("a file").len();
        }
    }
    total
}

/// One criterion function: `tree` imported into a new store per iteration.
fn bench_tree(c: &mut Criterion, name: &str, tree: &Path, bytes: u64) {
    let mut group = c.benchmark_group("import_formats");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    group.throughput(Throughput::Bytes(bytes));
    group.bench_function(name, |b| {
        b.iter_batched(
            || tempfile::tempdir_in(bench_dir()).unwrap(),
            |store_dir| {
                let store = Store::open(store_dir.path()).unwrap();
                let summary = import_paths(
                    &store,
                    std::slice::from_ref(&tree.to_path_buf()),
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

fn bench(c: &mut Criterion) {
    let copies: usize = std::env::var("AGENTLOG_IMPORT_COPIES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    if let Some(dir) = std::env::var_os("AGENTLOG_IMPORT_TREE").map(PathBuf::from) {
        let bytes = jsonl_bytes(&dir);
        bench_tree(c, "tree", &dir, bytes);
        return;
    }
    for (name, which) in [
        ("tree", Which::Both),
        ("codex", Which::Codex),
        ("claude-code", Which::ClaudeCode),
    ] {
        let made = tempfile::tempdir_in(bench_dir()).unwrap();
        let (_, bytes) = make_tree(made.path(), copies, which);
        bench_tree(c, name, made.path(), bytes);
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
