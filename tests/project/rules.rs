//! The projection rules of docs/events.md §5, one test per rule: replace anywhere on the surface,
//! the three ways of resolving a tool result's id, empty assistant messages, and every refusal.

use testkit::project as project_common;

use agentlog::event::{Block, Event, SurfaceOp, ToolContent};
use agentlog::projection::{self, Messages, ProjectError, Projector, RangeEnd, Role};
use project_common::{replace_op, Log};

/// The source seqs of the surface, in order.
fn seqs(messages: &Messages) -> Vec<u64> {
    messages.iter().map(|m| m.source_seq).collect()
}

fn project(log: &Log) -> Projector {
    let mut p = Projector::new();
    for event in &log.events {
        p.check(event)
            .unwrap_or_else(|e| panic!("check {}: {e}", event.seq));
        p.apply(event)
            .unwrap_or_else(|e| panic!("apply {}: {e}", event.seq));
    }
    p
}

/// Applies `event`, which must be refused; checks that `check` refuses it the same way and that
/// nothing changed.
fn refused(p: &mut Projector, event: &Event) -> ProjectError {
    let before = p.messages();
    let seen = p.events_seen();
    let checked = p.check(event).expect_err("check accepted the event");
    let applied = p.apply(event).expect_err("apply accepted the event");
    assert_eq!(checked, applied);
    assert_eq!(p.messages(), before);
    assert_eq!(p.events_seen(), seen);
    applied
}

/// The toolUseId of the tool_result node of event `seq`.
fn tool_use_id(messages: &Messages, seq: u64) -> String {
    let message = messages
        .iter()
        .find(|m| m.source_seq == seq)
        .unwrap_or_else(|| panic!("no node {seq}"));
    match message.content.as_slice() {
        [Block::ToolResult { tool_use_id, .. }] => tool_use_id.clone(),
        other => panic!("node {seq} is not a tool result: {other:?}"),
    }
}

