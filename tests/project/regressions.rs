//! Regressions of the project layer: one module per bug that was fixed (each was a
//! `tests/regress_*.rs` file of its own); every test's doc comment says what went wrong.

mod repeated_call_ids {
    use testkit::session as session_common;

    use testkit::project as project_common;

    use agentlog::event::ReasonKind;
    use agentlog::projection::Projector;
    use agentlog::session::{replay, Rule, SessionStats};
    use agentlog::store::{ImportOptions, Store};
    use project_common::Log;
    use session_common::{d, new_session};

    /// Audit repro r7: `call_0` in step 1 and again in step 2 of turn 1, each answered by source.
    const R7: &str = r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}
{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}
{"type":"tool/call","seq":2,"time":2,"data":{"turn":1,"step":1,"callId":"call_0","name":"bash","arguments":"{}"}}
{"type":"tool/result","seq":3,"time":3,"data":{"turn":1,"step":1,"message":{"role":"tool","toolName":"bash","content":"x","isError":false}},"sourceEventSeqs":[2]}
{"type":"step/end","seq":4,"time":4,"data":{"turn":1,"step":1}}
{"type":"step/start","seq":5,"time":5,"data":{"turn":1,"step":2}}
{"type":"tool/call","seq":6,"time":6,"data":{"turn":1,"step":2,"callId":"call_0","name":"bash","arguments":"{}"}}
{"type":"tool/result","seq":7,"time":7,"data":{"turn":1,"step":2,"message":{"role":"tool","toolName":"bash","content":"y","isError":false}},"sourceEventSeqs":[6]}
"#;

    /// Two `tool/call`s with the same `callId` in one turn were refused (a rule "call ids are unique within a turn" that docs/events.md §6 does not have), and a result giving that id resolved to the first call even when it was answered already.
    #[test]
    fn import_accepts_a_repeated_call_id_and_projects_both_results() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let id = store
            .import(R7.as_bytes(), ImportOptions::default(), |_| {})
            .unwrap()
            .id;
        let reader = store.open_reader(&id).unwrap();
        let history = reader.messages().unwrap().to_canonical_string();
        assert_eq!(
            history.matches(r#""toolUseId":"call_0""#).count(),
            2,
            "{history}"
        );
        let report = replay(&reader, None).unwrap();
        let recorded: Vec<_> = report
            .steps
            .iter()
            .flat_map(|s| &s.calls)
            .map(|c| (c.call.seq, c.call.recorded_seq))
            .collect();
        assert_eq!(recorded, [(2, Some(3)), (6, Some(7))]);
    }

    fn call(id: &str, step: u64) -> String {
        format!(
            r#"{{"type":"tool/call","data":{{"turn":1,"step":{step},"callId":"{id}","name":"bash","arguments":"{{}}"}}}}"#
        )
    }

    fn result_by_id(id: &str, step: u64, out: &str) -> String {
        format!(
            r#"{{"type":"tool/result","data":{{"turn":1,"step":{step},"message":{{"role":"tool","toolName":"bash","content":"{out}","isError":false}},"callId":"{id}"}}}}"#
        )
    }

    /// Two `tool/call`s with the same `callId` in one turn were refused (a rule "call ids are unique within a turn" that docs/events.md §6 does not have), and a result giving that id resolved to the first call even when it was answered already.
    #[test]
    fn a_call_id_answers_the_earliest_unanswered_call_with_it_once() {
        let dir = tempfile::tempdir().unwrap();
        let s = new_session(dir.path());
        for json in [
            r#"{"type":"turn/start","data":{"turn":1}}"#,
            r#"{"type":"step/start","data":{"turn":1,"step":1}}"#,
            &call("x", 1),
            &call("x", 1),
            &call("y", 1),
        ] {
            s.append_draft(d(json)).unwrap();
        }
        assert_eq!(
            s.append_draft(d(&result_by_id("x", 1, "one"))).unwrap(),
            Some(5)
        );
        let open: Vec<u64> = s
            .open_work()
            .unanswered_calls
            .iter()
            .map(|c| c.seq)
            .collect();
        assert_eq!(open, [3, 4], "the first x (seq 2) is answered");
        assert_eq!(
            s.append_draft(d(&result_by_id("x", 1, "two"))).unwrap(),
            Some(6)
        );
        let calls = s.lifecycle().calls().to_vec();
        assert_eq!(calls[0].answered_by, Some(5));
        assert_eq!(calls[1].answered_by, Some(6));
        // Both x calls are answered: a third x result would answer one twice.
        let err = s
            .append_draft(d(&result_by_id("x", 1, "three")))
            .unwrap_err();
        assert_eq!(
            err.lifecycle().map(|l| l.rule),
            Some(Rule::AnsweredOnce),
            "{err}"
        );
        assert_eq!(s.len(), 7);
        // The projection agrees, call for call.
        let mut p = Projector::new();
        let r = s.reader();
        for seq in 0..r.len() {
            p.apply(&r.get_owned(seq).unwrap()).unwrap();
        }
        let answered: Vec<Option<u64>> = [2, 3, 4]
            .iter()
            .map(|&seq| p.tool_call(seq).and_then(|c| c.answered_by))
            .collect();
        assert_eq!(answered, [Some(5), Some(6), None]);
        // Statistics find each result's call (two answered bash calls, two latencies).
        let stats: SessionStats = s.reader().stats().unwrap();
        let bash = &stats.tools["bash"];
        assert_eq!((bash.calls, bash.latency.len()), (3, 2));
    }

    /// Two `tool/call`s with the same `callId` in one turn were refused (a rule "call ids are unique within a turn" that docs/events.md §6 does not have), and a result giving that id resolved to the first call even when it was answered already.
    #[test]
    fn close_answers_every_unanswered_call_once_even_with_repeated_ids() {
        let dir = tempfile::tempdir().unwrap();
        let s = new_session(dir.path());
        for json in [
            r#"{"type":"turn/start","data":{"turn":1}}"#,
            r#"{"type":"step/start","data":{"turn":1,"step":1}}"#,
            &call("x", 1),
            &call("x", 1),
            &result_by_id("x", 1, "one"),
            &call("x", 1),
            r#"{"type":"step/end","data":{"turn":1,"step":1}}"#,
            r#"{"type":"step/start","data":{"turn":1,"step":2}}"#,
            &call("x", 2),
        ] {
            s.append_draft(d(json)).unwrap();
        }
        let open: Vec<u64> = s
            .open_work()
            .unanswered_calls
            .iter()
            .map(|c| c.seq)
            .collect();
        assert_eq!(open, [3, 5, 8]);
        let appended = s.close_open_work(ReasonKind::Interrupted).unwrap();
        assert_eq!(appended.len(), 5, "three results, step/end, turn/end");
        assert!(s.open_work().is_empty());
        let r = s.reader();
        let calls = r.lifecycle_at(appended[2] + 1).unwrap().0.calls().to_vec();
        let by: Vec<(u64, Option<u64>)> = calls.iter().map(|c| (c.seq, c.answered_by)).collect();
        assert_eq!(
            by,
            [
                (2, Some(4)),
                (3, Some(appended[0])),
                (5, Some(appended[1])),
                (8, Some(appended[2]))
            ]
        );
        let history = s.messages().to_canonical_string();
        assert_eq!(
            history.matches(r#""toolUseId":"x""#).count(),
            4,
            "{history}"
        );
        let (_, violations) = r.lifecycle_at(r.len()).unwrap();
        assert!(violations.is_empty(), "{violations:?}");
    }

    /// Two `tool/call`s with the same `callId` in one turn were refused (a rule "call ids are unique within a turn" that docs/events.md §6 does not have), and a result giving that id resolved to the first call even when it was answered already.
    #[test]
    fn the_projector_answers_repeated_ids_in_order_within_a_turn() {
        let mut log = Log::new();
        log.turn_start(1);
        log.step_start(1, 1);
        let a = log.tool_call(1, 1, "x", "bash");
        let b = log.tool_call(1, 1, "x", "bash");
        let r1 = log.result(1, 1, "bash", Some("x"), None);
        let r2 = log.result(1, 1, "bash", Some("x"), None);
        let mut p = Projector::new();
        for e in &log.events {
            p.apply(e).unwrap();
        }
        assert_eq!(p.tool_call(a).and_then(|c| c.answered_by), Some(r1));
        assert_eq!(p.tool_call(b).and_then(|c| c.answered_by), Some(r2));
        assert!(p
            .apply(&log.make_result(1, 1, "bash", Some("x"), None))
            .is_err());
    }
}

