//! The command line's `search` and `stats`: `search --json` lines parse and equal the library's
//! results; `stats --json` has exactly the documented shape and the library's numbers; exit
//! codes.

use crate::cli_common;
use testkit::search as search_common;

use std::ops::ControlFlow;

use agentlog::event::{parse_json, Value};
use cli_common::{example, Cli};
use search_common::{Corpus, RefQuery};

fn setup() -> (Cli, Corpus) {
    let cli = Cli::new();
    let corpus = Corpus::build_at(cli.store());
    (cli, corpus)
}

/// The lines the library's search gives, in the documented form.
fn library_lines(corpus: &Corpus, q: &RefQuery) -> Vec<String> {
    let mut lines = Vec::new();
    corpus
        .store
        .search(&q.to_query(), |id, e| {
            lines.push(format!(
                r#"{{"session":{},"event":{}}}"#,
                Value::String(id.to_string()),
                e.to_canonical_string()
            ));
            ControlFlow::Continue(())
        })
        .unwrap();
    lines
}

fn search(cli: &Cli, args: &[String]) -> String {
    let mut all = vec!["search".to_string()];
    all.extend_from_slice(args);
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    cli.run(&refs).ok().to_string()
}

#[test]
fn search_json_lines_equal_the_library() {
    let (cli, corpus) = setup();
    let queries = [
        RefQuery::default(),
        RefQuery {
            tool: Some("bash".into()),
            ..RefQuery::default()
        },
        RefQuery {
            types: vec!["tool/*".into(), "approval/decision".into()],
            text: Some("ÉCOLE".into()),
            ..RefQuery::default()
        },
        RefQuery {
            turn: Some(2),
            limit: Some(25),
            ..RefQuery::default()
        },
        RefQuery {
            sessions: Some(vec!["gen-3".into(), "ex-coding-session".into()]),
            text: Some("failed".into()),
            since: Some(1_755_000_000_000),
            until: Some(1_755_300_000_000),
            ..RefQuery::default()
        },
        RefQuery {
            sessions: Some(vec!["gen-2".into(), "gen-4".into()]),
            limit: Some(40),
            types: vec!["*".into()],
            ..RefQuery::default()
        },
        RefQuery {
            text: Some("-x".into()),
            ..RefQuery::default()
        },
    ];
    for q in &queries {
        let mut args = q.to_args();
        args.push("--json".into());
        let out = search(&cli, &args);
        let got: Vec<&str> = out.lines().collect();
        let want = library_lines(&corpus, q);
        assert_eq!(got, want, "{q:?}");
        if q.limit.is_none() && q.text.as_deref() != Some("-x") {
            assert!(!got.is_empty(), "{q:?}");
        }
        for line in got {
            // Each line is one JSON object {"session","event"}, the event canonical.
            let v: serde_json::Value =
                serde_json::from_str(&search_common::tame_numbers(line)).unwrap();
            let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
            assert_eq!(keys, ["event", "session"]); // serde_json sorts its map
            let id = v["session"].as_str().unwrap();
            let seq = v["event"]["seq"].as_u64().unwrap() as usize;
            let s = corpus.sessions.iter().find(|s| s.id == id).unwrap();
            assert!(line.ends_with(&format!(",\"event\":{}}}", s.lines[seq])));
        }
    }
}

