//! Regressions of the session layer: one module per bug that was fixed (each was a
//! `tests/regress_*.rs` file of its own); every test's doc comment says what went wrong.

mod repeated_approval_request {
    use testkit::session as session_common;

    use agentlog::session::TurnState;
    use session_common::{append, new_session};

    const HEAD: [&str; 4] = [
        r#"{"type":"turn/start","data":{"turn":1}}"#,
        r#"{"type":"step/start","data":{"turn":1,"step":1}}"#,
        r#"{"type":"assistant/message","data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"bash","input":{}}]}}}"#,
        r#"{"type":"tool/call","data":{"turn":1,"step":1,"callId":"a","name":"bash","arguments":"{}"}}"#,
    ];
    const REQUEST: &str =
        r#"{"type":"approval/request","data":{"turn":1,"step":1,"callId":"a","tool":"bash"}}"#;
    const RETRY: &str = r#"{"type":"approval/request","data":{"turn":1,"step":1,"callId":"a","tool":"bash","reason":"retry"}}"#;
    const DECISION: &str = r#"{"type":"approval/decision","data":{"turn":1,"step":1,"callId":"a","decision":"approved"}}"#;
    const RESULT: &str = r#"{"type":"tool/result","data":{"turn":1,"step":1,"message":{"role":"tool","toolName":"bash","content":"ok","isError":false},"callId":"a"}}"#;

    /// Two `approval/request`s for one call, then one `approval/decision`: the state stayed `awaitUserConfirm` (the decision settled only the first request, even after the result), and `pendingApprovals` listed the call id once per request.
    #[test]
    fn one_decision_settles_every_request_for_the_call() {
        let dir = tempfile::tempdir().unwrap();
        let s = new_session(dir.path());
        for json in HEAD.iter().chain(&[REQUEST, RETRY]) {
            append(&s, json);
        }
        // Audit repro r4b: two requests, no decision.
        assert_eq!(s.state(), TurnState::AwaitUserConfirm);
        assert_eq!(
            s.open_work().pending_approvals,
            ["a"],
            "the id is listed once"
        );
        // Audit repro r4: the decision, then the result.
        append(&s, DECISION);
        assert_eq!(s.state(), TurnState::ToolInvoking);
        assert!(s.open_work().pending_approvals.is_empty());
        append(&s, RESULT);
        assert_eq!(s.state(), TurnState::ToolInvoking);
        // A reader replaying the log agrees, at every point.
        let r = s.reader();
        let states: Vec<TurnState> = (4..=8)
            .map(|n| r.lifecycle_at(n).unwrap().0.state())
            .collect();
        assert_eq!(
            states,
            [
                TurnState::ToolInvoking,
                TurnState::AwaitUserConfirm,
                TurnState::AwaitUserConfirm,
                TurnState::ToolInvoking,
                TurnState::ToolInvoking
            ]
        );
    }

    /// Two `approval/request`s for one call, then one `approval/decision`: the state stayed `awaitUserConfirm` (the decision settled only the first request, even after the result), and `pendingApprovals` listed the call id once per request.
    #[test]
    fn a_request_after_the_decision_waits_again() {
        let dir = tempfile::tempdir().unwrap();
        let s = new_session(dir.path());
        for json in HEAD.iter().chain(&[REQUEST, DECISION, RETRY]) {
            append(&s, json);
        }
        assert_eq!(s.state(), TurnState::AwaitUserConfirm);
        assert_eq!(s.open_work().pending_approvals, ["a"]);
        append(&s, DECISION);
        assert_eq!(s.state(), TurnState::ToolInvoking);
    }
}

mod session_group_commit {
    use std::io;
    use std::path::Path;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use agentlog::event::parse_draft_line;
    use agentlog::log::{Durability, Options, OsStorage, Storage, StorageFile, Syncer};
    use agentlog::session::{Session, SessionMeta, SessionOptions};

    /// The operating system, with every fdatasync counted and made 3 ms slow (a slow disk).
    #[derive(Default)]
    struct SlowSyncs {
        syncs: Arc<AtomicU64>,
    }

    struct SlowFile {
        inner: Box<dyn StorageFile>,
        syncs: Arc<AtomicU64>,
    }

    struct SlowSyncer {
        inner: Arc<dyn Syncer>,
        syncs: Arc<AtomicU64>,
    }

