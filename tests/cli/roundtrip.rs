//! The command line on the example sessions: import → export byte for byte, derive equal to the
//! recorded projections, the JSON shapes of `status`, `ls` and `derive`, and `show`.

use crate::cli_common;
use testkit::project as project_common;

use agentlog::event::{parse_json, Value};
use agentlog::store::Store;
use cli_common::{example, Cli, EXAMPLES};
use project_common::json_eq;

fn keys(v: &Value) -> Vec<String> {
    v.as_object()
        .unwrap()
        .keys()
        .map(str::to_owned)
        .collect::<Vec<_>>()
}

#[test]
fn import_then_export_is_byte_identical() {
    let cli = Cli::new();
    for name in EXAMPLES {
        let file = example(&format!("{name}.jsonl"));
        let bytes = std::fs::read(&file).unwrap();
        let run = cli.run(&["import", file.to_str().unwrap()]);
        // The id, alone on stdout.
        let id = run.ok().strip_suffix('\n').unwrap().to_string();
        assert!(
            !id.is_empty() && !id.contains(char::is_whitespace),
            "{id:?}"
        );
        let header = bytes.starts_with(br#"{"type":"session""#);
        let mut args = vec!["export", id.as_str()];
        if header {
            args.push("--header");
        }
        let out = cli.run(&args);
        out.ok();
        assert!(out.raw == bytes, "{name}: export differs");

        // To a file, atomically: the same bytes and no temporary file left.
        let dir = cli.dir.path().join(format!("out-{name}"));
        std::fs::create_dir(&dir).unwrap();
        let target = dir.join("x.jsonl");
        args.extend(["-o", target.to_str().unwrap()]);
        assert_eq!(cli.run(&args).ok(), "");
        assert!(
            std::fs::read(&target).unwrap() == bytes,
            "{name}: -o differs"
        );
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
    }
    // The header gave the coding session its id.
    cli.run(&["export", "sess-0001"]).ok();
}

#[test]
fn import_from_stdin_with_id_and_title() {
    let cli = Cli::new();
    let bytes = std::fs::read(example("fix-typo.jsonl")).unwrap();
    let run = cli.run_with(
        &["import", "-", "--id", "typo.1", "--title", "Typo"],
        &bytes,
    );
    assert_eq!(run.ok(), "typo.1\n");
    let ls = parse_json(cli.run(&["ls", "--json"]).ok()).unwrap();
    let first = &ls.as_array().unwrap()[0];
    assert_eq!(first.get("id").unwrap().as_str(), Some("typo.1"));
    assert_eq!(first.get("title").unwrap().as_str(), Some("Typo"));
    assert!(cli.run(&["export", "typo.1"]).raw == bytes);
}

#[test]
fn derive_of_each_example_equals_its_messages_json() {
    let cli = Cli::new();
    for name in EXAMPLES {
        let id = cli.import_example(name, &["--id", name]);
        let expected = std::fs::read_to_string(example(&format!("{name}.messages.json"))).unwrap();
        let expected = parse_json(&expected).unwrap();
        let out = cli.run(&["derive", &id]);
        let derived = parse_json(out.ok()).unwrap();
        assert!(json_eq(&derived, &expected), "{name}: {derived}");
        // One line of compact JSON.
        assert_eq!(out.stdout.matches('\n').count(), 1, "{name}");
        let explicit = cli.run(&["derive", &id, "--format", "neutral"]);
        assert_eq!(explicit.ok(), out.stdout);

        // The provider renderings: OpenAI an array, Anthropic {"system","messages"}.
        let openai = parse_json(cli.run(&["derive", &id, "--format", "openai"]).ok()).unwrap();
        assert!(!openai.as_array().unwrap().is_empty(), "{name}");
        let anthropic =
            parse_json(cli.run(&["derive", &id, "--format", "anthropic"]).ok()).unwrap();
        assert!(keys(&anthropic).contains(&"messages".to_string()), "{name}");
    }
    // --at N: the history when the log held N events.
    assert_eq!(cli.run(&["derive", "fix-typo", "--at", "0"]).ok(), "[]\n");
    assert_eq!(
        cli.run(&["derive", "fix-typo", "--at", "3"]).ok(),
        "[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Fix the typo in the example README.\"}]}]\n"
    );
    let err = cli.run(&["derive", "fix-typo", "--at", "11"]);
    assert!(err.fails(1).contains("holds 10 events"), "{}", err.stderr);
}

#[test]
fn status_json_has_exactly_the_documented_shape() {
    let cli = Cli::new();
    cli.import_example("fix-typo", &["--id", "done"]);
    assert_eq!(
        cli.run(&["status", "done", "--json"]).ok(),
        "{\"state\":\"idle\",\"openTurn\":null,\"openStep\":null,\"unansweredCalls\":[],\"pendingApprovals\":[],\"closedUnanswered\":[],\"events\":10,\"lastTurnEnd\":{\"turn\":1,\"reason\":\"completed\"}}\n"
    );

    // A crash after the tool call: the step is open, the call unanswered.
    let text = std::fs::read_to_string(example("fix-typo.jsonl")).unwrap();
    let head: String = text.lines().take(7).map(|l| format!("{l}\n")).collect();
    cli.run_with(&["import", "-", "--id", "open"], head.as_bytes())
        .ok();
    assert_eq!(
        cli.run(&["status", "open", "--json"]).ok(),
        "{\"state\":\"toolInvoking\",\"openTurn\":1,\"openStep\":1,\"unansweredCalls\":[\"call_1\"],\"pendingApprovals\":[],\"closedUnanswered\":[],\"events\":7,\"lastTurnEnd\":null}\n"
    );

    // Waiting for an approval.
    let text = std::fs::read_to_string(example("tools-and-approvals.jsonl")).unwrap();
    let head: String = text.lines().take(6).map(|l| format!("{l}\n")).collect();
    cli.run_with(&["import", "-", "--id", "approval"], head.as_bytes())
        .ok();
    assert_eq!(
        cli.run(&["status", "approval", "--json"]).ok(),
        "{\"state\":\"awaitUserConfirm\",\"openTurn\":0,\"openStep\":1,\"unansweredCalls\":[\"call_0_1_0\"],\"pendingApprovals\":[\"call_0_1_0\"],\"closedUnanswered\":[],\"events\":6,\"lastTurnEnd\":null}\n"
    );

    // The human form says the same.
    let human = cli.run(&["status", "approval"]);
    let human = human.ok();
    assert!(human.contains("awaitUserConfirm"), "{human}");
    assert!(human.contains("call_0_1_0"), "{human}");
}

#[test]
fn ls_json_is_one_array_of_the_documented_objects() {
    let cli = Cli::new();
    // A missing store is an error, an empty one an empty array.
    cli.run(&["ls", "--json"]).fails(1);
    std::fs::create_dir_all(cli.store().join("sessions")).unwrap();
    assert_eq!(cli.run(&["ls", "--json"]).ok(), "[]\n");
    for name in EXAMPLES {
        cli.import_example(name, &[]);
    }
    let out = cli.run(&["ls", "--json"]);
    assert_eq!(out.ok().matches('\n').count(), 1);
    let ls = parse_json(&out.stdout).unwrap();
    let items = ls.as_array().unwrap();
    assert_eq!(items.len(), 3);
    for item in items {
        assert_eq!(
            keys(item),
            [
                "id",
                "title",
                "state",
                "events",
                "bytes",
                "createdAt",
                "lastEventTime",
                "parentSession",
                "seedLength"
            ]
        );
        assert!(item.get("bytes").unwrap().as_u64().unwrap() > 0);
        assert_eq!(item.get("parentSession"), Some(&Value::Null));
        assert_eq!(item.get("state").unwrap().as_str(), Some("active"));
    }
    let coding = items
        .iter()
        .find(|i| i.get("id").unwrap().as_str() == Some("sess-0001"))
        .unwrap();
    assert_eq!(
        coding.get("title").unwrap().as_str(),
        Some("corpus session 1")
    );
    assert_eq!(coding.get("events").unwrap().as_u64(), Some(107));
    assert_eq!(
        coding.get("createdAt").unwrap().as_i64(),
        Some(1_755_000_000_001)
    );
    let last = std::fs::read_to_string(example("coding-session.jsonl")).unwrap();
    let last = parse_json(last.lines().last().unwrap()).unwrap();
    assert_eq!(coding.get("lastEventTime"), last.get("time"));
    // Imported without a header: no title.
    assert!(items.iter().any(|i| i.get("title") == Some(&Value::Null)));

    // A deleted session is listed only with --all.
    Store::open(cli.store())
        .unwrap()
        .delete("sess-0001")
        .unwrap();
    let ls = parse_json(cli.run(&["ls", "--json"]).ok()).unwrap();
    assert_eq!(ls.as_array().unwrap().len(), 2);
    let all = parse_json(cli.run(&["ls", "--json", "--all"]).ok()).unwrap();
    let deleted = all
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i.get("id").unwrap().as_str() == Some("sess-0001"))
        .unwrap();
    assert_eq!(deleted.get("state").unwrap().as_str(), Some("deleted"));

    // The table names every session.
    let table = cli.run(&["ls", "--all"]);
    let table = table.ok();
    assert!(table.starts_with("ID "), "{table}");
    assert_eq!(table.lines().count(), 4, "{table}");
    assert!(table.contains("corpus session 1"), "{table}");
}