mod result_answers_earlier_turn {
    use testkit::project as project_common;

    use agentlog::event::ToolContent;
    use agentlog::session::replay;
    use agentlog::store::{ImportOptions, Store};
    use project_common::Log;

    /// Audit repro r2: turn 1 leaves `call_0` unanswered (aborted), turn 2 reuses the id.
    const R2: &str = r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}
{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}
{"type":"tool/call","seq":2,"time":2,"data":{"turn":1,"step":1,"callId":"call_0","name":"bash","arguments":"{}"}}
{"type":"step/end","seq":3,"time":3,"data":{"turn":1,"step":1}}
{"type":"turn/end","seq":4,"time":4,"data":{"turn":1,"reason":{"kind":"aborted"}}}
{"type":"turn/start","seq":5,"time":5,"data":{"turn":2}}
{"type":"step/start","seq":6,"time":6,"data":{"turn":2,"step":1}}
{"type":"tool/call","seq":7,"time":7,"data":{"turn":2,"step":1,"callId":"call_0","name":"bash","arguments":"{}"}}
{"type":"tool/result","seq":8,"time":8,"data":{"turn":2,"step":1,"message":{"role":"tool","toolName":"bash","content":"NEW","isError":false},"callId":"call_0"}}
{"type":"step/end","seq":9,"time":9,"data":{"turn":2,"step":1}}
{"type":"turn/end","seq":10,"time":10,"data":{"turn":2,"reason":{"kind":"completed"}}}
"#;

    /// A `tool/result` whose `callId` (or `sourceEventSeqs[0]`) was also used in an earlier turn was resolved by the projection to the earlier turn's call (docs/events.md §6: a result answers a call of the same turn), so `replay` attributed the result to the wrong call.
    #[test]
    fn replay_attributes_the_result_to_the_call_of_its_turn() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let id = store
            .import(R2.as_bytes(), ImportOptions::default(), |_| {})
            .unwrap()
            .id;
        let report = replay(&store.open_reader(&id).unwrap(), None).unwrap();
        let calls: Vec<_> = report.steps.iter().flat_map(|s| &s.calls).collect();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].call.seq, 2);
        assert_eq!(
            calls[0].call.recorded, None,
            "turn 1's call was never answered"
        );
        assert_eq!(calls[0].call.recorded_seq, None);
        assert_eq!(calls[1].call.seq, 7);
        assert_eq!(calls[1].call.recorded_seq, Some(8));
        assert_eq!(
            calls[1].call.recorded.as_ref().map(|o| &o.content),
            Some(&ToolContent::Text("NEW".into()))
        );
    }

    /// A turn-1 call left open, a turn-2 call with the same id and name.
    fn two_turns() -> (Log, u64, u64) {
        let mut log = Log::new();
        log.turn_start(1);
        log.step_start(1, 1);
        let old = log.tool_call(1, 1, "call_0", "bash");
        log.step_end(1, 1);
        log.turn_start(2);
        log.step_start(2, 1);
        let new = log.tool_call(2, 1, "call_0", "bash");
        (log, old, new)
    }

    fn projector(log: &Log) -> agentlog::projection::Projector {
        let mut p = agentlog::projection::Projector::new();
        for e in &log.events {
            p.apply(e).unwrap();
        }
        p
    }

    /// A `tool/result` whose `callId` (or `sourceEventSeqs[0]`) was also used in an earlier turn was resolved by the projection to the earlier turn's call (docs/events.md §6: a result answers a call of the same turn), so `replay` attributed the result to the wrong call.
    #[test]
    fn the_projector_resolves_a_call_id_within_the_results_turn() {
        let (mut log, old, new) = two_turns();
        let result = log.make_result(2, 1, "bash", Some("call_0"), None);
        let p = projector(&log);
        let answers = p.call_answered_by(&result).unwrap().map(|c| c.seq);
        assert_eq!(answers, Some(new));
        assert_eq!(p.open_call_of_turn(2, "call_0").map(|c| c.seq), Some(new));
        assert_eq!(p.open_call("call_0").map(|c| c.seq), Some(old));
        let r = log.push(result);
        let p = projector(&log);
        assert_eq!(p.tool_call(new).and_then(|c| c.answered_by), Some(r));
        assert_eq!(p.tool_call(old).and_then(|c| c.answered_by), None);
        let open: Vec<u64> = p.unanswered_calls().map(|c| c.seq).collect();
        assert_eq!(open, [old]);
    }

    /// A `tool/result` whose `callId` (or `sourceEventSeqs[0]`) was also used in an earlier turn was resolved by the projection to the earlier turn's call (docs/events.md §6: a result answers a call of the same turn), so `replay` attributed the result to the wrong call.
    #[test]
    fn the_projector_answers_by_source_only_a_call_of_the_results_turn() {
        let (log, old, new) = two_turns();
        let p = projector(&log);
        // sourceEventSeqs[0] names the call of turn 1: its id is the toolUseId, but it answers no
        // call (the session refuses such a result; a projection of a stored log shows it as given).
        let stray = log.make_result(2, 1, "bash", None, Some(&[old]));
        assert_eq!(p.call_answered_by(&stray).unwrap(), None);
        let mine = log.make_result(2, 1, "bash", None, Some(&[new]));
        assert_eq!(p.call_answered_by(&mine).unwrap().map(|c| c.seq), Some(new));
    }
}