    impl Syncer for SlowSyncer {
        fn sync_data(&self) -> io::Result<()> {
            self.syncs.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(3));
            self.inner.sync_data()
        }
    }

    impl StorageFile for SlowFile {
        fn len(&self) -> u64 {
            self.inner.len()
        }
        fn reserve(&mut self, offset: u64, len: u64) -> io::Result<()> {
            self.inner.reserve(offset, len)
        }
        fn is_reserved(&self, offset: u64, len: u64) -> bool {
            self.inner.is_reserved(offset, len)
        }
        fn write_at(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
            self.inner.write_at(offset, data)
        }
        fn punch(&mut self, offset: u64, len: u64) -> io::Result<()> {
            self.inner.punch(offset, len)
        }
        fn syncer(&self) -> Arc<dyn Syncer> {
            Arc::new(SlowSyncer {
                inner: self.inner.syncer(),
                syncs: Arc::clone(&self.syncs),
            })
        }
    }

    impl Storage for SlowSyncs {
        fn create(&self, path: &Path, capacity: u64) -> io::Result<Box<dyn StorageFile>> {
            Ok(Box::new(SlowFile {
                inner: OsStorage.create(path, capacity)?,
                syncs: Arc::clone(&self.syncs),
            }))
        }
        fn open(&self, path: &Path, capacity: u64) -> io::Result<Box<dyn StorageFile>> {
            Ok(Box::new(SlowFile {
                inner: OsStorage.open(path, capacity)?,
                syncs: Arc::clone(&self.syncs),
            }))
        }
        fn sync_dir(&self, dir: &Path) -> io::Result<()> {
            OsStorage.sync_dir(dir)
        }
        fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
            OsStorage.rename(from, to)
        }
    }

    /// Appenders of one session under `sync` durability each paid their own fdatasync: the session held its lock while waiting for the sync, so no two appends could share one (group commit did not happen through the session layer).
    #[test]
    fn eight_appenders_of_one_session_share_fdatasyncs() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Arc::new(SlowSyncs::default());
        let syncs = Arc::clone(&storage.syncs);
        let options = SessionOptions {
            log: Options::default()
                .durability(Durability::Sync)
                .storage(storage),
            keep_raw_chunks: true,
            ..SessionOptions::default()
        };
        let session = Arc::new(
            Session::create(dir.path().join("s"), SessionMeta::new("s", 0), options).unwrap(),
        );
        let before = syncs.load(Ordering::SeqCst);
        let per_thread = 40u64;
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let session = Arc::clone(&session);
                std::thread::spawn(move || {
                    for i in 0..per_thread {
                        let line = format!(
                            r#"{{"type":"error","data":{{"message":"thread {t} event {i}"}}}}"#
                        );
                        session
                            .append_draft(parse_draft_line(&line).unwrap())
                            .unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let appends = 8 * per_thread;
        assert_eq!(session.len(), appends);
        let used = syncs.load(Ordering::SeqCst) - before;
        // Serialized appenders would need one fdatasync each; shared ones need far fewer.
        assert!(
            used < appends / 2,
            "{used} fdatasyncs for {appends} appends"
        );
        // Every event is in the log exactly once.
        let reader = session.reader();
        let mut seen = std::collections::HashSet::new();
        for e in reader.events() {
            assert!(seen.insert(
                e.unwrap()
                    .to_canonical_string()
                    .split("\"data\"")
                    .nth(1)
                    .unwrap()
                    .to_string()
            ));
        }
        assert_eq!(seen.len() as u64, appends);
    }
}

mod source_names_no_call {
    use testkit::session as session_common;

    use agentlog::projection::Projector;
    use agentlog::session::Rule;
    use session_common::{d, session, T};

    /// The session's projection and a fresh projector over the stored events agree on which call
    /// each result answered, and with the session's lifecycle.
    fn answered(t: &T) -> Vec<(u64, Option<u64>)> {
        let r = t.s.reader();
        let mut p = Projector::new();
        for seq in 0..r.len() {
            p.apply(&r.get_owned(seq).unwrap()).unwrap();
        }
        let lifecycle: Vec<(u64, Option<u64>)> =
            t.s.lifecycle()
                .calls()
                .iter()
                .map(|c| (c.seq, c.answered_by))
                .collect();
        let projected: Vec<(u64, Option<u64>)> = lifecycle
            .iter()
            .map(|&(seq, _)| (seq, p.tool_call(seq).and_then(|c| c.answered_by)))
            .collect();
        assert_eq!(lifecycle, projected);
        lifecycle
    }

    fn last_tool_use_id(t: &T) -> String {
        let m = t.s.messages();
        let text = m.get(m.len() - 1).unwrap().to_canonical_string();
        let start = text.find(r#""toolUseId":""#).unwrap() + 13;
        text[start..].split('"').next().unwrap().to_string()
    }

    fn call(id: &str, name: &str, turn: u64) -> String {
        format!(
            r#"{{"type":"tool/call","data":{{"turn":{turn},"step":1,"callId":"{id}","name":"{name}","arguments":"{{}}"}}}}"#
        )
    }

    fn result_from(name: &str, turn: u64, src: u64) -> String {
        format!(
            r#"{{"type":"tool/result","data":{{"turn":{turn},"step":1,"message":{{"role":"tool","toolName":"{name}","content":"out","isError":false}}}},"sourceEventSeqs":[{src}]}}"#
        )
    }

    /// A `tool/result` whose `sourceEventSeqs[0]` names an event that is not a `tool/call` was refused by the session's lifecycle, while the projection fell through to the name rule (docs/events.md §5: "otherwise the earliest unanswered tool/call of the same turn and step with name == toolName"); the two layers disagreed.
    #[test]
    fn a_source_that_is_not_a_call_falls_through_to_the_name_rule() {
        let t = session();
        let turn_start = t.ok(r#"{"type":"turn/start","data":{"turn":1}}"#);
        t.ok(r#"{"type":"step/start","data":{"turn":1,"step":1}}"#);
        let message = t.ok(r#"{"type":"assistant/message","data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":"x"}]}},"sourceEventSeqs":[]}"#);
        let a = t.ok(&call("a", "bash", 1));
        let b = t.ok(&call("b", "bash", 1));
        let c = t.ok(&call("c", "read", 1));
        // Audit repro: sourceEventSeqs[0] names the assistant message: the earliest bash call, a.
        let r1 = t.ok(&result_from("bash", 1, message));
        assert_eq!(last_tool_use_id(&t), "a");
        // Naming the turn/start: on to the name rule again, b.
        let r2 = t.ok(&result_from("bash", 1, turn_start));
        assert_eq!(last_tool_use_id(&t), "b");
        assert_eq!(answered(&t), [(a, Some(r1)), (b, Some(r2)), (c, None)]);
        // No bash call left: refused, and the message says why.
        let msg = t.refused(&result_from("bash", 1, message), Rule::ResultAnswersCall);
        assert!(
            msg.contains(&format!(
                "sourceEventSeqs[0] = {message} names no tool/call"
            )),
            "{msg}"
        );
        // A source naming a call answers that call; an answered one is refused, not passed on to
        // the name rule.
        t.refused(&result_from("read", 1, a), Rule::AnsweredOnce);
        let r3 = t.ok(&result_from("read", 1, c));
        assert_eq!(last_tool_use_id(&t), "c");
        assert_eq!(answered(&t), [(a, Some(r1)), (b, Some(r2)), (c, Some(r3))]);
    }

    /// A `tool/result` whose `sourceEventSeqs[0]` names an event that is not a `tool/call` was refused by the session's lifecycle, while the projection fell through to the name rule (docs/events.md §5: "otherwise the earliest unanswered tool/call of the same turn and step with name == toolName"); the two layers disagreed.
    #[test]
    fn a_source_naming_a_call_of_another_turn_is_refused_not_passed_on() {
        let t = session();
        t.ok(r#"{"type":"turn/start","data":{"turn":1}}"#);
        t.ok(r#"{"type":"step/start","data":{"turn":1,"step":1}}"#);
        let old = t.ok(&call("old", "bash", 1));
        t.ok(r#"{"type":"step/end","data":{"turn":1,"step":1}}"#);
        t.ok(r#"{"type":"turn/end","data":{"turn":1,"reason":{"kind":"aborted"}}}"#);
        t.ok(r#"{"type":"turn/start","data":{"turn":2}}"#);
        t.ok(r#"{"type":"step/start","data":{"turn":2,"step":1}}"#);
        let new = t.ok(&call("new", "bash", 2));
        // The call named is of turn 1: §6 refuses it, even though a bash call of turn 2 is open.
        let msg = t.refused(&result_from("bash", 2, old), Rule::ResultAnswersCall);
        assert!(msg.contains("turn 1"), "{msg}");
        // The projection does not answer the turn-1 call with it either.
        let r = t.s.reader();
        let mut p = Projector::new();
        for seq in 0..r.len() {
            p.apply(&r.get_owned(seq).unwrap()).unwrap();
        }
        let stray = agentlog::event::Event {
            seq: r.len(),
            ..d(&result_from("bash", 2, old)).event
        };
        assert_eq!(p.call_answered_by(&stray).unwrap(), None);
        let rn = t.ok(&result_from("bash", 2, new));
        assert_eq!(answered(&t), [(new, Some(rn))]);
    }
}

mod stray_compaction_events {
    use testkit::session as session_common;

    use agentlog::event::{parse_draft_line, ReasonKind};
    use agentlog::session::{Rule, TurnState};
    use agentlog::store::{ImportOptions, Store};
    use session_common::{append, new_session};

    const R3: &str = "{\"type\":\"compact/end\",\"seq\":0,\"time\":0,\"data\":{\"ok\":false}}\n";
    const R3B: &str = "{\"type\":\"user/message\",\"seq\":0,\"time\":0,\"data\":{\"role\":\"user\",\"content\":[]}}\n{\"type\":\"compact/summary\",\"seq\":1,\"time\":1,\"data\":{\"startSeq\":0,\"endSeq\":0,\"summary\":\"s\"}}\n";

    /// A `compact/summary` or `compact/end` with no compaction open was refused (a rule "only inside a compaction" that docs/events.md lacks: §6 lets `compact/*` appear anywhere, §3 refuses only a new `compact/start` while one is open).
    #[test]
    fn import_accepts_stray_compaction_events_and_exports_them_verbatim() {
        for file in [R3, R3B] {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(dir.path()).unwrap();
            let id = store
                .import(file.as_bytes(), ImportOptions::default(), |_| {})
                .unwrap_or_else(|e| panic!("{file}: {e}"))
                .id;
            let reader = store.open_reader(&id).unwrap();
            let mut out = Vec::new();
            reader
                .export(&mut out, agentlog::session::HeaderLine::Omit, |_| {})
                .unwrap();
            assert_eq!(String::from_utf8(out).unwrap(), file);
            let (lifecycle, violations) = reader.lifecycle_at(reader.len()).unwrap();
            assert!(violations.is_empty(), "{violations:?}");
            assert_eq!(lifecycle.open_work().compaction, None);
        }
    }

    const STRAY_END: &str = r#"{"type":"compact/end","data":{"ok":true}}"#;

    /// A `compact/summary` or `compact/end` with no compaction open was refused (a rule "only inside a compaction" that docs/events.md lacks: §6 lets `compact/*` appear anywhere, §3 refuses only a new `compact/start` while one is open).
    #[test]
    fn a_stray_compact_end_closes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let s = new_session(dir.path());
        append(&s, r#"{"type":"turn/start","data":{"turn":1}}"#);
        append(&s, r#"{"type":"step/start","data":{"turn":1,"step":1}}"#);
        append(
            &s,
            r#"{"type":"assistant/message","data":{"turn":1,"step":1,"message":{"role":"assistant","content":[]}}}"#,
        );
        append(
            &s,
            r#"{"type":"tool/call","data":{"turn":1,"step":1,"callId":"c","name":"bash","arguments":"{}"}}"#,
        );
        append(
            &s,
            r#"{"type":"approval/request","data":{"turn":1,"step":1,"callId":"c","tool":"bash"}}"#,
        );
        let (state, work) = (s.state(), s.open_work());
        assert_eq!(state, TurnState::AwaitUserConfirm);
        // Inside an open step, with a call and an approval waiting: the turn's work is untouched.
        append(&s, STRAY_END);
        append(
            &s,
            r#"{"type":"compact/summary","data":{"startSeq":0,"endSeq":0,"summary":"s"}}"#,
        );
        assert_eq!(s.state(), state);
        assert_eq!(s.open_work(), work);
        // A real compaction, closed twice: the second end closes nothing, and a new one may start.
        let start = append(
            &s,
            r#"{"type":"compact/start","data":{"startSeq":0,"endSeq":0}}"#,
        );
        assert_eq!(s.open_work().compaction, start);
        assert!(start.is_some());
        let err = s
            .append_draft(
                parse_draft_line(r#"{"type":"compact/start","data":{"startSeq":0,"endSeq":0}}"#)
                    .unwrap(),
            )
            .unwrap_err();
        assert_eq!(
            err.lifecycle().map(|l| l.rule),
            Some(Rule::OneCompactionAtATime)
        );
        append(&s, STRAY_END);
        append(&s, STRAY_END);
        assert_eq!(s.open_work(), work);
        append(
            &s,
            r#"{"type":"compact/start","data":{"startSeq":0,"endSeq":0}}"#,
        );
        append(&s, STRAY_END);
        // close closes the turn only: no compaction is open, so no compact/end is added.
        let closers = s.close_open_work(ReasonKind::Interrupted).unwrap();
        let r = s.reader();
        let types: Vec<String> = closers
            .iter()
            .map(|&seq| r.get(seq).unwrap().type_name().to_string())
            .collect();
        assert_eq!(types, ["tool/result", "step/end", "turn/end"]);
        assert!(s.open_work().is_empty());
    }
}