#[test]
fn search_flags_forms_and_human_lines() {
    let (cli, corpus) = setup();
    let json = |args: &[&str]| {
        let mut a: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        a.push("--json".into());
        search(&cli, &a)
    };
    // --type repeated or comma-separated.
    assert_eq!(
        json(&["--type", "tool/call", "--type", "user/message"]),
        json(&["--type", "tool/call,user/message"])
    );
    // --since / --until: epoch ms or RFC 3339 (any offset), the same instant.
    let ms = json(&["--since", "1755000000000", "--until", "1755086400000"]);
    assert!(!ms.is_empty());
    assert_eq!(
        ms,
        json(&[
            "--since",
            "2025-08-12T12:00:00Z",
            "--until",
            "2025-08-13T14:00:00+02:00"
        ])
    );
    // --session takes a session directory too; a session named twice is searched once.
    let dir = corpus.store.session_dir("gen-1").unwrap();
    let once = json(&["--session", "gen-1", "--tool", "edit"]);
    assert!(!once.is_empty());
    assert_eq!(
        json(&["--session", dir.to_str().unwrap(), "--tool", "edit"]),
        once
    );
    let roundabout = cli.store().join("sessions/../sessions/gen-1");
    assert_eq!(
        json(&[
            "--session",
            roundabout.to_str().unwrap(),
            "--session",
            "gen-1",
            "--tool",
            "edit"
        ]),
        once
    );
    // Human lines: one per match, session id then seq.
    let q = RefQuery {
        tool: Some("read_file".into()),
        turn: Some(1),
        ..RefQuery::default()
    };
    let human = search(&cli, &q.to_args());
    let want = library_lines(&corpus, &q);
    assert_eq!(human.lines().count(), want.len());
    assert!(!want.is_empty());
    for (line, j) in human.lines().zip(&want) {
        let v: serde_json::Value = serde_json::from_str(&search_common::tame_numbers(j)).unwrap();
        let mut words = line.split_whitespace();
        assert_eq!(words.next(), v["session"].as_str());
        assert_eq!(
            words.next().map(str::to_owned),
            Some(v["event"]["seq"].to_string())
        );
        assert!(
            line.contains(v["event"]["type"].as_str().unwrap()),
            "{line}"
        );
        assert!(!line.contains('\x1b'), "no colors off a terminal: {line:?}");
    }
}

#[test]
fn stats_json_has_the_documented_shape() {
    let (cli, corpus) = setup();
    let members =
        |v: &Value| -> Vec<String> { v.as_object().unwrap().keys().map(str::to_owned).collect() };
    const TOP: [&str; 10] = [
        "events",
        "byType",
        "turns",
        "endReasons",
        "turnDurationMs",
        "steps",
        "tokens",
        "tools",
        "unansweredCalls",
        "bytes",
    ];
    let mut checked_tools = 0;
    for s in &corpus.sessions {
        let out = cli.run(&["stats", &s.id, "--json"]);
        let text = out.ok();
        assert_eq!(text.lines().count(), 1);
        // Exactly the library's numbers.
        let lib = corpus.store.open_reader(&s.id).unwrap().stats().unwrap();
        assert_eq!(text.trim_end(), lib.to_json().to_string());
        let v = parse_json(text.trim_end()).unwrap();
        assert_eq!(members(&v), TOP);
        assert_eq!(
            members(v.get("tokens").unwrap()),
            ["input", "output", "cacheRead", "cacheWrite", "reasoning"]
        );
        for (_, tool) in v.get("tools").unwrap().as_object().unwrap().iter() {
            assert_eq!(
                members(tool),
                ["calls", "errors", "failureRate", "latencyMs"]
            );
            assert_eq!(members(tool.get("latencyMs").unwrap()), ["median", "max"]);
            checked_tools += 1;
        }
    }
    assert!(checked_tools > 10);
    let all = cli.run(&["stats", "--all", "--json"]);
    let v = parse_json(all.ok().trim_end()).unwrap();
    let mut with_sessions: Vec<String> = TOP.iter().map(|s| s.to_string()).collect();
    with_sessions.push("sessions".into());
    assert_eq!(members(&v), with_sessions);
    assert_eq!(
        all.stdout.trim_end(),
        corpus.store.stats().unwrap().to_json().to_string()
    );
    assert_eq!(
        v.get("sessions").unwrap().as_u64(),
        Some(corpus.sessions.len() as u64)
    );
    // The human forms.
    let human = cli.run(&["stats", "ex-tools-and-approvals"]);
    for word in [
        "events", "turns", "duration", "tokens", "bytes", "bash", "MEDIAN",
    ] {
        assert!(human.ok().contains(word), "{word}: {}", human.stdout);
    }
    assert!(cli.run(&["stats", "--all"]).ok().starts_with("sessions "));
}

