//! Numbers from file headers and from callers overflowed: an index header `count` of 2^62 made
//! every open panic in debug builds (and work by accident in release), a segment header base seq
//! near u64::MAX panicked or gave self-contradicting errors, and `wait(Duration::MAX)` panicked.

mod cli_common;
mod common;

use std::path::Path;
use std::time::Duration;

use agentlog::log::{Log, LogReader, Options};
use cli_common::Cli;

/// Writes `value` at `at` in a 64-byte file header, with the header's crc fixed.
fn patch_header(path: &Path, at: usize, value: u64) {
    common::rewrite_header(path, at, &value.to_le_bytes());
}

fn files(dir: &Path, ext: &str) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v
}

#[test]
fn a_huge_index_count_is_a_wrong_index_not_a_panic() {
    let cli = Cli::new();
    let id = cli.import_example("coding-session", &[]);
    let idx = files(&cli.session_dir(&id), "idx")[0].clone();
    patch_header(&idx, 40, 1 << 62); // count
    assert_eq!(cli.run(&["export", &id]).ok().lines().count(), 107);
    let verify = cli.run(&["verify", &id]);
    assert!(verify.ok().contains("index"), "{}", verify.stdout);
    cli.run(&["ls"]).ok();
    // A writer open rebuilds it.
    cli.run(&["recover", &id]).ok();
    assert!(!cli.run(&["verify", &id]).ok().contains("note"));
}

#[test]
fn a_base_seq_near_the_end_of_u64_is_named_damage() {
    let cli = Cli::new();
    let id = cli.import_example("fix-typo", &[]);
    let dir = cli.session_dir(&id);
    let seg = files(&dir, "seg")[0].clone();
    let base = u64::MAX - 5;
    patch_header(&seg, 16, base);
    let renamed = dir.join(format!("{base:020}.seg"));
    std::fs::rename(&seg, &renamed).unwrap();
    std::fs::remove_file(files(&dir, "idx")[0].clone()).unwrap();
    for args in [vec!["export", id.as_str()], vec!["verify", id.as_str()]] {
        let run = cli.run(&args);
        run.fails(1);
        let all = format!("{}{}", run.stdout, run.stderr);
        assert!(all.contains(&format!("{base:020}.seg")), "{args:?}: {all}");
        assert!(all.contains("base seq"), "{args:?}: {all}");
    }
}

#[test]
fn waiting_with_the_longest_timeout_waits_for_the_next_append() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = Log::open(dir.path().join("log"), Options::default()).unwrap();
    log.append(b"first").unwrap();
    let mut reader = LogReader::open(dir.path().join("log")).unwrap();
    assert_eq!(reader.len(), 1);
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(50));
            log.append(b"second").unwrap();
        });
        assert_eq!(reader.wait(Duration::MAX).unwrap(), 2);
    });
    let mut attached = log.reader();
    let len = attached.len();
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(50));
            log.append(b"third").unwrap();
        });
        assert_eq!(attached.wait(Duration::MAX).unwrap(), len + 1);
    });
}