/// Four nodes: user 0, assistant 1, user 2, assistant 3.
fn four_nodes() -> Log {
    let mut log = Log::new();
    log.user("u0");
    log.assistant(1, 1, r#"[{"type":"text","text":"a1"}]"#);
    log.user("u2");
    log.assistant(1, 2, r#"[{"type":"text","text":"a3"}]"#);
    log
}

fn replaced_text(messages: &Messages, index: usize) -> &str {
    match messages.get(index).map(|m| m.content.as_slice()) {
        Some([Block::Text { text, .. }]) => text,
        other => panic!("message {index}: {other:?}"),
    }
}

#[test]
fn replace_at_the_start() {
    let mut log = four_nodes();
    let r = log.replace("summary", 0, 1);
    let p = project(&log);
    assert_eq!(seqs(&p.messages()), [r, 2, 3]);
    assert_eq!(replaced_text(&p.messages(), 0), "summary");
    assert_eq!(p.messages().get(0).map(|m| m.role), Some(Role::User));
    assert!(p.node_index(0).is_none() && p.node_index(1).is_none() && p.node_index(r) == Some(0));
}

#[test]
fn replace_in_the_middle() {
    let mut log = four_nodes();
    let r = log.replace("middle", 1, 2);
    assert_eq!(seqs(&project(&log).messages()), [0, r, 3]);
}

#[test]
fn replace_at_the_end() {
    let mut log = four_nodes();
    let r = log.replace("end", 2, 3);
    assert_eq!(seqs(&project(&log).messages()), [0, 1, r]);
    // A single node, the whole surface.
    let mut log = four_nodes();
    let r1 = log.replace("one", 3, 3);
    let r2 = log.replace("all", 0, r1);
    assert_eq!(seqs(&project(&log).messages()), [r2]);
}

#[test]
fn replace_over_an_earlier_replacement() {
    let mut log = four_nodes();
    let r1 = log.replace("first", 1, 2); // [0, r1, 3]
    let u = log.user("u after");
    let r2 = log.replace("second", r1, 3); // r1's node and the node after it
    let p = project(&log);
    assert_eq!(seqs(&p.messages()), [0, r2, u]);
    // Surface order, not seq order: r2 (a high seq) stands before u.
    let r3 = {
        let mut p = p.clone();
        let event = log.make_replace("third", r2, u);
        p.apply(&event).unwrap();
        assert_eq!(seqs(&p.messages()), [0, event.seq]);
        event.seq
    };
    assert!(r3 > u);
    // The reverse order is refused even though startSeq < endSeq numerically.
    let mut p = p;
    let err = refused(&mut p, &log.make_replace("reversed", u, r2));
    assert_eq!(
        err,
        ProjectError::ReversedRange {
            seq: log.next(),
            start_seq: u,
            end_seq: r2,
            start_index: 2,
            end_index: 1,
        }
    );
    // A node an earlier replace removed is no longer a node.
    let err = refused(&mut p, &log.make_replace("gone", r1, r2));
    assert!(matches!(
        err,
        ProjectError::NotANode { end: RangeEnd::Start, named, .. } if named == r1
    ));
}

#[test]
fn replace_naming_a_non_node_is_refused() {
    let mut log = four_nodes();
    log.turn_start(2);
    let call = log.tool_call(2, 1, "c", "ls");
    let mut p = project(&log);
    for (start, end, bad, which) in [
        (call, 3, call, RangeEnd::Start), // a tool/call is never a node
        (0, 4, 4, RangeEnd::End),         // turn/start
        (0, 99, 99, RangeEnd::End),       // a later seq
        (0, log.next(), log.next(), RangeEnd::End), // the event itself
    ] {
        let err = refused(&mut p, &log.make_replace("x", start, end));
        assert_eq!(
            err,
            ProjectError::NotANode {
                seq: log.next(),
                end: which,
                named: bad
            }
        );
        let text = err.to_string();
        assert!(
            text.contains(which.as_str()) && text.contains(&bad.to_string()),
            "{text}"
        );
    }
}

#[test]
fn replace_with_start_after_end_is_refused() {
    let log = four_nodes();
    let mut p = project(&log);
    let err = refused(&mut p, &log.make_replace("x", 2, 1));
    assert_eq!(
        err,
        ProjectError::ReversedRange {
            seq: 4,
            start_seq: 2,
            end_seq: 1,
            start_index: 2,
            end_index: 1
        }
    );
}

#[test]
fn empty_assistant_messages_are_skipped_and_not_nameable() {
    let mut log = Log::new();
    log.user("u0");
    let empty = log.assistant(1, 1, "[]");
    log.user("u2");
    let p = project(&log);
    assert_eq!(seqs(&p.messages()), [0, 2]);
    assert_eq!(p.node_index(empty), None);
    assert_eq!(p.node_index(2), Some(1));
    assert_eq!(p.events_seen(), 3);
    let mut p = p;
    for (start, end, which) in [(empty, 2, RangeEnd::Start), (0, empty, RangeEnd::End)] {
        let err = refused(&mut p, &log.make_replace("x", start, end));
        assert_eq!(
            err,
            ProjectError::NotANode {
                seq: 3,
                end: which,
                named: empty
            }
        );
    }
}

#[test]
fn empty_assistant_message_with_a_replace_is_refused() {
    let mut log = four_nodes();
    let mut p = project(&log);
    let event = log.make(
        "assistant/message",
        &project_common::assistant_data(1, 3, "[]"),
        &replace_op(0, 1),
    );
    assert_eq!(
        refused(&mut p, &event),
        ProjectError::EmptyReplacement {
            seq: 4,
            start_seq: 0,
            end_seq: 1
        }
    );
    // A non-empty assistant message may replace.
    let event = log.make(
        "assistant/message",
        &project_common::assistant_data(1, 3, r#"[{"type":"text","text":"a"}]"#),
        &replace_op(0, 1),
    );
    log.push(event);
    assert_eq!(seqs(&project(&log).messages()), [4, 2, 3]);
}

#[test]
fn tool_result_id_from_call_id() {
    let mut log = Log::new();
    log.turn_start(1);
    log.step_start(1, 1);
    log.tool_call(1, 1, "first", "ls");
    log.tool_call(1, 1, "second", "ls");
    // callId wins over the name rule (which would pick "first").
    let r = log.result(1, 1, "ls", Some("second"), None);
    let p = project(&log);
    assert_eq!(tool_use_id(&p.messages(), r), "second");
    assert!(p.is_answered("second"));
    assert!(!p.is_answered("first"));
    // A callId naming no call seen is projected as given.
    let mut log2 = Log::new();
    let r = log2.result(1, 1, "ls", Some("elsewhere"), None);
    assert_eq!(tool_use_id(&project(&log2).messages(), r), "elsewhere");
}

#[test]
fn tool_result_id_from_source_event_seqs() {
    let mut log = Log::new();
    log.turn_start(1);
    log.step_start(1, 1);
    let first = log.tool_call(1, 1, "first", "ls");
    let second = log.tool_call(1, 1, "second", "ls");
    let result = log.make_result(1, 1, "ls", None, Some(&[second, first]));
    let before = project(&log);
    let answered = before.call_answered_by(&result).unwrap().map(|c| c.seq);
    assert_eq!(answered, Some(second));
    assert_eq!(before.open_call("second").map(|c| c.seq), Some(second));
    assert_eq!(before.call_answered_by(&log.events[0]), Ok(None));
    let r = log.push(result);
    let p = project(&log);
    assert_eq!(p.open_call("second"), None);
    assert_eq!(p.open_call("first").map(|c| c.seq), Some(first));
    assert_eq!(tool_use_id(&p.messages(), r), "second");
    assert_eq!(p.tool_call(second).and_then(|c| c.answered_by), Some(r));
    assert_eq!(p.tool_call(first).and_then(|c| c.answered_by), None);
    // sourceEventSeqs[0] naming something that is not a tool/call falls through to the name rule.
    let r2 = log.result(1, 1, "ls", None, Some(&[0]));
    assert_eq!(tool_use_id(&project(&log).messages(), r2), "first");
}

#[test]
fn tool_result_id_by_name_earliest_unanswered_of_the_same_step() {
    let mut log = Log::new();
    log.turn_start(1);
    log.step_start(1, 1);
    log.tool_call(1, 1, "s1-ls", "ls");
    log.step_end(1, 1);
    log.step_start(1, 2);
    log.tool_call(1, 2, "s2-cat", "cat");
    log.tool_call(1, 2, "s2-ls-a", "ls");
    log.tool_call(1, 2, "s2-ls-b", "ls");
    log.tool_call(1, 2, "s2-ls-c", "ls");
    // Answer the earliest ls of step 2 by id first: the name rule must skip it.
    log.result(1, 2, "ls", Some("s2-ls-a"), None);
    let r_b = log.result(1, 2, "ls", None, None);
    let r_c = log.result(1, 2, "ls", None, None);
    let r_cat = log.result(1, 2, "cat", None, Some(&[]));
    let p = project(&log);
    let m = p.messages();
    assert_eq!(tool_use_id(&m, r_b), "s2-ls-b");
    assert_eq!(tool_use_id(&m, r_c), "s2-ls-c");
    assert_eq!(tool_use_id(&m, r_cat), "s2-cat");
    // The step-1 call is still open: a later ls result of step 2 does not take it.
    let open: Vec<&str> = p.unanswered_calls().map(|c| c.call_id.as_str()).collect();
    assert_eq!(open, ["s1-ls"]);
    let mut p = p;
    let err = refused(&mut p, &log.make_result(1, 2, "ls", None, None));
    assert_eq!(
        err,
        ProjectError::UnresolvedToolResult {
            seq: log.next(),
            tool_name: "ls".into(),
            turn: 1,
            step: 2
        }
    );
    // Nor does one of another turn.
    assert!(p.check(&log.make_result(2, 1, "ls", None, None)).is_err());
    // But a step-1 result does.
    let r = log.result(1, 1, "ls", None, None);
    assert_eq!(tool_use_id(&project(&log).messages(), r), "s1-ls");
}

#[test]
fn unresolvable_tool_result_is_refused_with_context() {
    let mut log = Log::new();
    log.turn_start(3);
    log.step_start(3, 2);
    log.tool_call(3, 2, "c", "grep");
    let mut p = project(&log);
    let err = refused(&mut p, &log.make_result(3, 2, "sed", None, None));
    assert_eq!(err.seq(), 3);
    let text = err.to_string();
    for part in ["seq 3", "\"sed\"", "turn 3", "step 2"] {
        assert!(text.contains(part), "{text:?} lacks {part:?}");
    }
}

#[test]
fn a_call_is_answered_once() {
    let mut log = Log::new();
    log.turn_start(1);
    log.step_start(1, 1);
    let call = log.tool_call(1, 1, "c", "ls");
    let first = log.result(1, 1, "ls", None, None);
    let mut p = project(&log);
    for event in [
        log.make_result(1, 1, "ls", Some("c"), None),
        log.make_result(1, 1, "ls", None, Some(&[call])),
    ] {
        assert_eq!(
            refused(&mut p, &event),
            ProjectError::AlreadyAnswered {
                seq: log.next(),
                call_id: "c".into(),
                call_seq: call,
                answered_by: first
            }
        );
    }
    // By name there is nothing left to answer.
    assert!(matches!(
        refused(&mut p, &log.make_result(1, 1, "ls", None, None)),
        ProjectError::UnresolvedToolResult { .. }
    ));
    assert!(p.is_answered("c"));
    assert_eq!(p.unanswered_calls().count(), 0);
    assert_eq!(p.tool_call(call).and_then(|c| c.answered_by), Some(first));
    // In a later turn the id is looked for among that turn's calls only: answering a call of
    // another turn is the session's lifecycle rule, and the result is projected as given.
    log.turn_start(2);
    let mut p = project(&log);
    let later = log.make_result(2, 1, "ls", Some("c"), None);
    p.apply(&later).unwrap();
    assert_eq!(tool_use_id(&p.messages(), later.seq), "c");
}

#[test]
fn tool_result_node_shape() {
    let mut log = Log::new();
    log.turn_start(1);
    log.step_start(1, 1);
    log.tool_call(1, 1, "c", "ls");
    let r = log.add(
        "tool/result",
        r#"{"turn":1,"step":1,"message":{"role":"tool","toolName":"ls","content":[{"type":"text","text":"x"}],"isError":true,"odd":1},"error":{"code":"E"},"meta":{"ms":3}}"#,
        "",
    );
    let m = project(&log).messages();
    assert_eq!(m.len(), 1);
    assert_eq!(
        m.get(0).map(|m| (m.role, m.source_seq)),
        Some((Role::User, r))
    );
    assert_eq!(
        m.to_canonical_string(),
        r#"[{"role":"user","content":[{"type":"tool_result","toolUseId":"c","toolName":"ls","content":[{"type":"text","text":"x"}],"isError":true}]}]"#
    );
    assert!(matches!(
        &m.get(0).unwrap().content[0],
        Block::ToolResult { content: ToolContent::Blocks(b), .. } if b.len() == 1
    ));
}

#[test]
fn user_and_system_messages_keep_their_blocks_and_drop_the_rest() {
    let mut log = Log::new();
    log.add(
        "system/message",
        r#"{"role":"system","content":[{"type":"text","text":"be brief","cache":true}],"odd":2}"#,
        "",
    );
    log.add(
        "user/message",
        r#"{"role":"user","content":[{"type":"image","url":"x","type2":1},{"type":"text","text":"hi"}],"envelope":{"display":"HI"},"source":"cli"}"#,
        r#","sourceEventSeqs":[]"#,
    );
    log.add("mystery/type", r#"{"surfaceOp":"append"}"#, "");
    log.add("error", r#"{"message":"boom"}"#, "");
    assert_eq!(
        project(&log).messages().to_canonical_string(),
        r#"[{"role":"system","content":[{"type":"text","text":"be brief","cache":true}]},{"role":"user","content":[{"type":"image","url":"x","type2":1},{"type":"text","text":"hi"}]}]"#
    );
}

#[test]
fn events_out_of_order_or_with_a_misplaced_surface_op_are_refused() {
    let log = four_nodes();
    let mut p = project(&log);
    let again = log.events[3].clone();
    assert_eq!(
        refused(&mut p, &again),
        ProjectError::OutOfOrder {
            seq: 3,
            expected_at_least: 4
        }
    );
    // Seqs may be skipped.
    let mut later = log.make("user/message", &project_common::user_data("later"), "");
    later.seq = 10;
    p.apply(&later).unwrap();
    assert_eq!(p.events_seen(), 11);
    // surfaceOp on a non-surface event (the parser refuses it; an event built in code may not).
    let mut call = log.make(
        "tool/call",
        r#"{"turn":1,"step":1,"callId":"c","name":"ls","arguments":"{}"}"#,
        "",
    );
    call.seq = 11;
    call.surface_op = Some(SurfaceOp::Append);
    assert_eq!(
        refused(&mut p, &call),
        ProjectError::UnexpectedSurfaceOp {
            seq: 11,
            type_name: "tool/call".into()
        }
    );
}

#[test]
fn snapshots_never_change() {
    let mut log = four_nodes();
    let mut p = project(&log);
    let before = p.messages();
    let before_text = before.to_canonical_string();
    let r = log.replace("summary", 0, 2);
    p.apply(&log.events[r as usize]).unwrap();
    let u = log.user("more");
    p.apply(&log.events[u as usize]).unwrap();
    assert_eq!(before.to_canonical_string(), before_text);
    assert_eq!(seqs(&before), [0, 1, 2, 3]);
    assert_eq!(seqs(&p.messages()), [r, 3, u]);
    // And a snapshot is equal to (and shares storage with) the projector's state.
    let now = p.messages();
    assert!(now.ptr_eq(&p.messages()));
    assert_eq!(projection::messages(&log.events).unwrap(), now);
}

// ------------------------------------------------ provider renderings (issue 15, first part)

use agentlog::event::{EventType, Value};
use agentlog::projection::{
    check_rendered, render_anthropic, render_openai, Format, OUTCOME_UNKNOWN,
};
use project_common::provider_schema::{check_anthropic, check_openai};

/// Both renderings of `messages` pass the providers' request shapes and tool-call rules.
pub(crate) fn assert_accepted(what: &str, messages: &Messages) {
    check_openai(&render_openai(messages)).unwrap_or_else(|e| panic!("{what}: {e}"));
    check_anthropic(&render_anthropic(messages)).unwrap_or_else(|e| panic!("{what}: {e}"));
    for format in [Format::OpenAi, Format::Anthropic] {
        let rendered = agentlog::projection::render(format, messages);
        assert_eq!(
            check_rendered(format, messages, &rendered),
            Ok(()),
            "{what}"
        );
    }
}

/// Every example session, at every point a model is called (each `step/start`) and at its
/// end, renders to requests both providers accept (typed request structs with
/// `deny_unknown_fields`, and their tool-call pairing rules).
#[test]
fn renderings_of_the_examples_are_valid_provider_requests() {
    for (name, events, _) in project_common::examples() {
        let mut projector = Projector::new();
        for event in &events {
            if event.data.event_type() == Some(EventType::StepStart) {
                assert_accepted(
                    &format!("{name} at seq {}", event.seq),
                    &projector.messages(),
                );
            }
            projector.apply(event).unwrap();
        }
        assert_accepted(&name, &projector.messages());
    }
}

/// Calls c1 and c2, a result for c1 only, then `step/end` and `turn/end`: the renderings had a
/// `tool_calls` entry (a `tool_use`) for c2 with no result, which both providers refuse. The
/// call now gets the synthetic error result of docs/events.md §7 in every rendering; the neutral
/// projection stays as recorded; while the step is open nothing is added.
#[test]
fn a_call_left_unanswered_in_a_closed_step_gets_the_synthetic_result() {
    let mut log = Log::new();
    log.turn_start(1);
    log.user("go");
    log.step_start(1, 1);
    log.assistant(
        1,
        1,
        r#"[{"type":"tool_use","id":"c1","name":"ls","input":{}},{"type":"tool_use","id":"c2","name":"ls","input":{}}]"#,
    );
    log.tool_call(1, 1, "c1", "ls");
    log.tool_call(1, 1, "c2", "ls");
    log.result(1, 1, "ls", Some("c1"), None);
    let open = projection::messages(&log.events).unwrap();
    assert_eq!(
        render_openai(&open)
            .to_string()
            .matches("tool_call_id")
            .count(),
        1
    );
    log.step_end(1, 1);
    log.add(
        "turn/end",
        r#"{"turn":1,"reason":{"kind":"completed"}}"#,
        "",
    );
    let closed = projection::messages(&log.events).unwrap();
    assert_eq!(
        closed.to_value(),
        open.to_value(),
        "the neutral projection is as recorded"
    );
    assert_eq!(
        closed.closed_unanswered().collect::<Vec<_>>(),
        vec![(5, "c2")]
    );
    let openai = render_openai(&closed);
    let tool_messages: Vec<&Value> = openai
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("tool"))
        .collect();
    assert_eq!(tool_messages.len(), 2);
    assert!(tool_messages.iter().any(|m| {
        m.get("tool_call_id").and_then(Value::as_str) == Some("c2")
            && m.get("content").and_then(Value::as_str) == Some(OUTCOME_UNKNOWN)
    }));
    let anthropic = render_anthropic(&closed).to_string();
    assert!(anthropic.contains(&format!(
        r#"{{"type":"tool_result","tool_use_id":"c2","content":"{OUTCOME_UNKNOWN}","is_error":true}}"#
    )));
    assert_accepted("closed step", &closed);
    // A result that comes after all (a late answer) replaces the synthetic one.
    let mut projector = project(&log);
    let late = log.make_result(1, 1, "ls", Some("c2"), None);
    projector.apply(&late).unwrap();
    assert_eq!(projector.messages().closed_unanswered().count(), 0);
}

/// Anthropic refuses a `thinking` block without a `signature`: such reasoning is left out (a
/// message left empty by it is dropped and its neighbours merged); signed reasoning is kept. A
/// non-object tool `input` (the API wants an object) is wrapped as `{"input": value}`.
#[test]
fn anthropic_thinking_without_signature_and_non_object_inputs() {
    let mut log = Log::new();
    log.turn_start(1);
    log.user("go");
    log.step_start(1, 1);
    log.assistant(1, 1, r#"[{"type":"reasoning","text":"unsigned"}]"#);
    log.step_end(1, 1);
    log.step_start(1, 2);
    log.assistant(
        1,
        2,
        r#"[{"type":"reasoning","text":"signed","signature":"sig"},{"type":"tool_use","id":"c1","name":"echo","input":"text"}]"#,
    );
    log.tool_call(1, 2, "c1", "echo");
    log.result(1, 2, "echo", Some("c1"), None);
    let messages = projection::messages(&log.events).unwrap();
    let anthropic = render_anthropic(&messages).to_string();
    assert!(!anthropic.contains("unsigned"), "{anthropic}");
    assert!(
        anthropic.contains(r#"{"type":"thinking","thinking":"signed","signature":"sig"}"#),
        "{anthropic}"
    );
    assert!(
        anthropic.contains(r#""input":{"input":"text"}"#),
        "{anthropic}"
    );
    assert_accepted("thinking", &messages);
}

/// OpenAI has no Anthropic-style `image` part: in a user message one with a base64 or url
/// source becomes an `image_url`; any other unknown block is described in a text part (a user
/// message passed it verbatim, and the API refused the request).
#[test]
fn openai_converts_or_describes_unknown_blocks() {
    let mut log = Log::new();
    log.add(
        "user/message",
        r#"{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAA"}},{"type":"image","source":{"type":"url","url":"https://x/y.png"}},{"type":"hologram","data":1}]}"#,
        "",
    );
    let messages = projection::messages(&log.events).unwrap();
    let rendered = render_openai(&messages);
    let openai = rendered.to_string();
    assert_eq!(
        openai,
        r#"[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAA"}},{"type":"image_url","image_url":{"url":"https://x/y.png"}},{"type":"text","text":"[hologram block left out: no OpenAI equivalent here]"}]}]"#
    );
    check_openai(&rendered).unwrap();
}

/// Images of OpenAI shape in a user message: Codex imports keep the Responses API's
/// `input_image` (`image_url` a URL string), which the OpenAI rendering described as a text part
/// ("left out") and the Anthropic rendering passed through (the API refuses it), and an
/// `image_url` part went to Anthropic as it was. Each is now the provider's image: `image_url`
/// for OpenAI, an `image` block (`base64` source for a `data:` URL, else `url`) for Anthropic.
#[test]
fn images_of_openai_shape_are_images_in_both_renderings() {
    let mut log = Log::new();
    log.add(
        "user/message",
        r#"{"role":"user","content":[{"type":"text","text":"what is this?"},{"type":"input_image","image_url":"data:image/jpeg;base64,/9j/4A"},{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}"#,
        "",
    );
    let messages = projection::messages(&log.events).unwrap();
    let openai = render_openai(&messages);
    assert_eq!(
        openai.to_string(),
        r#"[{"role":"user","content":[{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,/9j/4A"}},{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}]"#
    );
    check_openai(&openai).unwrap();
    let anthropic = render_anthropic(&messages);
    assert_eq!(
        anthropic.to_string(),
        r#"{"messages":[{"role":"user","content":[{"type":"text","text":"what is this?"},{"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"/9j/4A"}},{"type":"image","source":{"type":"url","url":"https://x/y.png"}}]}]}"#
    );
    check_anthropic(&anthropic).unwrap();
}

/// The unanswered call of a closed step was invisible: `status` showed nothing unanswered and
/// `stats` nothing either. The lifecycle now lists it (`status` names it, `verify` notes it)
/// and `stats` counts it.
#[test]
fn lifecycle_and_stats_report_calls_closed_without_a_result() {
    use agentlog::event::parse_draft_line;
    use agentlog::session::{Session, SessionMeta, SessionOptions, SessionReader};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let session =
        Session::create(&path, SessionMeta::new("s", 0), SessionOptions::default()).unwrap();
    for line in [
        r#"{"type":"turn/start","data":{"turn":1}}"#,
        r#"{"type":"step/start","data":{"turn":1,"step":1}}"#,
        r#"{"type":"tool/call","data":{"turn":1,"step":1,"callId":"c1","name":"ls","arguments":"{}"}}"#,
        r#"{"type":"tool/call","data":{"turn":1,"step":1,"callId":"c2","name":"ls","arguments":"{}"}}"#,
        r#"{"type":"tool/result","data":{"turn":1,"step":1,"callId":"c1","message":{"role":"tool","toolName":"ls","content":"a","isError":false}}}"#,
        r#"{"type":"step/end","data":{"turn":1,"step":1}}"#,
    ] {
        session
            .append_draft(parse_draft_line(line).unwrap())
            .unwrap();
    }
    let reader = SessionReader::open(&path).unwrap();
    let closed = reader.lifecycle().unwrap().closed_unanswered();
    assert_eq!(
        closed
            .iter()
            .map(|c| (c.call_id.as_str(), c.seq))
            .collect::<Vec<_>>(),
        vec![("c2", 3)]
    );
    assert_eq!(reader.stats().unwrap().unanswered_calls, 1);
    assert!(reader
        .stats()
        .unwrap()
        .to_json()
        .to_string()
        .contains(r#""unansweredCalls":1"#));
    session.close().unwrap();
}

/// Blocks the Anthropic API refuses where they stood passed through (docs/events.md §5 asks
/// that refused content be converted or left out by a documented rule): an image in `system`
/// (text blocks only), a `tool_use` in a user message, a `tool_result` in an assistant message
/// or inside another result, a block type Anthropic does not have, an empty text block. Each is
/// now described in a text block (`[TYPE block: JSON]`), the empty text left out, and the
/// request passes the provider's shapes.
#[test]
fn anthropic_describes_the_blocks_it_refuses_where_they_stand() {
    let mut log = Log::new();
    log.add(
        "system/message",
        r#"{"role":"system","content":[{"type":"text","text":"be brief"},{"type":"image","source":{"type":"url","url":"https://x/logo.png"}}]}"#,
        "",
    );
    log.add(
        "user/message",
        r#"{"role":"user","content":[{"type":"text","text":""},{"type":"text","text":"look"},{"type":"widget","size":3},{"type":"tool_use","id":"u1","name":"ls","input":{}},{"type":"image","source":{"type":"url","url":"https://x/y.png"}}]}"#,
        "",
    );
    log.turn_start(1);
    log.step_start(1, 1);
    log.assistant(
        1,
        1,
        r#"[{"type":"text","text":"ok"},{"type":"gadget"},{"type":"tool_result","toolUseId":"zz","toolName":"ls","content":"x","isError":false}]"#,
    );
    log.step_end(1, 1);
    let messages = projection::messages(&log.events).unwrap();
    let rendered = render_anthropic(&messages);
    check_anthropic(&rendered).unwrap_or_else(|e| panic!("{e}: {rendered}"));
    let text = rendered.to_string();
    for described in [
        r#"[image block: {\"type\":\"image\",\"source\":{\"type\":\"url\",\"url\":\"https://x/logo.png\"}}]"#,
        r#"[widget block: {\"type\":\"widget\",\"size\":3}]"#,
        r#"[tool_use block: {\"type\":\"tool_use\",\"id\":\"u1\",\"name\":\"ls\",\"input\":{}}]"#,
        r#"[gadget block: {\"type\":\"gadget\"}]"#,
        r#"[tool_result block: "#,
    ] {
        assert!(text.contains(described), "{described} missing: {text}");
    }
    // An image where Anthropic takes one stays an image; no empty text block is left.
    assert!(
        text.contains(r#"{"type":"image","source":{"type":"url","url":"https://x/y.png"}}"#),
        "{text}"
    );
    assert!(!text.contains(r#""text":"""#), "{text}");
    assert_accepted("refused blocks", &messages);
}

/// A user message steering the agent while its tool ran, between the call and its result (in
/// one open step): both renderings answered the call with the synthetic TOOL_OUTCOME_UNKNOWN
/// result and showed the real one as text (`[result of tool call c1 …]`), although the step
/// had not ended without a result (docs/events.md §5). The result now moves up to right after
/// its call in the renderings; the neutral projection keeps the recorded order.
#[test]
fn a_result_after_a_steering_message_is_rendered_right_after_its_call() {
    let mut log = Log::new();
    log.ls_call();
    log.user("only the src folder, please");
    log.result(1, 1, "ls", Some("c1"), None);
    log.step_end(1, 1);
    log.step_start(1, 2);
    log.assistant(1, 2, r#"[{"type":"text","text":"done"}]"#);
    let messages = projection::messages(&log.events).unwrap();
    let neutral: Vec<String> = messages.iter().map(|m| format!("{:?}", m.role)).collect();
    assert_eq!(neutral, ["User", "Assistant", "User", "User", "Assistant"]);
    let openai = render_openai(&messages);
    let roles: Vec<&str> = openai
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.get("role").and_then(Value::as_str).unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool", "user", "assistant"]);
    let anthropic = render_anthropic(&messages);
    let text = format!("{openai} {anthropic}");
    assert!(!text.contains("TOOL_OUTCOME_UNKNOWN"), "{text}");
    assert!(!text.contains("[result of tool call"), "{text}");
    let second = &anthropic.get("messages").unwrap().as_array().unwrap()[2];
    let kinds: Vec<&str> = second
        .get("content")
        .and_then(Value::as_array)
        .unwrap()
        .iter()
        .map(|b| b.get("type").and_then(Value::as_str).unwrap())
        .collect();
    assert_eq!(kinds, ["tool_result", "text"], "{anthropic}");
    assert_accepted("steering between call and result", &messages);
}

/// A user message steering the agent while a tool still ran (its step open, no result yet):
/// the call was left unanswered in the renderings, followed by the user message, which both
/// providers refuse (docs/events.md §5: a rendering is always a request the provider
/// accepts). The call now gets a synthetic error result saying it has no result yet; once
/// the real result is logged, it takes that place. While only the results of its sibling
/// calls follow, nothing is added (the agent waits for the tool).
#[test]
fn a_call_still_running_that_a_steering_message_follows_gets_a_pending_result() {
    let mut log = Log::new();
    log.turn_start(1);
    log.user("go");
    log.step_start(1, 1);
    log.assistant(
        1,
        1,
        r#"[{"type":"tool_use","id":"c1","name":"build","input":{}},{"type":"tool_use","id":"c2","name":"ls","input":{}}]"#,
    );
    log.tool_call(1, 1, "c1", "build");
    log.tool_call(1, 1, "c2", "ls");
    log.result(1, 1, "ls", Some("c2"), None);
    let waiting = projection::messages(&log.events).unwrap();
    let text = format!("{} {}", render_openai(&waiting), render_anthropic(&waiting));
    assert!(!text.contains("TOOL_OUTCOME_UNKNOWN"), "{text}");

    log.user("skip the tests");
    let messages = projection::messages(&log.events).unwrap();
    assert_accepted("a call running when the user steered", &messages);
    let openai = render_openai(&messages);
    let tool_ids: Vec<&str> = openai
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m.get("tool_call_id").and_then(Value::as_str))
        .collect();
    assert_eq!(tool_ids, ["c1", "c2"], "{openai}");
    let pending = openai.as_array().unwrap()[2].get("content").unwrap();
    assert!(
        pending.as_str().unwrap().contains("still running"),
        "{openai}"
    );
    let anthropic = render_anthropic(&messages).to_string();
    assert!(anthropic.contains("still running"), "{anthropic}");

    // The real result, logged after the steering message, replaces the pending one.
    log.result(1, 1, "build", Some("c1"), None);
    let answered = projection::messages(&log.events).unwrap();
    assert_accepted("the running call answered", &answered);
    let text = format!(
        "{} {}",
        render_openai(&answered),
        render_anthropic(&answered)
    );
    assert!(!text.contains("TOOL_OUTCOME_UNKNOWN"), "{text}");
}

/// A tool use with no `tool/call` event (an agent that logs only the assistant message) in a
/// step that ended without a result: nothing followed it in the history, so the renderings
/// left it unanswered, a request both providers refuse (docs/events.md §5: a tool use whose
/// step has ended gets the synthetic result). It gets TOOL_OUTCOME_UNKNOWN now, once the step
/// has ended; while the step is open, its call may still be logged and nothing is added.
#[test]
fn a_tool_use_without_a_call_gets_the_synthetic_result_once_its_step_ended() {
    let mut log = Log::new();
    log.turn_start(1);
    log.user("go");
    log.step_start(1, 1);
    log.assistant(
        1,
        1,
        r#"[{"type":"tool_use","id":"u1","name":"ls","input":{}}]"#,
    );
    let open = projection::messages(&log.events).unwrap();
    let text = format!("{} {}", render_openai(&open), render_anthropic(&open));
    assert!(!text.contains("TOOL_OUTCOME_UNKNOWN"), "{text}");
    log.step_end(1, 1);
    log.add(
        "turn/end",
        r#"{"turn":1,"reason":{"kind":"completed"}}"#,
        "",
    );
    let ended = projection::messages(&log.events).unwrap();
    assert_accepted("a tool use without a call, its step ended", &ended);
    let openai = render_openai(&ended);
    assert!(
        openai.to_string().contains(r#""tool_call_id":"u1""#),
        "{openai}"
    );
    let anthropic = render_anthropic(&ended).to_string();
    assert!(anthropic.contains("TOOL_OUTCOME_UNKNOWN"), "{anthropic}");
}
