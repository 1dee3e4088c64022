//! Checkpoint views: a history restored from a checkpoint builds its messages lazily, one at a
//! time from the log; what it shows equals a full replay (messages, lifecycle, statistics),
//! also after compactions that replace nodes of the restored prefix; an old-version, damaged or
//! foreign checkpoint is ignored; a log cut after the checkpoint is handled; a record damaged
//! after the checkpoint was written is named by `stats` and shown as a stand-in message.

use testkit::session as session_common;

use std::path::{Path, PathBuf};

use agentlog::log::{Options, RecoveryMode};
use agentlog::projection::Messages;
use agentlog::session::{CheckpointCheck, Session, SessionOptions, SessionReader, CHECKPOINT_FILE};
use proptest::collection::vec;
use proptest::prelude::*;
use session_common::{append, Driver};

fn options() -> SessionOptions {
    SessionOptions {
        // Small segments: seals (each writing a checkpoint) happen within a few dozen events.
        log: Options::default()
            .segment_size(4 << 10)
            .preallocate(1 << 10),
        ..SessionOptions::default()
    }
}

#[derive(Clone, Debug)]
enum Act {
    User,
    /// A turn of one step with this many tool calls, each answered.
    Turn(u8),
    /// A compaction replacing the current nodes from position `a` to position `b` (fractions of
    /// the surface, in 0..=255), by a summary.
    Compact(u8, u8),
    /// A clean close (checkpoint) and an open from it.
    Reopen,
}

fn act() -> impl Strategy<Value = Act> {
    prop_oneof![
        3 => Just(Act::User),
        4 => (0u8..3).prop_map(Act::Turn),
        1 => (any::<u8>(), any::<u8>()).prop_map(|(a, b)| Act::Compact(a, b)),
        2 => Just(Act::Reopen),
    ]
}

/// The generator: a [`Driver`] with this module's steps.
struct Gen(Driver);

impl std::ops::Deref for Gen {
    type Target = Driver;
    fn deref(&self) -> &Driver {
        &self.0
    }
}

impl std::ops::DerefMut for Gen {
    fn deref_mut(&mut self) -> &mut Driver {
        &mut self.0
    }
}

impl Gen {
    fn new(root: &Path) -> Gen {
        Gen(Driver::new(root, options))
    }