#[test]
fn exit_codes() {
    let (cli, _corpus) = setup();
    // Nothing matched is not a failure.
    let none = cli.run(&["search", "--text", "zz-never-there-zz"]);
    assert_eq!(none.ok(), "");
    assert_eq!(cli.run(&["search", "--limit", "0", "--json"]).ok(), "");
    // Errors: 1.
    let e = cli.run(&["search", "--session", "no-such"]);
    assert!(e.fails(1).contains("no-such"), "{}", e.stderr);
    // A deleted session named by --session is read, with a note (as `show` reads it).
    let e = cli.run(&["search", "--session", "gen-deleted"]);
    assert!(!e.ok().is_empty());
    assert!(e.stderr.contains("is deleted"), "{}", e.stderr);
    // Usage: 2.
    for args in [
        vec!["search", "--since", "yesterday"],
        vec!["search", "--until", "2025-13-40"],
        vec!["search", "--limit", "-1"],
        vec!["search", "--turn", "x"],
        vec!["search", "--nope"],
        vec!["stats"],
        vec!["stats", "gen-1", "--all"],
    ] {
        let run = cli.run(&args);
        run.fails(2);
    }
    // A store that does not exist: 1, for search and stats --all alike.
    let empty = Cli::new();
    assert!(empty.run(&["search"]).fails(1).contains("no store"));
    assert!(empty
        .run(&["stats", "--all", "--json"])
        .fails(1)
        .contains("no store"));
    // --help says that no match is exit 0.
    let help = cli.run(&["search", "--help"]);
    assert!(help.ok().contains("exit code is 0"), "{}", help.stdout);
}

/// `show --type` and `search --type` read the same forms: `tool`, `tool/*`, `*`, exact types,
/// and `error` (a type with no domain).
#[test]
fn show_and_search_take_the_same_type_forms() {
    let cli = Cli::new();
    let id = cli.import_example("tools-and-approvals", &[]);
    let lines = std::fs::read_to_string(example("tools-and-approvals.jsonl")).unwrap();
    let types: Vec<String> = lines
        .lines()
        // Canonical lines start with {"type":"…" (serde_json cannot read all of their numbers).
        .map(|l| l.split('"').nth(3).unwrap().to_string())
        .collect();
    for (form, expected) in [
        (
            "tool",
            types.iter().filter(|t| t.starts_with("tool/")).count(),
        ),
        (
            "tool/*",
            types.iter().filter(|t| t.starts_with("tool/")).count(),
        ),
        ("*", types.len()),
        (
            "tool/call",
            types.iter().filter(|t| *t == "tool/call").count(),
        ),
        (
            "approval",
            types.iter().filter(|t| t.starts_with("approval/")).count(),
        ),
    ] {
        assert!(expected > 0, "{form}: the example holds such events");
        let show = cli.run(&["show", &id, "--json", "--type", form]);
        assert_eq!(show.ok().lines().count(), expected, "show --type {form}");
        let search = cli.run(&["search", "--session", &id, "--json", "--type", form]);
        assert_eq!(
            search.ok().lines().count(),
            expected,
            "search --type {form}"
        );
    }
}

/// `search --session X` refused a deleted session, while `show`, `stats` and `export` read it
/// until `gc`. It is now read too, with a note on stderr; a store-wide search still leaves it
/// out.
#[test]
fn search_reads_a_deleted_session_it_is_named() {
    let cli = Cli::new();
    let id = cli.import_example("coding-session", &[]);
    cli.run(&["delete", &id]).ok();
    let named = cli.run(&["search", "--session", &id, "--type", "turn/start"]);
    let lines = named.ok().lines().count();
    assert_eq!(lines, 5, "{}", named.stdout);
    assert!(named.stderr.contains("is deleted"), "{}", named.stderr);
    let shown = cli.run(&["show", &id, "--type", "turn/start"]);
    assert_eq!(shown.ok().lines().count(), lines, "{}", shown.stdout);
    let all = cli.run(&["search", "--type", "turn/start"]);
    assert_eq!(all.stdout, "", "a store-wide search leaves it out");
}