/// The part of a `show` line after the seq and time columns: indentation, type, summary.
fn body(line: &str) -> &str {
    // "   seq HH:MM:SS.mmm <indent><type> …"
    let rest = line.trim_start();
    let rest = &rest[rest.find(' ').unwrap() + 1..];
    &rest[rest.find(' ').unwrap() + 1..]
}

#[test]
fn show_indents_turns_and_steps_and_pairs_calls_with_results() {
    let cli = Cli::new();
    cli.import_example("fix-typo", &["--id", "typo"]);
    let out = cli.run(&["show", "typo"]);
    let lines: Vec<&str> = out.ok().lines().collect();
    assert_eq!(lines.len(), 10);
    assert!(!out.stdout.contains('\x1b'), "piped output is plain");
    for (seq, line) in lines.iter().enumerate() {
        assert!(line.trim_start().starts_with(&format!("{seq} ")), "{line}");
    }
    assert!(body(lines[0]).starts_with("turn/start "), "{}", lines[0]);
    assert!(body(lines[1]).starts_with("  step/start "), "{}", lines[1]);
    assert!(
        body(lines[2]).starts_with("    user/message "),
        "{}",
        lines[2]
    );
    assert!(lines[2].contains("Fix the typo in the example README."));
    assert!(body(lines[8]).starts_with("  step/end "), "{}", lines[8]);
    assert!(body(lines[9]).starts_with("turn/end "), "{}", lines[9]);
    assert!(lines[9].contains("completed"));
    // The call and its result, paired.
    assert!(lines[6].contains("→ call_1"), "{}", lines[6]);
    assert!(lines[6].contains("bash"), "{}", lines[6]);
    assert!(!lines[6].contains("no result"), "{}", lines[6]);
    assert!(lines[7].contains("↳ call_1 bash"), "{}", lines[7]);
    // Times: local HH:MM:SS.mmm (one day).
    let time = lines[0].split_whitespace().nth(1).unwrap();
    assert_eq!(time.len(), 12, "{time}");
    assert_eq!(&time[8..9], ".");

    // A call whose step ended without a result is flagged.
    let text = std::fs::read_to_string(example("fix-typo.jsonl")).unwrap();
    let head: String = text.lines().take(7).map(|l| format!("{l}\n")).collect();
    cli.run_with(&["import", "-", "--id", "cut"], head.as_bytes())
        .ok();
    let out = cli.run(&["show", "cut"]);
    let last = out.ok().lines().last().unwrap();
    assert!(last.contains("→ call_1 (no result)"), "{last}");

    // NO_COLOR keeps it plain too.
    let out = cli
        .command(&["show", "typo"])
        .env("NO_COLOR", "")
        .output()
        .unwrap();
    assert!(!out.stdout.contains(&0x1b));
}