    fn run(&mut self, a: &Act) {
        match a {
            Act::User => {
                let n = self.n;
                self.ev(&format!(
                    r#"{{"type":"user/message","data":{{"role":"user","content":[{{"type":"text","text":"u{n} ünï 😀"}}]}},"surfaceOp":"append"}}"#
                ))
            }
            Act::Reopen => self.reopen(),
            Act::Compact(a, b) => {
                let seqs: Vec<u64> = self.s().messages().iter().map(|m| m.source_seq).collect();
                if seqs.is_empty() {
                    return;
                }
                let pick = |f: u8| seqs[(f as usize * (seqs.len() - 1)) / 255];
                let (x, y) = (pick(*a.min(b)), pick(*a.max(b)));
                self.ev(&format!(
                    r#"{{"type":"compact/start","data":{{"startSeq":{x},"endSeq":{y}}}}}"#
                ));
                self.ev(&format!(
                    r#"{{"type":"compact/summary","data":{{"startSeq":{x},"endSeq":{y},"summary":"s"}}}}"#
                ));
                self.ev(&format!(
                    r#"{{"type":"user/message","data":{{"role":"user","content":[{{"type":"text","text":"summary of {x}..{y}"}}]}},"surfaceOp":{{"op":"replace","startSeq":{x},"endSeq":{y}}}}}"#
                ));
                self.ev(r#"{"type":"compact/end","data":{"ok":true}}"#);
            }
            Act::Turn(calls) => {
                self.turn += 1;
                let t = self.turn;
                self.ev(&format!(r#"{{"type":"turn/start","data":{{"turn":{t}}}}}"#));
                self.ev(&format!(
                    r#"{{"type":"step/start","data":{{"turn":{t},"step":1}}}}"#
                ));
                let mut content = vec![format!(r#"{{"type":"text","text":"a{t}"}}"#)];
                content.extend((0..*calls).map(|c| {
                    format!(
                        r#"{{"type":"tool_use","id":"c{t}_{c}","name":"ls","input":{{"n":{c}}}}}"#
                    )
                }));
                self.ev(&format!(
                    r#"{{"type":"assistant/message","data":{{"turn":{t},"step":1,"message":{{"role":"assistant","content":[{}]}},"usage":{{"inputTokens":3,"outputTokens":2}}}},"surfaceOp":"append"}}"#,
                    content.join(",")
                ));
                for c in 0..*calls {
                    self.ev(&format!(
                        r#"{{"type":"tool/call","data":{{"turn":{t},"step":1,"callId":"c{t}_{c}","name":"ls","arguments":"{{}}"}}}}"#
                    ));
                }
                for c in 0..*calls {
                    // The first by callId, the others by name (the toolUseId the checkpoint
                    // keeps is the resolved one).
                    let id = if c == 0 {
                        format!(r#","callId":"c{t}_{c}""#)
                    } else {
                        String::new()
                    };
                    self.ev(&format!(
                        r#"{{"type":"tool/result","data":{{"turn":{t},"step":1,"message":{{"role":"tool","toolName":"ls","content":"out {c}","isError":false}}{id}}},"surfaceOp":"append"}}"#
                    ));
                }
                self.ev(&format!(
                    r#"{{"type":"step/end","data":{{"turn":{t},"step":1}}}}"#
                ));
                self.ev(&format!(
                    r#"{{"type":"turn/end","data":{{"turn":{t},"reason":{{"kind":"completed"}}}}}}"#
                ));
            }
        }
    }
}

fn checkpoint(dir: &Path) -> PathBuf {
    dir.join(CHECKPOINT_FILE)
}

fn covers(dir: &Path) -> u64 {
    let b = std::fs::read(checkpoint(dir)).unwrap();
    u64::from_le_bytes(b[32..40].try_into().unwrap())
}

/// Everything about a history, read through the public API in several orders (so a lazily
/// built message is built by each access path).
fn describe(m: &Messages) -> (usize, String, String, Vec<String>, Vec<String>, String) {
    let n = m.len();
    let mut canonical = Vec::new();
    m.write_canonical(&mut canonical);
    // By index from the end first: messages built out of order.
    let by_index: Vec<String> = (0..n)
        .rev()
        .map(|i| {
            let x = m.get(i).unwrap();
            format!("{}@{}", x.to_canonical_string(), x.source_seq)
        })
        .collect();
    let reversed: Vec<String> = m
        .iter()
        .rev()
        .map(|x| format!("{x}@{}", x.source_seq))
        .collect();
    (
        n,
        String::from_utf8(canonical).unwrap(),
        m.to_value().to_string(),
        by_index,
        reversed,
        format!("{:?}", m.last()),
    )
}

/// What a reader derives (statistics without `bytes`: the checkpoint file is counted there).
fn derived(dir: &Path) -> (Messages, String, String) {
    let r = SessionReader::open(dir).unwrap();
    let m = r.messages().unwrap();
    let l = r.lifecycle().unwrap();
    let mut stats = r.stats().unwrap();
    stats.bytes = 0;
    (
        m,
        format!(
            "{} {:?} {:?}",
            l.state(),
            l.open_work(),
            l.closed_unanswered()
        ),
        format!("{stats:?}"),
    )
}

/// With the checkpoint and without it (a full replay), the same results; a writer opened from
/// it holds the same history.
fn assert_views_equal_full_replay(dir: &Path) {
    let (lazy, lazy_life, lazy_stats) = derived(dir);
    let s = Session::open(dir, options()).unwrap();
    let writer = s.messages();
    drop(s);
    let saved = std::fs::read(checkpoint(dir)).ok();
    let _ = std::fs::remove_file(checkpoint(dir));
    let (eager, eager_life, eager_stats) = derived(dir);
    if let Some(b) = saved {
        std::fs::write(checkpoint(dir), b).unwrap();
    }
    assert_eq!(lazy_life, eager_life);
    assert_eq!(lazy_stats, eager_stats);
    // PartialEq first, on fresh histories (messages built by the comparison), then every
    // access path.
    assert_eq!(lazy, eager);
    assert_eq!(writer, eager);
    assert_eq!(describe(&lazy), describe(&eager));
    assert_eq!(describe(&writer), describe(&eager));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Restored (lazy) histories equal a full replay's, with compactions replacing nodes of
    /// the restored prefix, after clean closes and with a tail after the checkpoint.
    #[test]
    fn restored_views_equal_a_full_replay(acts in vec(act(), 1..30), tail in vec(act(), 0..6)) {
        let root = tempfile::tempdir().unwrap();
        let mut g = Gen::new(root.path());
        for a in &acts {
            g.run(a);
        }
        let dir = g.dir.clone();
        g.s.take().unwrap().close().unwrap();
        prop_assert_eq!(covers(&dir), g.n);
        assert_views_equal_full_replay(&dir);
        // A writer from the checkpoint goes on: compactions reach into its restored prefix.
        let s = Session::open(&dir, options()).unwrap();
        g.s = Some(s);
        for a in tail.iter().filter(|a| !matches!(a, Act::Reopen)) {
            g.run(a);
        }
        drop(g.s.take());
        assert_views_equal_full_replay(&dir);
        let check = SessionReader::open(&dir).unwrap().verify_checkpoint().unwrap();
        prop_assert!(matches!(check, CheckpointCheck::Matches { .. }), "{:?}", check);
    }
}

fn sample(root: &Path) -> (PathBuf, u64) {
    let mut g = Gen::new(root);
    for i in 0..12u8 {
        g.run(&Act::User);
        g.run(&Act::Turn(i % 3));
    }
    let dir = g.dir.clone();
    g.s.take().unwrap().close().unwrap();
    (dir, g.n)
}

/// Rewrites the checkpoint header's version and fixes its checksum.
fn set_version(dir: &Path, v: u16) {
    let mut b = std::fs::read(checkpoint(dir)).unwrap();
    b[8..10].copy_from_slice(&v.to_le_bytes());
    let c = crc32fast::hash(&b[..60]);
    b[60..64].copy_from_slice(&c.to_le_bytes());
    std::fs::write(checkpoint(dir), b).unwrap();
}

#[test]
fn a_checkpoint_of_another_format_version_is_ignored_and_rewritten() {
    let root = tempfile::tempdir().unwrap();
    let (dir, n) = sample(root.path());
    let with = derived(&dir);
    set_version(&dir, 1);
    match SessionReader::open(&dir)
        .unwrap()
        .verify_checkpoint()
        .unwrap()
    {
        CheckpointCheck::Unusable { reason } => {
            assert!(reason.contains("checkpoint format version 1"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(derived(&dir), with);
    let s = Session::open(&dir, options()).unwrap();
    s.close().unwrap();
    assert_eq!(
        SessionReader::open(&dir)
            .unwrap()
            .verify_checkpoint()
            .unwrap(),
        CheckpointCheck::Matches { covers: n }
    );
}

/// A damaged node table (checksums fixed, so it passes as a file): `verify` reports the
/// mismatch; a message whose entry names a seq past what the checkpoint covers is a stand-in
/// that says so, never a panic.
#[test]
fn a_node_table_that_lies_is_reported_by_verify_and_never_panics() {
    let root = tempfile::tempdir().unwrap();
    let (dir, n) = sample(root.path());
    let mut b = std::fs::read(checkpoint(&dir)).unwrap();
    // The projection section is the last one; its node table follows: error tag (1), last seq
    // (9), node count (8), id area length (8). Find it from the section lengths.
    let body = 64usize;
    let len0 = u64::from_le_bytes(b[body..body + 8].try_into().unwrap()) as usize;
    let s1 = body + 8 + len0;
    let len1 = u64::from_le_bytes(b[s1..s1 + 8].try_into().unwrap()) as usize;
    let s2 = s1 + 8 + len1 + 8;
    assert_eq!(b[s2], 0, "no projection error");
    assert_eq!(b[s2 + 1], 1, "a last seq");
    let nodes = u64::from_le_bytes(b[s2 + 10..s2 + 18].try_into().unwrap());
    assert!(nodes > 2);
    let table = s2 + 26;
    // Entry 1 names a seq far past the log.
    b[table + 16..table + 24].copy_from_slice(&(n + 1000).to_le_bytes());
    let body_crc = crc32fast::hash(&b[64..]);
    b[56..60].copy_from_slice(&body_crc.to_le_bytes());
    let head_crc = crc32fast::hash(&b[..60]);
    b[60..64].copy_from_slice(&head_crc.to_le_bytes());
    std::fs::write(checkpoint(&dir), &b).unwrap();
    let r = SessionReader::open(&dir).unwrap();
    match r.verify_checkpoint().unwrap() {
        CheckpointCheck::Mismatch { detail, .. } => {
            assert!(detail.contains("projection"), "{detail}")
        }
        other => panic!("{other:?}"),
    }
    let m = r.messages().unwrap();
    let bad = m.get(1).unwrap();
    assert_eq!(bad.role, agentlog::projection::Role::System);
    let text = bad.to_canonical_string();
    assert!(
        text.contains("agentlog: the message of the event at seq") && text.contains("past the"),
        "{text}"
    );
}

fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    v.sort();
    v
}

/// A record the checkpoint covers is damaged after it was written: `stats` (which still checks
/// every record's checksum) names it; a lazily built message of that record says it cannot be
/// read instead of failing or panicking.
#[test]
fn damage_after_the_checkpoint_is_named_by_stats_and_shown_by_the_message() {
    let root = tempfile::tempdir().unwrap();
    let (dir, _) = sample(root.path());
    let r = SessionReader::open(&dir).unwrap();
    let m = r.messages().unwrap();
    let first = m.get(0).unwrap().clone();
    let second = m.get(1).unwrap().clone();
    assert_eq!(first.source_seq, 0);
    // Damage the first record's payload: "u0" in its text.
    let seg = segments(&dir)[0].clone();
    let mut bytes = std::fs::read(&seg).unwrap();
    let at = bytes.windows(2).position(|w| w == b"u0").unwrap();
    bytes[at] ^= 0x20;
    std::fs::write(&seg, bytes).unwrap();
    let r = SessionReader::open(&dir).unwrap();
    let err = r.stats().unwrap_err().to_string();
    assert!(err.contains("seq 0") || err.contains("checksum"), "{err}");
    let m = r.messages().unwrap();
    let shown = m.get(0).unwrap();
    assert_ne!(*shown, first);
    assert_eq!(shown.source_seq, 0);
    assert!(
        shown
            .to_canonical_string()
            .contains("agentlog: the message of the event at seq 0 cannot be read"),
        "{shown}"
    );
    // The rest of the history is intact.
    assert_eq!(m.get(1), Some(&second));
}

/// The log is cut on open (salvage) at an event after the checkpoint: the checkpoint still
/// covers a prefix of what is left and is used; the results equal a full replay.
#[test]
fn a_log_cut_after_the_checkpoint_keeps_it_usable() {
    let root = tempfile::tempdir().unwrap();
    let (dir, n) = sample(root.path());
    // A tail after the checkpoint, dropped without a close, its last record then cut short.
    let s = Session::open(&dir, options()).unwrap();
    for i in 0..3 {
        append(
            &s,
            &format!(
                r#"{{"type":"user/message","data":{{"role":"user","content":[{{"type":"text","text":"tail{i}"}}]}},"surfaceOp":"append"}}"#
            ),
        );
    }
    drop(s);
    assert_eq!(covers(&dir), n);
    let seg = segments(&dir).pop().unwrap();
    let bytes = std::fs::read(&seg).unwrap();
    let at = bytes.windows(5).rposition(|w| w == b"tail2").unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&seg)
        .unwrap()
        .set_len(at as u64)
        .unwrap();
    let salvage = SessionOptions {
        log: options().log.recovery(RecoveryMode::Salvage),
        ..options()
    };
    let s = Session::open(&dir, salvage).unwrap();
    let report = s.open_report().clone();
    assert!(report.log.cut.is_some());
    assert_eq!(s.len(), n + 2);
    assert_eq!(
        s.reader().verify_checkpoint().unwrap(),
        CheckpointCheck::Matches { covers: n }
    );
    let texts: Vec<String> = s
        .messages()
        .iter()
        .rev()
        .take(2)
        .map(|m| m.to_canonical_string())
        .collect();
    assert!(
        texts[0].contains("tail1") && texts[1].contains("tail0"),
        "{texts:?}"
    );
    drop(s);
    assert_views_equal_full_replay(&dir);
}
