//! Checkpoints (`CHECKPOINT`): written at segment seals and clean closes; open, `lifecycle`
//! (status), `derive_messages` and `stats` start from it and replay only the tail, with results
//! equal to a full replay; a missing, damaged or stale one is ignored (and rebuilt by the next
//! writer); `verify_checkpoint` compares it with a full replay.

use std::path::{Path, PathBuf};

use agentlog::log::{Options, RecoveryMode};
use agentlog::session::{CheckpointCheck, Session, SessionOptions, SessionReader, CHECKPOINT_FILE};
use proptest::collection::vec;
use proptest::prelude::*;
use testkit::session::{append, Driver};

fn options() -> SessionOptions {
    SessionOptions {
        // Small segments: a session of a few dozen events seals several, each writing a
        // checkpoint.
        log: Options::default()
            .segment_size(4 << 10)
            .preallocate(1 << 10),
        ..SessionOptions::default()
    }
}

/// One step of a generated session.
#[derive(Clone, Debug)]
enum Act {
    User,
    Noise,
    /// A turn: per step, the number of tool calls and how each result names its call (0 callId,
    /// 1 sourceEventSeqs, 2 by name, 3 never answered), and an approval request or not.
    Turn(Vec<(Vec<u8>, bool)>),
    /// A turn left open (a crash): a step with one unanswered call.
    OpenTurn,
    Compaction,
    /// Close the session cleanly and open it again (a checkpoint at the close).
    Reopen,
}