/// Orders a damaged source file gives the history (found by the `source_import` fuzz target,
/// issue 14's sweep of 2026-12-07): the renderings were requests the providers refuse.
mod renderings_of_damaged_orders {
    use testkit::project as project_common;

    use agentlog::projection::{self, render_anthropic, render_openai};
    use project_common::Log;

    use crate::rules::assert_accepted;

    /// A result written after the next response (step 2 answers step 1's call first): it answers
    /// no call of the assistant message before it, so it is shown as text, and that text stood
    /// between step 2's `tool_calls` and its tool message, which OpenAI refuses. The text now
    /// counts as content the conversation goes on with: step 2's result moves up to its call.
    #[test]
    fn a_result_shown_as_text_does_not_come_between_a_call_and_its_result() {
        let mut log = Log::new();
        let c1 = log.ls_call();
        log.step_end(1, 1);
        log.step_start(1, 2);
        log.assistant(
            1,
            2,
            r#"[{"type":"tool_use","id":"c2","name":"ls","input":{}}]"#,
        );
        let c2 = log.tool_call(1, 2, "c2", "ls");
        log.result(1, 2, "ls", Some("c1"), Some(&[c1]));
        log.result(1, 2, "ls", Some("c2"), Some(&[c2]));
        let messages = projection::messages(&log.events).unwrap();
        assert_accepted("the renderings", &messages);
        let openai = render_openai(&messages).to_string();
        let call = openai.find(r#""tool_calls":[{"id":"c2""#).unwrap();
        let answer = openai.find(r#""tool_call_id":"c2""#).unwrap();
        let text = openai.find("[result of tool call c1").unwrap();
        assert!(call < answer && answer < text, "{openai}");
    }

    /// A user message without content blocks (an empty message between an agent's call and the
    /// result its turn's end gave it: a damaged Codex inter-agent line, found by the
    /// `source_import` fuzzer) is rendered, but it did not count as the conversation going on:
    /// the result stayed after it, so the empty message stood between the call and its result.
    #[test]
    fn an_empty_user_message_does_not_come_between_a_call_and_its_result() {
        let mut log = Log::new();
        let c1 = log.ls_call();
        log.add("user/message", r#"{"role":"user","content":[]}"#, "");
        log.result(1, 1, "ls", Some("c1"), Some(&[c1]));
        let messages = projection::messages(&log.events).unwrap();
        assert_accepted("the renderings", &messages);
        let openai = render_openai(&messages).to_string();
        let call = openai.find(r#""tool_calls":[{"id":"c1""#).unwrap();
        let answer = openai.find(r#""tool_call_id":"c1""#).unwrap();
        let empty = openai.find(r#"{"role":"user","content":""}"#).unwrap();
        assert!(call < answer && answer < empty, "{openai}");
    }

    /// Two `tool_use` blocks with one id in one assistant message (a call line repeated in a
    /// damaged rollout) became two `tool_calls` entries with that id, answered twice: both
    /// providers refuse repeated ids. The renderings keep the first; the second result is text.
    #[test]
    fn a_tool_use_repeating_an_id_of_its_message_is_rendered_once() {
        let mut log = Log::new();
        log.turn_start(1);
        log.user("go");
        log.step_start(1, 1);
        log.assistant(
            1,
            1,
            r#"[{"type":"tool_use","id":"c1","name":"ls","input":{}},{"type":"tool_use","id":"c1","name":"ls","input":{}}]"#,
        );
        let first = log.tool_call(1, 1, "c1", "ls");
        let second = log.tool_call(1, 1, "c1", "ls");
        log.result(1, 1, "ls", Some("c1"), Some(&[first]));
        log.result(1, 1, "ls", Some("c1"), Some(&[second]));
        log.step_end(1, 1);
        let messages = projection::messages(&log.events).unwrap();
        assert_accepted("the renderings", &messages);
        let openai = render_openai(&messages).to_string();
        assert_eq!(openai.matches(r#""id":"c1""#).count(), 1, "{openai}");
        assert_eq!(openai.matches(r#""tool_call_id":"c1""#).count(), 1);
        assert_eq!(openai.matches("[result of tool call c1").count(), 1);
        let anthropic = render_anthropic(&messages).to_string();
        assert_eq!(anthropic.matches(r#""type":"tool_use""#).count(), 1);
    }
}
