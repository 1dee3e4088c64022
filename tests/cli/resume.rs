//! Resume, fork and replay from the command line: a session killed mid-turn is closed by
//! `close` and goes on; `fork` at every turn boundary holds the parent's first lines and records
//! its lineage; `replay --run` finds no divergence with an executor echoing the recorded results
//! and exactly the changed call with one that changes a result.

use crate::cli_common;

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

use agentlog::event::{parse_json, Value};
use cli_common::{example, Cli};

fn lines(bytes: &[u8]) -> Vec<String> {
    String::from_utf8(bytes.to_vec())
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with(r#"{"type":"session""#))
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_session_killed_mid_turn_is_closed_verified_and_goes_on() {
    let cli = Cli::new();
    // A writer appends the start of a turn up to a tool call, then is killed (SIGKILL).
    let fix = lines(&std::fs::read(example("fix-typo.jsonl")).unwrap());
    cli.run_with(&["import", "-", "--id", "s"], fix[0].as_bytes())
        .ok();
    let mut child = cli
        .command(&["append", "s", "--ack"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut acks = BufReader::new(child.stdout.take().unwrap()).lines();
    for line in &fix[1..7] {
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        acks.next().unwrap().unwrap();
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let status = parse_json(cli.run(&["status", "s", "--json"]).ok()).unwrap();
    assert_eq!(
        status.as_object().unwrap().get("state").unwrap().as_str(),
        Some("toolInvoking")
    );
    let unanswered = status
        .as_object()
        .unwrap()
        .get("unansweredCalls")
        .unwrap()
        .to_string();
    assert_eq!(unanswered, r#"["call_1"]"#);

    let out = cli.run(&["close", "s"]).ok().to_string();
    assert!(
        out.contains("tool/result") && out.contains("turn/end"),
        "{out}"
    );
    cli.run(&["verify", "s"]).ok();
    let status = parse_json(cli.run(&["status", "s", "--json"]).ok()).unwrap();
    assert_eq!(
        status.as_object().unwrap().get("state").unwrap().as_str(),
        Some("idle")
    );
    // Every tool use of the history has its result.
    let derived = cli.run(&["derive", "s"]).ok().to_string();
    assert!(
        derived.contains(r#""tool_use""#) && derived.contains(r#""toolUseId":"call_1""#),
        "{derived}"
    );
    assert!(
        derived.contains("TOOL_OUTCOME_UNKNOWN") || derived.contains("outcome is unknown"),
        "{derived}"
    );
    // A new turn works; closing again finds nothing open.
    cli.run_with(
        &["append", "s"],
        br#"{"type":"turn/start","data":{"turn":2}}"#,
    )
    .ok();
    let again = cli
        .run(&["close", "s", "--reason", "aborted"])
        .ok()
        .to_string();
    assert!(again.contains("turn/end"), "{again}");
    assert!(cli.run(&["close", "s"]).ok().contains("nothing was open"));
    let err = cli
        .run(&["close", "s", "--reason", "sleepy"])
        .fails(2)
        .to_string();
    assert!(err.contains("interrupted"), "{err}");
}

#[test]
fn fork_at_every_turn_boundary_and_lineage() {
    let cli = Cli::new();
    let file = example("tools-and-approvals.jsonl");
    let parent_lines = lines(&std::fs::read(&file).unwrap());
    let parent = cli
        .run(&["import", file.to_str().unwrap(), "--id", "p"])
        .ok()
        .trim()
        .to_string();
    let before = cli.run(&["export", "p"]).raw;
    let mut forked = 0;
    for turn in 0..12u64 {
        let id = format!("t{turn}");
        let out = cli.run(&["fork", &parent, "--turn", &turn.to_string(), "--id", &id]);
        assert_eq!(out.ok().trim(), id);
        let child = lines(&cli.run(&["export", &id]).raw);
        let n = child.len();
        assert_eq!(child, parent_lines[..n].to_vec(), "turn {turn}");
        assert!(parent_lines[n - 1].contains(r#""type":"turn/end""#));
        forked += 1;
        // Appending to the child leaves the parent unchanged.
        let next = turn + 1;
        cli.run_with(
            &["append", &id],
            format!(r#"{{"type":"turn/start","data":{{"turn":{next}}}}}"#).as_bytes(),
        )
        .ok();
    }
    assert_eq!(forked, 12);
    assert!(
        cli.run(&["export", "p"]).raw == before,
        "the parent changed"
    );
    let fork_at = cli
        .run(&["fork", "p", "--at", "5", "--id", "five"])
        .ok()
        .trim()
        .to_string();
    assert_eq!(
        lines(&cli.run(&["export", &fork_at]).raw),
        parent_lines[..5].to_vec()
    );
    // A fork of a fork records its lineage.
    cli.run(&["fork", "t3", "--at", "3", "--id", "g"]).ok();
    let ls = parse_json(cli.run(&["ls", "--json"]).ok()).unwrap();
    let parent_of = |id: &str| -> Option<String> {
        ls.as_array()
            .unwrap()
            .iter()
            .find(|s| s.as_object().unwrap().get("id").unwrap().as_str() == Some(id))
            .and_then(|s| {
                s.as_object()
                    .unwrap()
                    .get("parentSession")
                    .unwrap()
                    .as_str()
                    .map(str::to_owned)
            })
    };
    assert_eq!(parent_of("g").as_deref(), Some("t3"));
    assert_eq!(parent_of("t3").as_deref(), Some("p"));
    assert_eq!(parent_of("p"), None);
    let table = cli.run(&["ls"]).ok().to_string();
    assert!(
        table.contains("t3@3") && table.contains("FORKED FROM"),
        "{table}"
    );
    // Bad fork points and ids.
    cli.run(&["fork", "p", "--turn", "99"]).fails(1);
    cli.run(&["fork", "p", "--at", "100000"]).fails(1);
    cli.run(&["fork", "p", "--at", "1", "--id", "../x"])
        .fails(1);
    cli.run(&["fork", "p"]).fails(2);
}

const ECHO: &str =
    r#"python3 -c 'import json,sys; c=json.load(sys.stdin); print(json.dumps(c["recorded"]))'"#;

#[test]
fn replay_run_reports_exactly_the_diverging_calls() {
    let cli = Cli::new();
    let id = cli.import_example("tools-and-approvals", &[]);
    // Dry run: every step and call, recorded results shown.
    let dry = parse_json(cli.run(&["replay", &id, "--json"]).ok()).unwrap();
    let dry = dry.as_object().unwrap();
    assert_eq!(dry.get("calls").unwrap().as_u64(), Some(41));
    assert_eq!(dry.get("ran").unwrap(), &Value::Bool(false));
    assert_eq!(dry.get("steps").unwrap().as_array().unwrap().len(), 33);
    let text = cli.run(&["replay", &id]).ok().to_string();
    assert!(
        text.contains("history of") && text.contains("33 steps, 41 tool calls"),
        "{text}"
    );

    // An executor that echoes the recorded results: no divergence, exit 0.
    let run = cli.run(&["replay", &id, "--run", ECHO, "--json"]);
    let report = parse_json(run.ok()).unwrap();
    assert_eq!(
        report
            .as_object()
            .unwrap()
            .get("divergences")
            .unwrap()
            .as_u64(),
        Some(0)
    );

    // One that changes the result of call_2_1_0: exactly that call, exit 1.
    let change = r#"python3 -c 'import json,sys
c=json.load(sys.stdin); r=c["recorded"]
if c["callId"]=="call_2_1_0": r["content"]="changed"
print(json.dumps(r))'"#;
    let run = cli.run(&["replay", &id, "--run", change, "--json"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let report = parse_json(&run.stdout).unwrap();
    let report = report.as_object().unwrap();
    assert_eq!(report.get("divergences").unwrap().as_u64(), Some(1));
    let diverged: Vec<String> = report
        .get("steps")
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| {
            s.as_object()
                .unwrap()
                .get("calls")
                .unwrap()
                .as_array()
                .unwrap()
                .to_vec()
        })
        .filter(|c| c.as_object().unwrap().get("diverged").unwrap() == &Value::Bool(true))
        .map(|c| {
            c.as_object()
                .unwrap()
                .get("callId")
                .unwrap()
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(diverged, ["call_2_1_0"]);
    // Plain text output from the command is taken as the content.
    let run = cli.run(&["replay", &id, "--run", "echo hello"]);
    assert_eq!(run.code, 1);
    assert!(run.stdout.contains("diverged"), "{}", run.stdout);
}
