//! The example sessions: their projections equal `*.messages.json`, at every prefix the
//! incremental projector equals a fresh derive, and their renderings have the providers' shape.

use testkit::project as project_common;

use std::collections::HashMap;

use agentlog::event::{parse_json, Block, Value};
use agentlog::projection::{
    self, check_rendered, check_request, render, render_anthropic, render_openai, Format, Messages,
    Projector, Role, HISTORY_START,
};
use project_common::{examples, json_eq, sorted};

#[test]
fn examples_derive_their_messages_json() {
    for (name, events, expected) in examples() {
        let messages = projection::messages(&events).unwrap_or_else(|e| panic!("{name}: {e}"));
        let got = messages.to_value();
        assert!(
            json_eq(&got, &expected),
            "{name}: derived\n{got}\nexpected\n{expected}"
        );
        // The canonical text is the same value.
        let text = parse_json(&messages.to_canonical_string()).unwrap();
        assert!(json_eq(&text, &expected), "{name}: canonical text");
        assert_eq!(
            messages.len(),
            expected.as_array().map_or(0, <[Value]>::len),
            "{name}"
        );
    }
}

#[test]
fn derive_at_every_prefix_equals_the_incremental_snapshot() {
    for (name, events, _) in examples() {
        let mut projector = Projector::new();
        let mut snapshots = vec![projector.messages()];
        for event in &events {
            projector.check(event).unwrap();
            projector.apply(event).unwrap();
            snapshots.push(projector.messages());
        }
        // Every snapshot is still what it was when taken: compare after all events are applied.
        for (n, snapshot) in snapshots.iter().enumerate() {
            let fresh = projection::messages(&events[..n]).unwrap();
            assert_eq!(*snapshot, fresh, "{name}: snapshot at {n}");
            let at = projection::messages_at(&events, n as u64).unwrap();
            assert_eq!(at, fresh, "{name}: projection::messages_at({n})");
            assert_eq!(
                at.to_value(),
                fresh.to_value(),
                "{name}: projection::messages_at({n}) value"
            );
        }
        assert_eq!(projector.events_seen(), events.len() as u64, "{name}");
    }
}

#[test]
fn compaction_in_the_coding_session_replaces_its_run() {
    let (_, events, _) = examples()
        .into_iter()
        .find(|(name, ..)| name == "coding-session")
        .unwrap();
    let before = projection::messages_at(&events, 74).unwrap();
    let after = projection::messages_at(&events, 75).unwrap();
    // Seq 74 replaces the nodes of events 0..=25: the system prompt and the first turn.
    let replaced = before.iter().take_while(|m| m.source_seq <= 25).count();
    assert!(replaced >= 2);
    assert_eq!(before.get(0).map(|m| m.role), Some(Role::System));
    assert_eq!(after.len(), before.len() - replaced + 1);
    assert_eq!(after.get(0).map(|m| m.source_seq), Some(74));
    for (a, b) in after.iter().skip(1).zip(before.iter().skip(replaced)) {
        assert_eq!(a, b);
    }
}

/// The `tool_use` blocks of the projection: id → input.
fn tool_uses(messages: &Messages) -> HashMap<String, Value> {
    messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|b| match b {
            Block::ToolUse { id, input, .. } => Some((id.clone(), input.clone())),
            _ => None,
        })
        .collect()
}

fn count_blocks(messages: &Messages, pred: impl Fn(&Block) -> bool) -> usize {
    messages
        .iter()
        .flat_map(|m| &m.content)
        .filter(|b| pred(b))
        .count()
}

fn role(v: &Value) -> &str {
    v.get("role").and_then(Value::as_str).unwrap()
}

/// Every object in `v`, recursively.
fn objects(v: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => {
                out.push(v);
                stack.extend(map.iter().map(|(_, v)| v));
            }
            _ => {}
        }
    }
    out
}