fn act() -> impl Strategy<Value = Act> {
    prop_oneof![
        3 => Just(Act::User),
        1 => Just(Act::Noise),
        5 => vec((vec(0u8..4, 0..4), any::<bool>()), 0..3).prop_map(Act::Turn),
        1 => Just(Act::OpenTurn),
        1 => Just(Act::Compaction),
        1 => Just(Act::Reopen),
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

    fn close_open_work(&mut self) {
        if !self.s().open_work().is_empty() {
            let n = self
                .s()
                .close_open_work(agentlog::event::ReasonKind::Interrupted)
                .unwrap();
            self.n += n.len() as u64;
        }
    }

    fn run(&mut self, a: &Act) {
        match a {
            Act::User => {
                self.close_open_work();
                let n = self.n;
                self.ev(&format!(
                    r#"{{"type":"user/message","data":{{"role":"user","content":[{{"type":"text","text":"u{n}"}}]}},"surfaceOp":"append"}}"#
                ))
            }
            Act::Noise => self.ev(r#"{"type":"sandbox/event","data":{"kind":"start"}}"#),
            Act::Compaction => {
                self.close_open_work();
                let u = self.n.saturating_sub(1);
                self.ev(&format!(
                    r#"{{"type":"compact/start","data":{{"startSeq":{u},"endSeq":{u}}}}}"#
                ));
                self.ev(r#"{"type":"compact/end","data":{"ok":true}}"#);
            }
            Act::Reopen => self.reopen(),
            Act::OpenTurn => {
                self.close_open_work();
                self.turn += 1;
                let t = self.turn;
                self.ev(&format!(r#"{{"type":"turn/start","data":{{"turn":{t}}}}}"#));
                self.ev(&format!(
                    r#"{{"type":"step/start","data":{{"turn":{t},"step":1}}}}"#
                ));
                self.ev(&format!(
                    r#"{{"type":"assistant/message","data":{{"turn":{t},"step":1,"message":{{"role":"assistant","content":[{{"type":"tool_use","id":"o{t}","name":"ls","input":{{}}}}]}}}},"surfaceOp":"append","sourceEventSeqs":[]}}"#
                ));
                self.ev(&format!(
                    r#"{{"type":"tool/call","data":{{"turn":{t},"step":1,"callId":"o{t}","name":"ls","arguments":"{{}}"}}}}"#
                ));
            }
            Act::Turn(steps) => {
                self.close_open_work();
                self.turn += 1;
                let t = self.turn;
                self.ev(&format!(r#"{{"type":"turn/start","data":{{"turn":{t}}}}}"#));
                for (i, (modes, approval)) in steps.iter().enumerate() {
                    let st = i as u64 + 1;
                    self.ev(&format!(
                        r#"{{"type":"step/start","data":{{"turn":{t},"step":{st}}}}}"#
                    ));
                    self.ev(&format!(
                        r#"{{"type":"assistant/chunk","data":{{"turn":{t},"step":{st},"chunk":{{"type":"text-delta","text":"x"}}}}}}"#
                    ));
                    let uses: Vec<String> = (0..modes.len())
                        .map(|c| {
                            format!(
                                r#"{{"type":"tool_use","id":"c{t}_{st}_{c}","name":"t{}","input":{{}}}}"#,
                                c % 2
                            )
                        })
                        .collect();
                    let mut content = vec![format!(r#"{{"type":"text","text":"a{t}.{st}"}}"#)];
                    content.extend(uses);
                    self.ev(&format!(
                        r#"{{"type":"assistant/message","data":{{"turn":{t},"step":{st},"message":{{"role":"assistant","content":[{}]}},"usage":{{"inputTokens":3,"outputTokens":2}}}},"surfaceOp":"append","sourceEventSeqs":[]}}"#,
                        content.join(",")
                    ));
                    let mut call_seqs = Vec::new();
                    for c in 0..modes.len() {
                        call_seqs.push(self.n);
                        self.ev(&format!(
                            r#"{{"type":"tool/call","data":{{"turn":{t},"step":{st},"callId":"c{t}_{st}_{c}","name":"t{}","arguments":"{{}}"}}}}"#,
                            c % 2
                        ));
                    }
                    if *approval && !modes.is_empty() {
                        self.ev(&format!(
                            r#"{{"type":"approval/request","data":{{"turn":{t},"step":{st},"callId":"c{t}_{st}_0","tool":"t0"}}}}"#
                        ));
                        self.ev(&format!(
                            r#"{{"type":"approval/decision","data":{{"turn":{t},"step":{st},"callId":"c{t}_{st}_0","decision":"approved"}}}}"#
                        ));
                    }
                    // Results by name take the earliest unanswered call of that name: answer
                    // in call order so every mode names the call it means.
                    for (c, &mode) in modes.iter().enumerate() {
                        let name = format!("t{}", c % 2);
                        let (id, src) = match mode {
                            0 => (format!(r#","callId":"c{t}_{st}_{c}""#), String::new()),
                            1 => (
                                String::new(),
                                format!(r#","sourceEventSeqs":[{}]"#, call_seqs[c]),
                            ),
                            2 => (String::new(), String::new()),
                            _ => continue,
                        };
                        // By name only when no earlier call of the name is left unanswered.
                        if mode == 2
                            && modes[..c]
                                .iter()
                                .enumerate()
                                .any(|(k, &m)| m == 3 && k % 2 == c % 2)
                        {
                            continue;
                        }
                        self.ev(&format!(
                            r#"{{"type":"tool/result","data":{{"turn":{t},"step":{st},"message":{{"role":"tool","toolName":"{name}","content":"ok {c}","isError":{}}}{id}}},"surfaceOp":"append"{src}}}"#,
                            c == 1
                        ));
                    }
                    self.ev(&format!(
                        r#"{{"type":"step/end","data":{{"turn":{t},"step":{st}}}}}"#
                    ));
                }
                self.ev(&format!(
                    r#"{{"type":"turn/end","data":{{"turn":{t},"reason":{{"kind":"completed"}}}}}}"#
                ));
            }
        }
    }
}

/// What a reader derives, with `bytes` left out of the statistics (the checkpoint file is part
/// of them).
#[derive(Debug, PartialEq)]
struct Seen {
    len: u64,
    state: String,
    open_work: String,
    closed: String,
    next_turn: u64,
    messages: String,
    in_flight: Vec<(u64, String)>,
    /// Both provider renderings: what they add (synthetic results) depends on state the
    /// checkpoint keeps beside the messages (calls closed or in flight, the last step end).
    rendered: String,
    stats: String,
}

fn seen(dir: &Path) -> Seen {
    let r = SessionReader::open(dir).unwrap();
    let l = r.lifecycle().unwrap();
    let m = r.messages().unwrap();
    let mut stats = r.stats().unwrap();
    stats.bytes = 0;
    Seen {
        len: r.len(),
        state: l.state().to_string(),
        open_work: format!("{:?}", l.open_work()),
        closed: format!("{:?}", l.closed_unanswered()),
        next_turn: l.next_turn(),
        messages: m.to_canonical_string(),
        in_flight: m.in_flight().map(|(s, id)| (s, id.to_string())).collect(),
        rendered: format!(
            "{} {}",
            agentlog::projection::render_openai(&m),
            agentlog::projection::render_anthropic(&m)
        ),
        stats: format!("{stats:?}"),
    }
}

/// What an opened writer holds.
fn opened(dir: &Path) -> (String, String, String, Option<i64>, usize) {
    let s = Session::open(dir, options()).unwrap();
    let report = s.open_report().clone();
    let out = (
        s.state().to_string(),
        format!("{:?}", s.open_work()),
        s.messages().to_canonical_string(),
        s.last_event_time(),
        report.violations.len(),
    );
    drop(s);
    out
}

fn checkpoint(dir: &Path) -> PathBuf {
    dir.join(CHECKPOINT_FILE)
}

fn covers(dir: &Path) -> u64 {
    let b = std::fs::read(checkpoint(dir)).unwrap();
    u64::from_le_bytes(b[32..40].try_into().unwrap())
}

/// Everything derived with the checkpoint, then again after removing it (a full replay).
fn assert_same_as_full_replay(dir: &Path) {
    let with = seen(dir);
    let with_open = opened(dir);
    let saved = std::fs::read(checkpoint(dir)).ok();
    let _ = std::fs::remove_file(checkpoint(dir));
    let full = seen(dir);
    let full_open = opened(dir);
    assert_eq!(with, full);
    assert_eq!(with_open, full_open);
    if let Some(b) = saved {
        std::fs::write(checkpoint(dir), b).unwrap();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// A tail-only replay from the checkpoint gives what a full replay gives: after a clean
    /// close (checkpoint = everything) and with a tail appended after it (dropped without
    /// close).
    #[test]
    fn checkpoint_plus_tail_equals_full_replay(acts in vec(act(), 1..24), tail in vec(act(), 0..6)) {
        let root = tempfile::tempdir().unwrap();
        let mut g = Gen::new(root.path());
        for a in &acts {
            g.run(a);
        }
        let dir = g.dir.clone();
        g.s.take().unwrap().close().unwrap();
        prop_assert_eq!(covers(&dir), g.n);
        prop_assert_eq!(
            SessionReader::open(&dir).unwrap().verify_checkpoint().unwrap(),
            CheckpointCheck::Matches { covers: g.n }
        );
        assert_same_as_full_replay(&dir);

        // A tail after the checkpoint (no clean close: the checkpoint is not brought up to
        // date, but seals may have written newer ones).
        let s = Session::open(&dir, options()).unwrap();
        g.s = Some(s);
        for a in tail.iter().filter(|a| !matches!(a, Act::Reopen)) {
            g.run(a);
        }
        let s = g.s.take().unwrap();
        drop(s);
        prop_assert!(covers(&dir) <= g.n);
        assert_same_as_full_replay(&dir);
        let check = SessionReader::open(&dir).unwrap().verify_checkpoint().unwrap();
        let matched = matches!(check, CheckpointCheck::Matches { .. });
        prop_assert!(matched, "{:?}", check);
    }
}

/// A session of `turns` turns with tool calls, closed (checkpoint written).
fn sample(root: &Path, turns: usize) -> (PathBuf, u64) {
    let mut g = Gen::new(root);
    for i in 0..turns {
        g.run(&Act::Turn(vec![
            (vec![0, 1, 2], i % 2 == 0),
            (vec![3], false),
        ]));
        g.run(&Act::User);
    }
    g.run(&Act::OpenTurn);
    let dir = g.dir.clone();
    g.s.take().unwrap().close().unwrap();
    (dir, g.n)
}

#[test]
fn seals_write_checkpoints_before_the_close() {
    let root = tempfile::tempdir().unwrap();
    let mut g = Gen::new(root.path());
    for _ in 0..40 {
        g.run(&Act::Turn(vec![(vec![0, 1], false)]));
    }
    // Many 4 KiB segments were sealed: a checkpoint exists while the session is open.
    let dir = g.dir.clone();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !checkpoint(&dir).exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(checkpoint(&dir).exists(), "no checkpoint after the seals");
    let c = covers(&dir);
    assert!(c > 0 && c <= g.n, "covers {c} of {}", g.n);
    let s = g.s.take().unwrap();
    s.close().unwrap();
    assert_eq!(covers(&dir), g.n, "the close covers everything");
}

/// A checkpoint holds what the session's events hold (messages, tool calls): like the
/// segments, it is readable by its owner only (it was created 0644).
#[test]
fn the_checkpoint_is_private_like_the_segments() {
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().unwrap();
    let (dir, _) = sample(root.path(), 6);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&checkpoint(&dir)), 0o600);
    // A rewrite by a later writer too (a new file renamed over it).
    std::fs::remove_file(checkpoint(&dir)).unwrap();
    Session::open(&dir, options()).unwrap().close().unwrap();
    assert_eq!(mode(&checkpoint(&dir)), 0o600);
}

#[test]
fn a_missing_checkpoint_is_rebuilt_by_the_next_close() {
    let root = tempfile::tempdir().unwrap();
    let (dir, n) = sample(root.path(), 6);
    std::fs::remove_file(checkpoint(&dir)).unwrap();
    let r = SessionReader::open(&dir).unwrap();
    assert_eq!(r.verify_checkpoint().unwrap(), CheckpointCheck::Missing);
    let _ = seen(&dir);
    let s = Session::open(&dir, options()).unwrap();
    s.close().unwrap();
    assert_eq!(covers(&dir), n);
    assert_eq!(
        r.verify_checkpoint().unwrap(),
        CheckpointCheck::Matches { covers: n }
    );
}

#[test]
fn a_damaged_checkpoint_is_ignored_and_rebuilt() {
    let root = tempfile::tempdir().unwrap();
    let (dir, n) = sample(root.path(), 6);
    let full = {
        let saved = std::fs::read(checkpoint(&dir)).unwrap();
        std::fs::remove_file(checkpoint(&dir)).unwrap();
        let f = seen(&dir);
        std::fs::write(checkpoint(&dir), saved).unwrap();
        f
    };
    for at in [5usize, 40, 70, 100] {
        let mut b = std::fs::read(checkpoint(&dir)).unwrap();
        let at = at.min(b.len() - 1);
        b[at] ^= 0x55;
        std::fs::write(checkpoint(&dir), &b).unwrap();
        let r = SessionReader::open(&dir).unwrap();
        match r.verify_checkpoint().unwrap() {
            CheckpointCheck::Unusable { reason } => assert!(
                reason.contains("damaged") || reason.contains("magic"),
                "{reason}"
            ),
            other => panic!("byte {at}: {other:?}"),
        }
        // Readers are not bothered: the same results as a full replay.
        assert_eq!(seen(&dir), full, "byte {at}");
        // A writer opens, and its close writes a good one.
        let s = Session::open(&dir, options()).unwrap();
        s.close().unwrap();
        assert_eq!(
            r.verify_checkpoint().unwrap(),
            CheckpointCheck::Matches { covers: n }
        );
    }
    // Cut short.
    let b = std::fs::read(checkpoint(&dir)).unwrap();
    std::fs::write(checkpoint(&dir), &b[..b.len() / 2]).unwrap();
    assert_eq!(seen(&dir), full);
}

#[test]
fn a_checkpoint_of_another_log_is_stale() {
    let root = tempfile::tempdir().unwrap();
    let (a, _) = sample(&root.path().join("a"), 3);
    let (b, _) = sample(&root.path().join("b"), 3);
    let full = seen(&b);
    std::fs::copy(checkpoint(&a), checkpoint(&b)).unwrap();
    match SessionReader::open(&b)
        .unwrap()
        .verify_checkpoint()
        .unwrap()
    {
        CheckpointCheck::Unusable { reason } => assert!(reason.contains("another log"), "{reason}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(seen(&b), full);
}

/// The log loses its last event after the checkpoint was written (a cut on open): the
/// checkpoint covers more than the log holds and is not used; after a different event takes the
/// same seq, the crc of the covered event tells it apart.
#[test]
fn a_log_cut_after_the_checkpoint_makes_it_stale() {
    let root = tempfile::tempdir().unwrap();
    let (dir, n) = sample(root.path(), 2);
    let seg = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .max()
        .unwrap();
    // Cut the file inside the last record: at the last occurrence of the call id of its last
    // event (the open turn's tool/call, "o3").
    let bytes = std::fs::read(&seg).unwrap();
    let at = bytes.windows(2).rposition(|w| w == b"o3").unwrap();
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
    let s = Session::open(&dir, salvage.clone()).unwrap();
    let report = s.open_report().clone();
    assert!(report.log.cut.is_some(), "the cut is reported");
    assert_eq!(s.len(), n - 1);
    match s.reader().verify_checkpoint().unwrap() {
        CheckpointCheck::Unusable { reason } => assert!(reason.contains("stale"), "{reason}"),
        other => panic!("{other:?}"),
    }
    // What the writer derived is the full replay's.
    let state = (s.state(), s.open_work(), s.messages().to_canonical_string());
    // Another event at the cut seq: the log is as long as the checkpoint says again.
    append(&s, r#"{"type":"sandbox/event","data":{"kind":"other"}}"#);
    assert_eq!(s.len(), n);
    assert_eq!(covers(&dir), n);
    match s.reader().verify_checkpoint().unwrap() {
        CheckpointCheck::Unusable { reason } => {
            assert!(
                reason.contains("not the one it was derived from"),
                "{reason}"
            )
        }
        other => panic!("{other:?}"),
    }
    drop(s);
    let saved = std::fs::read(checkpoint(&dir)).unwrap();
    let with = seen(&dir);
    std::fs::remove_file(checkpoint(&dir)).unwrap();
    assert_eq!(with, seen(&dir));
    std::fs::write(checkpoint(&dir), saved).unwrap();
    let s = Session::open(&dir, salvage).unwrap();
    assert_eq!(
        (s.state(), s.open_work()),
        (state.0, state.1),
        "a sandbox event changes no state"
    );
}

#[test]
fn verify_reports_a_checkpoint_that_differs_from_a_full_replay() {
    let root = tempfile::tempdir().unwrap();
    let (dir, n) = sample(root.path(), 4);
    let mut b = std::fs::read(checkpoint(&dir)).unwrap();
    // The body's first section (the lifecycle) starts with its length (8 bytes), the events
    // covered (8), then the last event time (8): change the time, fix both checksums.
    b[64 + 16] ^= 0x01;
    let body_crc = crc32fast::hash(&b[64..]);
    b[56..60].copy_from_slice(&body_crc.to_le_bytes());
    let head_crc = crc32fast::hash(&b[..60]);
    b[60..64].copy_from_slice(&head_crc.to_le_bytes());
    std::fs::write(checkpoint(&dir), &b).unwrap();
    match SessionReader::open(&dir)
        .unwrap()
        .verify_checkpoint()
        .unwrap()
    {
        CheckpointCheck::Mismatch { covers, detail } => {
            assert_eq!(covers, n);
            assert!(detail.contains("lifecycle state"), "{detail}");
        }
        other => panic!("{other:?}"),
    }
}

/// A crash between writing the temporary file and the rename: the old checkpoint stays in use,
/// the temporary file is never read, and the next writer removes it.
#[test]
fn a_crash_before_the_rename_leaves_the_old_checkpoint() {
    let root = tempfile::tempdir().unwrap();
    let (dir, n) = sample(root.path(), 3);
    let old = std::fs::read(checkpoint(&dir)).unwrap();
    // More events, then what a crashed close leaves: a complete temporary file (here a copy of
    // garbage of the right length) that was never renamed.
    let s = Session::open(&dir, options()).unwrap();
    append(&s, r#"{"type":"sandbox/event","data":{"kind":"x"}}"#);
    drop(s);
    let tmp = dir.join(format!(
        "{}.999.0",
        agentlog::session::CHECKPOINT_TMP_PREFIX
    ));
    std::fs::write(&tmp, vec![0xA5; old.len()]).unwrap();
    assert_eq!(std::fs::read(checkpoint(&dir)).unwrap(), old);
    assert_eq!(covers(&dir), n);
    assert_same_as_full_replay(&dir);
    let s = Session::open(&dir, options()).unwrap();
    assert!(!tmp.exists(), "the writer removes what a crash left");
    assert_eq!(s.len(), n + 1);
    s.close().unwrap();
    assert_eq!(covers(&dir), n + 1);
}

/// The renderings answer a tool use that has no `tool/call` once its step has ended; a reader
/// restored from a checkpoint did not know where the last step ended (the checkpoint did not
/// keep it) and would have left the tool use unanswered. The checkpoint (version 3) keeps it.
#[test]
fn a_restored_history_knows_its_last_step_end() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("s");
    let s = Session::create(&dir, agentlog::session::SessionMeta::new("s", 0), options()).unwrap();
    for line in [
        r#"{"type":"turn/start","data":{"turn":1}}"#,
        r#"{"type":"user/message","data":{"role":"user","content":[{"type":"text","text":"go"}]}}"#,
        r#"{"type":"step/start","data":{"turn":1,"step":1}}"#,
        r#"{"type":"assistant/message","data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"tool_use","id":"u1","name":"ls","input":{}}]}}}"#,
        r#"{"type":"step/end","data":{"turn":1,"step":1}}"#,
        r#"{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}"#,
    ] {
        append(&s, line);
    }
    s.close().unwrap();
    assert_eq!(covers(&dir), 6);
    let r = SessionReader::open(&dir).unwrap();
    let rendered = agentlog::projection::render_openai(&r.messages().unwrap()).to_string();
    assert!(rendered.contains(r#""tool_call_id":"u1""#), "{rendered}");
    assert_eq!(
        r.verify_checkpoint().unwrap(),
        CheckpointCheck::Matches { covers: 6 }
    );
    assert_same_as_full_replay(&dir);
}