#[test]
fn show_selects_by_seq_type_and_turn_and_prints_canonical_json() {
    let cli = Cli::new();
    let id = cli.import_example("coding-session", &[]);
    let text = std::fs::read_to_string(example("coding-session.jsonl")).unwrap();
    let events: Vec<&str> = text.lines().skip(1).collect();

    let json = cli.run(&["show", &id, "--from", "3", "--to", "6", "--json"]);
    assert_eq!(json.ok(), events[3..=6].join("\n") + "\n");

    let tools = cli.run(&["show", &id, "--type", "tool/call", "--json"]);
    let want: Vec<&str> = events
        .iter()
        .copied()
        .filter(|l| l.starts_with(r#"{"type":"tool/call""#))
        .collect();
    assert_eq!(tools.ok(), want.join("\n") + "\n");

    // A domain selects its types; --turn the events from turn/start to turn/end.
    let turn2 = cli.run(&["show", &id, "--turn", "2", "--type", "turn,step", "--json"]);
    let lines: Vec<&str> = turn2.ok().lines().collect();
    assert!(lines.first().unwrap().contains(r#""type":"turn/start""#));
    assert!(lines.first().unwrap().contains(r#""turn":2"#));
    assert!(lines.last().unwrap().contains(r#""type":"turn/end""#));
    assert!(lines.iter().all(|l| l.contains(r#""turn":2"#)), "{lines:?}");

    let human = cli.run(&["show", &id, "--turn", "2"]);
    let first = human.ok().lines().next().unwrap();
    assert!(body(first).starts_with("turn/start "), "{first}");
    assert_eq!(
        human.stdout.lines().count(),
        cli.run(&["show", &id, "--turn", "2", "--json"])
            .ok()
            .lines()
            .count()
    );
}

#[test]
fn tail_prints_the_last_events_and_stats_counts() {
    let cli = Cli::new();
    cli.import_example("fix-typo", &["--id", "typo"]);
    let out = cli.run(&["tail", "typo", "-n", "3"]);
    let seqs: Vec<&str> = out
        .ok()
        .lines()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(seqs, ["7", "8", "9"]);
    // The result is still paired with a call printed before the window.
    assert!(out.stdout.contains("↳ call_1 bash"), "{}", out.stdout);

    let stats = parse_json(cli.run(&["stats", "typo", "--json"]).ok()).unwrap();
    assert_eq!(stats.get("events").unwrap().as_u64(), Some(10));
    assert_eq!(stats.get("turns").unwrap().as_u64(), Some(1));
    assert_eq!(
        stats.get("tools").unwrap().get("bash").unwrap().to_string(),
        r#"{"calls":1,"errors":0,"failureRate":0,"latencyMs":{"median":10,"max":10}}"#
    );
    assert!(cli.run(&["stats", "typo"]).ok().contains("bash"));
}