#[test]
fn openai_rendering_of_the_examples() {
    for (name, events, _) in examples() {
        let messages = projection::messages(&events).unwrap();
        let rendered = render_openai(&messages);
        let items = rendered.as_array().unwrap();
        let uses = tool_uses(&messages);
        let results = count_blocks(&messages, |b| matches!(b, Block::ToolResult { .. }));
        assert!(results > 0, "{name}: the examples have tool results");

        let mut open_calls: Vec<String> = Vec::new();
        let mut tool_messages = 0;
        let mut tool_calls = 0;
        for (i, item) in items.iter().enumerate() {
            match role(item) {
                "tool" => {
                    tool_messages += 1;
                    let id = item.get("tool_call_id").and_then(Value::as_str).unwrap();
                    // A tool message answers a call of an assistant message before it.
                    assert!(open_calls.iter().any(|c| c == id), "{name}[{i}]: {id}");
                    assert!(
                        item.get("content").unwrap().as_str().is_some(),
                        "{name}[{i}]"
                    );
                }
                "assistant" => {
                    let calls = item
                        .get("tool_calls")
                        .map_or(&[][..], |c| c.as_array().unwrap());
                    assert!(!calls.is_empty() || item.get("tool_calls").is_none());
                    for call in calls {
                        tool_calls += 1;
                        assert_eq!(call.get("type").and_then(Value::as_str), Some("function"));
                        let id = call.get("id").and_then(Value::as_str).unwrap();
                        let function = call.get("function").unwrap();
                        let args = function.get("arguments").and_then(Value::as_str).unwrap();
                        let args = parse_json(args)
                            .unwrap_or_else(|e| panic!("{name}[{i}] {id}: arguments {e}"));
                        assert!(json_eq(&args, &uses[id]), "{name}[{i}] {id}");
                        assert_eq!(args, uses[id], "{name}[{i}] {id}: number text kept");
                        open_calls.push(id.to_owned());
                    }
                    let content = item.get("content").unwrap();
                    if calls.is_empty() {
                        assert!(!content.is_null(), "{name}[{i}]");
                    }
                }
                "user" | "system" => {
                    let content = item.get("content").unwrap();
                    assert!(content.as_str().is_some() || content.as_array().is_some());
                }
                other => panic!("{name}[{i}]: role {other}"),
            }
        }
        assert_eq!(
            tool_messages, results,
            "{name}: a tool message per tool_result"
        );
        assert_eq!(tool_calls, uses.len(), "{name}: a tool call per tool_use");
        // Reasoning is dropped; no neutral tool blocks are left.
        for object in objects(&rendered) {
            let ty = object.get("type").and_then(Value::as_str);
            assert!(
                !matches!(ty, Some("reasoning" | "tool_use" | "tool_result")),
                "{name}: {object}"
            );
        }
        // A user message with a single text block is a string.
        for (m, item) in messages.iter().zip(items) {
            if let [Block::Text { text, .. }] = m.content.as_slice() {
                if m.role == Role::User && role(item) == "user" {
                    assert_eq!(
                        item.get("content").and_then(Value::as_str),
                        Some(text.as_str())
                    );
                }
            }
        }
    }
}

