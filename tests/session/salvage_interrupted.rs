//! A salvage stopped between the cut and the writing of `damaged/<file>.after.jsonl` (kill -9,
//! power loss) lost those events from every later open: the log was sound again, so no later
//! `recover` knew there was anything to write. The cut now lists its files before it moves
//! them, and the next open of the session writes them.

use testkit::session::append;

use std::path::{Path, PathBuf};

use agentlog::log::{Log, Options, RecoveryMode};
use agentlog::session::{Session, SessionMeta, SessionOptions};

fn damaged_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.join("damaged"))
        .map(|r| r.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

fn ends_with(p: &Path, suffix: &str) -> bool {
    p.to_string_lossy().ends_with(suffix)
}

#[test]
fn the_open_after_an_interrupted_salvage_writes_the_events_after_the_damage() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let s = Session::create(&dir, SessionMeta::new("s", 0), SessionOptions::default()).unwrap();
    for i in 0..20 {
        append(
            &s,
            &format!(
                r#"{{"type":"user/message","data":{{"role":"user","content":[{{"type":"text","text":"message-{i:02}"}}]}},"surfaceOp":"append"}}"#
            ),
        );
    }
    s.close().unwrap();
    let seg = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "seg"))
        .unwrap();
    let mut bytes = std::fs::read(&seg).unwrap();
    let at = bytes.windows(10).position(|w| w == b"message-10").unwrap();
    bytes[at + 3] ^= 0x20;
    std::fs::write(&seg, bytes).unwrap();

    // The log layer's salvage alone: the cut, and nothing after it (what a kill right after
    // the cut leaves).
    let options = Options::default()
        .recovery(RecoveryMode::Salvage)
        .payload_schema(1);
    let log = Log::open(&dir, options).unwrap();
    let cut = log.recovery_report().cut.clone().unwrap();
    assert_eq!(cut.first_lost_seq, 10);
    drop(log);
    let files = damaged_files(&dir);
    assert!(
        !files.iter().any(|p| ends_with(p, ".after.jsonl")),
        "{files:?}"
    );

    // The next open, in the default mode (the log itself is sound now), writes them.
    let s = Session::open(&dir, SessionOptions::default()).unwrap();
    let salvaged = s.open_report().salvaged.clone();
    assert_eq!(salvaged.len(), 1, "{salvaged:?}");
    assert_eq!((salvaged[0].events, salvaged[0].seqs), (9, Some((11, 19))));
    let jsonl = salvaged[0].jsonl.clone().unwrap();
    let text = std::fs::read_to_string(&jsonl).unwrap();
    let texts: Vec<bool> = (11..20)
        .map(|i| text.contains(&format!("message-{i}")))
        .collect();
    assert_eq!(texts, vec![true; 9], "{text}");
    assert!(!text.contains("message-09"));
    s.close().unwrap();

    // Written once: the list is gone, a later open has nothing to write, and the file stays.
    let files = damaged_files(&dir);
    assert!(
        !files
            .iter()
            .any(|p| p.to_string_lossy().contains("PENDING")),
        "{files:?}"
    );
    let s = Session::open(&dir, SessionOptions::default()).unwrap();
    assert!(s.open_report().salvaged.is_empty());
    assert!(jsonl.is_file());
}