#[test]
fn anthropic_rendering_of_the_examples() {
    for (name, events, _) in examples() {
        let messages = projection::messages(&events).unwrap();
        let rendered = render_anthropic(&messages);
        let list = rendered.get("messages").and_then(Value::as_array).unwrap();
        // Roles alternate.
        for pair in list.windows(2) {
            assert_ne!(role(&pair[0]), role(&pair[1]), "{name}");
        }
        let blocks: Vec<&Value> = list
            .iter()
            .flat_map(|m| m.get("content").and_then(Value::as_array).unwrap())
            .collect();
        let count = |ty: &str| {
            blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some(ty))
                .count()
        };
        let uses = tool_uses(&messages);
        assert_eq!(count("tool_use"), uses.len(), "{name}");
        assert_eq!(
            count("tool_result"),
            count_blocks(&messages, |b| matches!(b, Block::ToolResult { .. })),
            "{name}"
        );
        // Reasoning without a signature is refused by the API: left out.
        let signed = |b: &Block| match b {
            Block::Reasoning { extra, .. } => {
                extra.get("signature").and_then(Value::as_str).is_some()
            }
            _ => false,
        };
        let unsigned = count_blocks(&messages, |b| {
            matches!(b, Block::Reasoning { .. }) && !signed(b)
        });
        assert_eq!(count("thinking"), count_blocks(&messages, signed), "{name}");
        assert_eq!(count("reasoning"), 0, "{name}");
        // Every other block was kept: merging moves blocks, it does not lose them.
        let non_system: usize = messages
            .iter()
            .filter(|m| m.role != Role::System)
            .map(|m| m.content.len())
            .sum();
        assert_eq!(blocks.len(), non_system - unsigned, "{name}");
        for block in &blocks {
            match block.get("type").and_then(Value::as_str) {
                Some("tool_use") => {
                    let id = block.get("id").and_then(Value::as_str).unwrap();
                    // A non-object input is wrapped: Anthropic takes objects only.
                    let expected = match &uses[id] {
                        v @ Value::Object(_) => v.clone(),
                        other => parse_json(&format!(r#"{{"input":{other}}}"#)).unwrap(),
                    };
                    assert_eq!(block.get("input"), Some(&expected), "{name}");
                }
                Some("tool_result") => {
                    assert!(block.get("tool_use_id").and_then(Value::as_str).is_some());
                    assert!(block.get("is_error").and_then(Value::as_bool).is_some());
                    assert!(block.get("toolName").is_none() && block.get("toolUseId").is_none());
                }
                _ => {}
            }
        }
        // In each user message the tool results come first.
        for m in list.iter().filter(|m| role(m) == "user") {
            let types: Vec<bool> = m
                .get("content")
                .and_then(Value::as_array)
                .unwrap()
                .iter()
                .map(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
                .collect();
            assert!(types.windows(2).all(|w| w[0] || !w[1]), "{name}: {m}");
        }
    }
}

#[test]
fn system_messages_are_gathered_for_anthropic_and_kept_in_place_for_openai() {
    let mut log = project_common::Log::new();
    log.system("You are terse.");
    log.user("q1");
    log.assistant(
        1,
        1,
        r#"[{"type":"reasoning","text":"hmm","signature":"s"},{"type":"text","text":"a1"}]"#,
    );
    log.system("Now be verbose.");
    log.user("q2");
    let messages = projection::messages(&log.events).unwrap();

    let anthropic = render_anthropic(&messages);
    assert_eq!(
        sorted(&anthropic).to_string(),
        sorted(&parse_json(
            r#"{"system":[{"type":"text","text":"You are terse."},{"type":"text","text":"Now be verbose."}],
                "messages":[{"role":"user","content":[{"type":"text","text":"q1"}]},
                            {"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"s"},{"type":"text","text":"a1"}]},
                            {"role":"user","content":[{"type":"text","text":"q2"}]}]}"#
        )
        .unwrap())
        .to_string()
    );

    let openai = render_openai(&messages);
    assert_eq!(
        openai.to_string(),
        r#"[{"role":"system","content":"You are terse."},{"role":"user","content":"q1"},{"role":"assistant","content":"a1"},{"role":"system","content":"Now be verbose."},{"role":"user","content":"q2"}]"#
    );
    // Neutral rendering is the projection itself.
    assert_eq!(render(Format::Neutral, &messages), messages.to_value());
}

#[test]
/// Anthropic takes unknown blocks as they are; OpenAI has no such part: an `image` whose source
/// it cannot convert is described in a text part (issue 15), in the user message and in a tool
/// result alike.
fn unknown_blocks_pass_through_both_renderings() {
    let mut log = project_common::Log::new();
    let image = r#"{"type":"image","source":{"url":"u"},"n":1.50}"#;
    log.add(
        "user/message",
        &format!(r#"{{"role":"user","content":[{image},{{"type":"text","text":"look"}}]}}"#),
        "",
    );
    log.assistant(
        1,
        1,
        r#"[{"type":"text","text":"one"},{"type":"text","text":"two"},{"type":"tool_use","id":"c","name":"shot","input":{}},{"type":"tool_use","id":"d","name":"cat","input":{}}]"#,
    );
    log.turn_start(1);
    log.step_start(1, 1);
    log.tool_call(1, 1, "c", "shot");
    log.add(
        "tool/result",
        &format!(
            r#"{{"turn":1,"step":1,"message":{{"role":"tool","toolName":"shot","content":[{{"type":"text","text":"a"}},{image}],"isError":false}}}}"#
        ),
        "",
    );
    log.tool_call(1, 1, "d", "cat");
    log.add(
        "tool/result",
        r#"{"turn":1,"step":1,"message":{"role":"tool","toolName":"cat","content":[{"type":"text","text":"l1"},{"type":"text","text":"l2"}],"isError":false},"callId":"d"}"#,
        "",
    );
    let messages = projection::messages(&log.events).unwrap();
    let openai = render_openai(&messages);
    let described = r#"{"type":"text","text":"[image block left out: no OpenAI equivalent here]"}"#;
    assert_eq!(
        openai.to_string(),
        format!(
            r#"[{{"role":"user","content":[{described},{{"type":"text","text":"look"}}]}},{{"role":"assistant","content":[{{"type":"text","text":"one"}},{{"type":"text","text":"two"}}],"tool_calls":[{{"id":"c","type":"function","function":{{"name":"shot","arguments":"{{}}"}}}},{{"id":"d","type":"function","function":{{"name":"cat","arguments":"{{}}"}}}}]}},{{"role":"tool","tool_call_id":"c","content":[{{"type":"text","text":"a"}},{described}]}},{{"role":"tool","tool_call_id":"d","content":"l1\nl2"}}]"#
        )
        .replace("l1\nl2", "l1\\nl2")
    );
    let anthropic = render_anthropic(&messages);
    let list = anthropic.get("messages").and_then(Value::as_array).unwrap();
    assert!(anthropic.get("system").is_none());
    assert_eq!(
        list[0].get("content").and_then(Value::as_array).unwrap()[0].to_string(),
        image
    );
    let results = list[2].get("content").and_then(Value::as_array).unwrap();
    assert_eq!(
        results.len(),
        2,
        "two tool results merged into one user message"
    );
    assert_eq!(
        results[0].get("content").and_then(Value::as_array).unwrap()[1].to_string(),
        image
    );
}

#[test]
fn check_request_accepts_the_projection_and_finds_a_divergence() {
    for (name, events, _) in examples() {
        let recorded = projection::messages(&events).unwrap();
        // The projection itself, and a copy built by hand (no source seqs).
        assert_eq!(check_request(&recorded, &recorded.clone()), Ok(()));
        let copy: Messages = recorded
            .iter()
            .map(|m| agentlog::projection::Message::new(m.role, m.content.clone()))
            .collect();
        assert_eq!(check_request(&recorded, &copy), Ok(()), "{name}");

        // Change one text in the middle.
        let k = recorded.len() / 2;
        let mut tampered = recorded.to_vec();
        let Some((j, text)) =
            tampered[k]
                .content
                .iter_mut()
                .enumerate()
                .find_map(|(j, b)| match b {
                    Block::Text { text, .. } => Some((j, text)),
                    _ => None,
                })
        else {
            // Replace the whole content instead.
            tampered[k].content = vec![Block::text("tampered")];
            let err = check_request(&recorded, &tampered.into()).unwrap_err();
            assert_eq!(err.index, Some(k), "{name}");
            continue;
        };
        text.push_str(" (edited)");
        let err = check_request(&recorded, &tampered.clone().into()).unwrap_err();
        assert_eq!(err.index, Some(k), "{name}");
        assert_eq!(err.path, format!("$[{k}].content[{j}].text"), "{name}");
        assert!(
            err.found.contains("(edited)") || err.found.ends_with('…'),
            "{name}: {err}"
        );
        assert!(!err.expected.contains("(edited)"), "{name}");
        assert!(err.to_string().contains(&format!("message {k}")), "{err}");

        // A message left out at the end.
        let mut short = recorded.to_vec();
        short.pop();
        let err = check_request(&recorded, &short.into()).unwrap_err();
        assert_eq!(err.index, Some(recorded.len() - 1), "{name}");
        assert_eq!(err.found, "(absent)");
        // A role changed.
        let mut swapped = recorded.to_vec();
        swapped[0].role = Role::System;
        let err = check_request(&recorded, &swapped.into()).unwrap_err();
        assert_eq!((err.index, err.path.as_str()), (Some(0), "$[0].role"));
    }
}

/// Rewrites every object of `v` with its members in reverse order.
fn reversed_members(v: &Value) -> Value {
    match v {
        Value::Array(items) => Value::Array(items.iter().map(reversed_members).collect()),
        Value::Object(map) => {
            let mut members: Vec<_> = map
                .members()
                .iter()
                .map(|m| agentlog::event::Member {
                    key: m.key.clone(),
                    value: reversed_members(&m.value),
                })
                .collect();
            members.reverse();
            Value::Object(members.try_into().unwrap())
        }
        other => other.clone(),
    }
}

#[test]
fn check_rendered_accepts_the_renderings_and_finds_injected_divergences() {
    for (name, events, _) in examples() {
        let recorded = projection::messages(&events).unwrap();
        for format in [Format::Neutral, Format::OpenAi, Format::Anthropic] {
            let request = render(format, &recorded);
            assert_eq!(
                check_rendered(format, &recorded, &request),
                Ok(()),
                "{name} {format}"
            );
            // Member order does not matter.
            let shuffled = reversed_members(&request);
            assert_ne!(shuffled.to_string(), request.to_string());
            assert_eq!(
                check_rendered(format, &recorded, &shuffled),
                Ok(()),
                "{name} {format}"
            );
            // Another format's rendering is not this one.
            let other = match format {
                Format::OpenAi => Format::Neutral,
                _ => Format::OpenAi,
            };
            assert!(check_rendered(format, &recorded, &render(other, &recorded)).is_err());
        }

        // OpenAI: a tool_call_id changed.
        let mut openai = render_openai(&recorded);
        let Value::Array(items) = &mut openai else {
            panic!()
        };
        let (i, tool) = items
            .iter_mut()
            .enumerate()
            .find(|(_, m)| role(m) == "tool")
            .unwrap();
        let Value::Object(tool) = tool else { panic!() };
        *tool.get_mut("tool_call_id").unwrap() = Value::from("call_forged");
        let err = check_rendered(Format::OpenAi, &recorded, &openai).unwrap_err();
        assert_eq!(err.index, Some(i), "{name}");
        assert_eq!(err.path, format!("$[{i}].tool_call_id"));
        assert_eq!(err.found, "\"call_forged\"");

        // Anthropic: a message dropped in the middle.
        let mut anthropic = render_anthropic(&recorded);
        let Value::Object(body) = &mut anthropic else {
            panic!()
        };
        let Some(Value::Array(list)) = body.get_mut("messages") else {
            panic!()
        };
        let dropped = list.len() / 2;
        list.remove(dropped);
        let err = check_rendered(Format::Anthropic, &recorded, &anthropic).unwrap_err();
        assert_eq!(err.index, Some(dropped), "{name}: {err}");
        assert!(
            err.path.starts_with(&format!("$.messages[{dropped}]")),
            "{err}"
        );
    }
}

#[test]
fn check_rendered_compares_numbers_by_value_and_openai_arguments_as_json() {
    let mut log = project_common::Log::new();
    log.system("sys");
    log.assistant(
        1,
        1,
        r#"[{"type":"tool_use","id":"c","name":"f","input":{"a":1.0,"b":[1E+400,"x"]}}]"#,
    );
    let recorded = projection::messages(&log.events).unwrap();

    let request = parse_json(
        r#"[{"role":"system","content":"sys"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"b\": [10e399, \"x\"], \"a\": 1}"}}]}]"#,
    )
    .unwrap();
    assert_eq!(check_rendered(Format::OpenAi, &recorded, &request), Ok(()));
    let changed = parse_json(&request.to_string().replace(r#"\"a\": 1}"#, r#"\"a\": 2}"#)).unwrap();
    let err = check_rendered(Format::OpenAi, &recorded, &changed).unwrap_err();
    assert_eq!(err.path, "$[1].tool_calls[0].function.arguments");

    // Anthropic wants a user message first: the rendering starts with HISTORY_START.
    let anthropic = parse_json(&format!(
        r#"{{"messages":[{{"role":"user","content":[{{"type":"text","text":"{HISTORY_START}"}}]}},{{"role":"assistant","content":[{{"input":{{"a":1,"b":[1e400,"x"]}},"name":"f","id":"c","type":"tool_use"}}]}}],"system":[{{"type":"text","text":"sys"}}]}}"#,
    ))
    .unwrap();
    assert_eq!(
        check_rendered(Format::Anthropic, &recorded, &anthropic),
        Ok(())
    );
    let other_system = parse_json(
        &anthropic
            .to_string()
            .replace(r#""text":"sys""#, r#""text":"SYS""#),
    )
    .unwrap();
    let err = check_rendered(Format::Anthropic, &recorded, &other_system).unwrap_err();
    assert_eq!((err.index, err.path.as_str()), (None, "$.system[0].text"));
    assert_eq!(
        (err.expected.as_str(), err.found.as_str()),
        ("\"sys\"", "\"SYS\"")
    );
}

#[test]
fn format_names() {
    for format in Format::ALL {
        assert_eq!(format.as_str().parse::<Format>(), Ok(*format));
        assert_eq!(format.to_string(), format.as_str());
    }
    assert_eq!("openai".parse::<Format>(), Ok(Format::OpenAi));
    let err = "OpenAI".parse::<Format>().unwrap_err();
    assert!(err.to_string().contains("OpenAI"));
    assert!("".parse::<Format>().is_err());
}
