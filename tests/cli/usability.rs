//! The command line as a new user meets it (issue 15): starting a session, a store that is
//! missing or not a store, deleted sessions that must stay deleted, empty answers that explain
//! themselves, and the messages and `--json` outputs of the commands.

use crate::cli_common;

use agentlog::event::{parse_json, Value};
use cli_common::{Cli, BIN};

/// `agentlog --store STORE args…` (for a store other than the test's own): exit code, stdout,
/// stderr.
fn run_at(store: &str, args: &[&str]) -> Outcome {
    let out = std::process::Command::new(BIN)
        .arg("--store")
        .arg(store)
        .args(args)
        .env_remove("AGENTLOG_STORE")
        .output()
        .unwrap();
    Outcome {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

struct Outcome {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Outcome {
    #[track_caller]
    fn fails(&self, code: i32) -> &str {
        assert_eq!(self.code, code, "{}{}", self.stdout, self.stderr);
        assert!(!self.stderr.contains("panicked"), "{}", self.stderr);
        &self.stderr
    }
}

const TURN: &str = r#"{"type":"turn/start","data":{"turn":1}}"#;

/// `create` made no session before issue 15 (`append` to a new id failed): it must print the id
/// of a new empty session, take --id and --title, and refuse an id that exists.
#[test]
fn create_prints_the_id_of_an_empty_session() {
    let cli = Cli::new();
    let id = cli
        .run(&["create", "--title", "first"])
        .ok()
        .trim_end()
        .to_string();
    assert!(
        !id.is_empty() && !id.contains(char::is_whitespace),
        "{id:?}"
    );
    let named = cli.run(&["create", "--id", "mine", "--title", "second"]);
    assert_eq!(named.ok(), "mine\n");
    let ls = parse_json(cli.run(&["ls", "--json"]).ok()).unwrap();
    let items = ls.as_array().unwrap();
    assert_eq!(items.len(), 2);
    for item in items {
        assert_eq!(item.get("events"), Some(&Value::from(0u64)), "{item}");
    }
    let titles: Vec<String> = items
        .iter()
        .map(|i| i.get("title").unwrap().to_string())
        .collect();
    assert!(titles.contains(&"\"first\"".to_string()), "{titles:?}");

    let again = cli.run(&["create", "--id", "mine"]);
    let err = again.fails(1);
    assert!(err.contains("exists already"), "{err}");
    let bad = cli.run(&["create", "--id", "no/slash"]);
    assert!(bad.fails(1).contains("error:"), "{}", bad.stderr);

    // The new session takes appends at once.
    let acks = cli.run_with(&["append", "mine", "--ack"], format!("{TURN}\n").as_bytes());
    assert_eq!(acks.ok(), "0\n");
}

/// `append --create` creates the session when the store holds none of that id (and the store
/// when missing), and appends to it as it is when it exists.
#[test]
fn append_create_makes_the_session_when_missing() {
    let cli = Cli::new();
    let plain = cli.run_with(&["append", "s1", "--ack"], format!("{TURN}\n").as_bytes());
    assert!(plain.fails(1).contains("no session"), "{}", plain.stderr);

    let made = cli.run_with(
        &["append", "s1", "--create", "--ack"],
        format!("{TURN}\n").as_bytes(),
    );
    assert_eq!(made.ok(), "0\n");
    let end = r#"{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}"#;
    let more = cli.run_with(
        &["append", "s1", "--create", "--ack"],
        format!("{end}\n").as_bytes(),
    );
    assert_eq!(
        more.ok(),
        "1\n",
        "the existing session is appended to, not replaced"
    );
    let shown = cli.run(&["export", "s1"]);
    assert_eq!(shown.ok().lines().count(), 2, "{}", shown.stdout);

    let path = cli.run_with(&["append", "./x/y", "--create"], b"");
    assert!(
        path.fails(1).contains("an id of the store"),
        "{}",
        path.stderr
    );
}

/// `--store /nonexistent ls` printed an empty table with exit 0, and `--store /etc/passwd ls`
/// too: a typo looked like an empty store. Both are errors for every reading command; a path
/// that is a file is an error for writing commands too.
#[test]
fn a_missing_store_or_a_file_is_an_error() {
    let cli = Cli::new();
    let missing = cli.dir.path().join("nope");
    let missing = missing.to_str().unwrap();
    for args in [
        vec!["ls"],
        vec!["ls", "--json"],
        vec!["search", "--text", "x"],
        vec!["stats", "--all"],
        vec!["verify", "--all"],
        vec!["gc"],
    ] {
        let run = run_at(missing, &args);
        let err = run.fails(1);
        assert!(err.contains("no store at"), "{args:?}: {err}");
        assert!(run.stdout.is_empty(), "{args:?}: {}", run.stdout);
    }
    assert!(
        !std::path::Path::new(missing).exists(),
        "reading never creates a store"
    );

    let file = cli.dir.path().join("file");
    std::fs::write(&file, "not a store\n").unwrap();
    let file = file.to_str().unwrap();
    let below = format!("{file}/x");
    for store in [file, below.as_str()] {
        for args in [
            vec!["ls"],
            vec!["create"],
            vec!["show", "a"],
            vec!["stats", "--all"],
        ] {
            let run = run_at(store, &args);
            let err = run.fails(1);
            assert!(err.contains("is not a store directory"), "{args:?}: {err}");
        }
    }
    // A store that exists and is empty is still an empty table.
    cli.run(&["create", "--id", "a"]).ok();
    cli.run(&["delete", "a"]).ok();
    assert_eq!(cli.run(&["ls", "--json"]).ok(), "[]\n");
}

/// Sets the modification time of session `id`'s segment and index files `days` days back (what
/// an append that long ago leaves).
fn age_log_files(cli: &Cli, id: &str, days: u64) {
    let then = std::time::SystemTime::now() - std::time::Duration::from_secs(days * 86_400);
    for entry in std::fs::read_dir(cli.session_dir(id)).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "seg" || e == "idx") {
            let f = std::fs::File::options().write(true).open(&path).unwrap();
            f.set_modified(then).unwrap();
        }
    }
}

/// `delete X` then `archive X` printed "archived" and made the session archived again, so `gc`
/// no longer removed it. Archiving a deleted session is refused with what to do; it stays
/// deleted and gc removes it.
#[test]
fn archive_does_not_resurrect_a_deleted_session() {
    let cli = Cli::new();
    cli.run(&["create", "--id", "x"]).ok();
    assert_eq!(cli.run(&["delete", "x"]).ok(), "deleted x\n");
    let run = cli.run(&["archive", "x"]);
    let err = run.fails(1);
    assert!(
        err.contains("is deleted") && err.contains("unarchive x"),
        "{err}"
    );
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    let all = parse_json(cli.run(&["ls", "--json", "--all"]).ok()).unwrap();
    assert_eq!(
        all.as_array().unwrap()[0].get("state"),
        Some(&Value::from("deleted"))
    );
    assert_eq!(cli.run(&["gc"]).ok(), "removed x\n");
    assert!(!cli.session_dir("x").exists());
}

/// `archive --idle-days N` judged idleness by the events' times, so it archived sessions just
/// imported with 2025 events; it judges by the last append now, and `--dry-run` only says what
/// it would archive.
#[test]
fn archive_idle_judges_by_the_last_append_and_has_a_dry_run() {
    let cli = Cli::new();
    let old_events = cli.import_example("fix-typo", &["--id", "imported"]);
    cli.run(&["create", "--id", "fresh"]).ok();
    assert_eq!(cli.run(&["archive", "--idle-days", "30"]).ok(), "");

    age_log_files(&cli, &old_events, 40);
    age_log_files(&cli, "fresh", 10);
    assert_eq!(
        cli.run(&["archive", "--idle-days", "30", "--dry-run"]).ok(),
        "would archive imported\n"
    );
    let states = cli.run(&["ls", "--json"]).ok().to_string();
    assert!(
        !states.contains("archived"),
        "dry run changed nothing: {states}"
    );
    assert_eq!(
        cli.run(&["archive", "--idle-days", "30"]).ok(),
        "archived imported\n"
    );
    // An append makes a session active again in the sense of idleness.
    age_log_files(&cli, "fresh", 40);
    cli.run_with(&["append", "fresh"], format!("{TURN}\n").as_bytes())
        .ok();
    assert_eq!(
        cli.run(&["archive", "--idle-days", "30", "--dry-run"]).ok(),
        ""
    );
    // --dry-run needs --idle-days.
    cli.run(&["archive", "fresh", "--dry-run"]).fails(2);
}

/// Empty answers were silent (exit 0, nothing on stderr), as if the session were empty: `show`
/// names why (a type no event has, with the session's types and the contract's; a turn past
/// the last; `--from` after `--to`; `--from` past the end) and `search` a `--since` after its
/// `--until`.
#[test]
fn empty_answers_explain_themselves() {
    let cli = Cli::new();
    let id = cli.import_example("coding-session", &[]);
    let note = |args: &[&str]| {
        let run = cli.run(args);
        assert_eq!(run.ok(), "", "{args:?}");
        run.stderr.clone()
    };
    let bogus = note(&["show", &id, "--type", "bogus"]);
    assert!(bogus.contains("no event of type bogus"), "{bogus}");
    assert!(
        bogus.contains("tool/call") && bogus.contains("sandbox/event"),
        "{bogus}"
    );
    let turn = note(&["show", &id, "--turn", "99"]);
    assert!(
        turn.contains("no turn 99") && turn.contains("1 to 5"),
        "{turn}"
    );
    let range = note(&["show", &id, "--from", "50", "--to", "40"]);
    assert!(range.contains("--from 50 is after --to 40"), "{range}");
    let past = note(&["show", &id, "--from", "500", "--json"]);
    assert!(past.contains("past the last event (seq 106)"), "{past}");
    let since = note(&["search", "--since", "2025-08-13", "--until", "2025-08-12"]);
    assert!(
        since.contains("--since") && since.contains("not before --until"),
        "{since}"
    );
    // An answer with events says nothing.
    let shown = cli.run(&["show", &id, "--turn", "1", "--type", "turn"]);
    assert_eq!(shown.ok().lines().count(), 2, "{}", shown.stdout);
    assert_eq!(shown.stderr, "");
}

/// `NO_COLOR=` (empty) turned colors off; no-color.org says only a non-empty value does. On a
/// pseudo-terminal (util-linux `script`) `show` stays colored with it and is plain with `1`.
#[test]
fn an_empty_no_color_keeps_colors() {
    let cli = Cli::new();
    cli.import_example("fix-typo", &["--id", "t"]);
    let line = format!("{} --store {} show t", BIN, cli.store().display());
    let on_tty = |no_color: &str| {
        let out = std::process::Command::new("script")
            .args(["-qec", &line, "/dev/null"])
            .env("NO_COLOR", no_color)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("util-linux `script` runs a command on a pseudo-terminal");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let colored = on_tty("");
    assert!(colored.contains("\x1b[35mturn/start"), "{colored:?}");
    let plain = on_tty("1");
    assert!(
        plain.contains("turn/start") && !plain.contains('\x1b'),
        "{plain:?}"
    );
}

/// The usage errors of `stats` and `verify` said only `<SESSION>` is required, hiding `--all`.
#[test]
fn stats_and_verify_usage_errors_mention_all() {
    let cli = Cli::new();
    for cmd in ["stats", "verify"] {
        let err = cli.run(&[cmd]).fails(2).to_string();
        assert!(err.contains("<SESSION|--all>"), "{cmd}: {err}");
        let both = cli.run(&[cmd, "x", "--all"]).fails(2).to_string();
        assert!(both.contains("--all"), "{cmd}: {both}");
    }
}

/// Refusals said "nothing was written; nothing was appended", the size error did not say where
/// the limit is set, and a header line piped to `append`, a second header line in an import and
/// an import without seqs got parse errors ("missing member data" / "seq") that did not say what
/// the line is or what to do.
#[test]
fn refusals_say_what_the_line_is_and_what_to_do() {
    let cli = Cli::new();
    cli.run(&["create", "--id", "s"]).ok();
    cli.configure("max_event_size = \"1KiB\"\n");
    let big = format!(
        r#"{{"type":"user/message","data":{{"role":"user","content":[{{"type":"text","text":"{}"}}]}}}}"#,
        "x".repeat(2000)
    );
    let err = cli
        .run_with(&["append", "s"], format!("{big}\n").as_bytes())
        .fails(1)
        .to_string();
    assert!(
        err.contains("max_event_size") && err.contains("agentlog.toml"),
        "{err}"
    );
    assert_eq!(err.matches("nothing was").count(), 1, "{err}");

    let example = std::fs::read_to_string(cli_common::example("fix-typo.jsonl")).unwrap();
    let header = r#"{"type":"session","version":1,"id":"h","createdAt":1755000000000}"#;
    let err = cli
        .run_with(&["append", "s"], format!("{header}\n").as_bytes())
        .fails(1)
        .to_string();
    assert!(
        err.contains("session header line") && err.contains("import"),
        "{err}"
    );
    assert_eq!(err.matches("nothing was").count(), 1, "{err}");

    let two_headers = format!("{header}\n{}{header}\n", example);
    let err = cli
        .run_with(&["import", "-"], two_headers.as_bytes())
        .fails(1)
        .to_string();
    let second = example.lines().count() + 2;
    assert!(
        err.contains(&format!("line {second} is a second session header line")),
        "{err}"
    );

    let draft = format!("{TURN}\n");
    let err = cli
        .run_with(&["import", "-"], draft.as_bytes())
        .fails(1)
        .to_string();
    assert!(
        err.contains("line 1 has no seq") && err.contains("append --create"),
        "{err}"
    );
    assert_eq!(cli.session_entries(), ["s"], "nothing was written");
}

/// Runs `args` (which include `--json`), asserts success and one JSON line, and parses it.
fn json_of(cli: &Cli, args: &[&str]) -> Value {
    let run = cli.run(args);
    let text = run.ok();
    assert_eq!(text.lines().count(), 1, "{args:?}: {text}");
    parse_json(text.trim_end()).unwrap()
}

/// The member names of a JSON object, in order.
fn keys(v: &Value) -> Vec<String> {
    v.as_object().unwrap().keys().map(str::to_owned).collect()
}

/// `verify`, `recover`, `close`, `fork`, `import`, `gc`, `archive`, `unarchive` and `delete`
/// had no `--json`; `stats --json` lacked the turn durations its text shows and `ls --json`
/// the fork point (`seedLength`). Each prints one JSON line with the documented members.
#[test]
fn every_reporting_command_has_json() {
    let cli = Cli::new();
    let path = cli_common::example("coding-session.jsonl");
    let import = json_of(&cli, &["import", path.to_str().unwrap(), "--json"]);
    assert_eq!(keys(&import), ["id", "events", "hadHeader"]);
    assert_eq!(import.get("events"), Some(&Value::from(107u64)));
    assert_eq!(import.get("hadHeader"), Some(&Value::from(true)));
    let id = import.get("id").unwrap().as_str().unwrap().to_string();

    let verify = json_of(&cli, &["verify", &id, "--json"]);
    assert_eq!(
        keys(&verify),
        ["session", "ok", "events", "segments", "problems", "notes"]
    );
    assert_eq!(verify.get("ok"), Some(&Value::from(true)));
    assert_eq!(verify.get("events"), Some(&Value::from(107u64)));

    let fork = json_of(&cli, &["fork", &id, "--turn", "1", "--id", "f", "--json"]);
    assert_eq!(keys(&fork), ["id", "parentSession", "seedLength"]);
    assert_eq!(fork.get("parentSession"), Some(&Value::from(id.as_str())));
    let seed = fork.get("seedLength").unwrap().clone();
    let ls = json_of(&cli, &["ls", "--json"]);
    let forked = ls
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s.get("id") == Some(&Value::from("f")))
        .unwrap()
        .clone();
    assert_eq!(forked.get("seedLength"), Some(&seed));

    let stats = json_of(&cli, &["stats", &id, "--json"]);
    let durations = stats.get("turnDurationMs").unwrap();
    assert_eq!(keys(durations), ["median", "max"]);
    assert!(
        durations.get("max").unwrap().as_u64().unwrap() > 0,
        "{durations}"
    );

    // A turn left open, closed by `close`.
    let open = format!("{TURN}\n");
    cli.run_with(&["append", "o", "--create"], open.as_bytes())
        .ok();
    let close = json_of(&cli, &["close", "o", "--json"]);
    assert_eq!(keys(&close), ["session", "appended", "state"]);
    let appended = close.get("appended").unwrap().as_array().unwrap();
    assert_eq!(appended.len(), 1, "{close}");
    assert_eq!(appended[0].get("type"), Some(&Value::from("turn/end")));
    assert_eq!(close.get("state"), Some(&Value::from("idle")));

    let recover = json_of(&cli, &["recover", "o", "--json"]);
    assert_eq!(
        keys(&recover),
        [
            "session",
            "metaRebuilt",
            "events",
            "state",
            "cut",
            "salvaged",
            "indexesRebuilt",
            "removed",
            "openTurn",
            "violations"
        ]
    );
    assert_eq!(recover.get("cut"), Some(&Value::Null));
    assert_eq!(recover.get("events"), Some(&Value::from(2u64)));

    let archived = json_of(&cli, &["archive", "o", "--json"]);
    assert_eq!(archived.to_string(), r#"{"archived":["o"]}"#);
    let active = json_of(&cli, &["unarchive", "o", "--json"]);
    assert_eq!(active.to_string(), r#"{"active":["o"]}"#);
    let dry = json_of(
        &cli,
        &["archive", "--idle-days", "1", "--dry-run", "--json"],
    );
    assert_eq!(dry.to_string(), r#"{"wouldArchive":[]}"#);
    let deleted = json_of(&cli, &["delete", "o", "f", "--json"]);
    assert_eq!(deleted.to_string(), r#"{"deleted":["o","f"]}"#);
    let gc = json_of(&cli, &["gc", "--json"]);
    assert_eq!(gc.to_string(), r#"{"removed":["f","o"]}"#);
}

/// `replay --run` waited for ever on a hung tool, and a command that could not start (sh: not
/// found) was reported as a divergence with empty content. A call past `--timeout` is killed
/// and reported as timed out; a command that cannot run stops the replay with exit 2.
#[test]
fn replay_run_times_out_and_refuses_a_command_that_cannot_run() {
    let cli = Cli::new();
    cli.import_example("fix-typo", &["--id", "t"]);
    let hung = cli.run(&["replay", "t", "--run", "sleep 600", "--timeout", "0.3"]);
    assert_eq!(hung.code, 1, "{}{}", hung.stdout, hung.stderr);
    assert!(hung.stdout.contains("timed out"), "{}", hung.stdout);
    let json = cli.run(&[
        "replay",
        "t",
        "--run",
        "sleep 600",
        "--timeout",
        "0.3",
        "--json",
    ]);
    assert!(json.stdout.contains("timed out"), "{}", json.stdout);

    let missing = cli.run(&["replay", "t", "--run", "/nonexistent/agentlog-tool"]);
    let err = missing.fails(2);
    assert!(err.contains("cannot run"), "{err}");
    assert!(missing.stdout.is_empty(), "{}", missing.stdout);

    // A command that runs is compared as before.
    let same = cli.run(&["replay", "t", "--run", "cat >/dev/null; echo example"]);
    assert!(same.ok().contains("= same result"), "{}", same.stdout);
    cli.run(&["replay", "t", "--timeout", "5"]).fails(2);
}

/// `search` printed the session id unpadded, so rows of ids of different lengths were not
/// aligned: every row's seq column starts at the same place.
#[test]
fn search_columns_stay_aligned_whatever_the_id_length() {
    let cli = Cli::new();
    cli.import_example("fix-typo", &["--id", "t"]);
    cli.import_example("fix-typo", &["--id", "a-much-longer-session-id"]);
    let out = cli.run(&["search", "--type", "turn/start,tool/call"]);
    let rows: Vec<&str> = out.ok().lines().collect();
    assert_eq!(rows.len(), 4, "{}", out.stdout);
    let type_at: Vec<usize> = rows
        .iter()
        .map(|r| {
            r.find("turn/start")
                .or_else(|| r.find("tool/call"))
                .unwrap()
        })
        .collect();
    assert!(type_at.iter().all(|&c| c == type_at[0]), "{rows:#?}");
    // With --session the same.
    let out = cli.run(&[
        "search",
        "--type",
        "turn/start",
        "--session",
        "t",
        "--session",
        "a-much-longer-session-id",
    ]);
    let starts: Vec<usize> = out
        .ok()
        .lines()
        .map(|r| r.find("turn/start").unwrap())
        .collect();
    assert_eq!(starts.len(), 2);
    assert_eq!(starts[0], starts[1], "{}", out.stdout);
}

/// `tail -f` on a session that was deleted went on polling for ever, silently: it ends with a
/// note (exit 0).
#[test]
fn tail_follow_ends_when_its_session_is_deleted() {
    let cli = Cli::new();
    cli.run(&["create", "--id", "s"]).ok();
    let child = cli.command(&["tail", "-f", "s"]).spawn().unwrap();
    // Whenever tail looks, before or after the delete, it must end.
    cli.run(&["delete", "s"]).ok();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("session s was deleted"), "{stderr}");
}

/// The files a doc reference may sit in: the README and the text files of the crate, the Python
/// package, the docs, the tests, the benchmarks, the examples and the fuzz targets (not build
/// output, fuzz corpora or hidden folders).
fn doc_reference_sources(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                let skip = [
                    "target",
                    "corpus",
                    "artifacts",
                    "node_modules",
                    "__pycache__",
                ];
                if !name.starts_with('.') && !skip.contains(&name.as_str()) {
                    walk(&path, out);
                }
            } else if ["rs", "md", "py", "pyi", "toml", "sh"]
                .iter()
                .any(|ext| path.extension().is_some_and(|e| e == *ext))
            {
                out.push(path);
            }
        }
    }
    let mut files = vec![root.join("README.md")];
    for dir in [
        "src", "python", "docs", "tests", "benches", "examples", "fuzz",
    ] {
        walk(&root.join(dir), &mut files);
    }
    files.sort();
    files
}

/// The numbers of a Markdown file's numbered sections: `## 5. The projection` is section 5.
fn numbered_sections(text: &str) -> Vec<u32> {
    text.lines()
        .filter(|l| l.starts_with('#'))
        .filter_map(|l| {
            let title = l.trim_start_matches('#').trim_start();
            let digits: String = title.chars().take_while(char::is_ascii_digit).collect();
            title[digits.len()..]
                .starts_with('.')
                .then(|| digits.parse().ok())
                .flatten()
        })
        .collect()
}

/// The section numbers of a `§N` or `§N–M` at the start of `text`, if it starts with one.
fn section_cite(text: &str) -> Option<Vec<u32>> {
    let rest = text.strip_prefix('§')?;
    let first: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let mut numbers = vec![first.parse().ok()?];
    let rest = &rest[first.len()..];
    if let Some(range) = rest.strip_prefix('–').or_else(|| rest.strip_prefix('-')) {
        let last: String = range.chars().take_while(char::is_ascii_digit).collect();
        numbers.extend(last.parse::<u32>().ok());
    }
    Some(numbers)
}

/// Every `docs/<name>.md` cited in the code, doc comments, `--help` texts, the README, the docs,
/// the Python package and the tests names a file of `docs/` that exists, and a `§N` (or
/// `§N–M`) right after it names a numbered section (`## N. …`) of that file. The bare `§N` of
/// `docs/events.md` name its own sections, relative Markdown links point to files that exist,
/// and nothing cites the upper-case spec files that were never in the repository.
#[test]
fn doc_references_point_to_files_and_sections_that_exist() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let stale = [["EVENTS", ".md"].concat(), ["DESIGN", ".md"].concat()];
    let mut problems = Vec::new();
    let (mut cited, mut sections_cited) = (0, 0);
    let mut check_sections = |at: &str, doc: &str, cite: &[u32], problems: &mut Vec<String>| {
        let sections = std::fs::read_to_string(root.join(doc))
            .map(|t| numbered_sections(&t))
            .unwrap_or_default();
        for n in cite {
            sections_cited += 1;
            if !sections.contains(n) {
                problems.push(format!(
                    "{at}: {doc} has no section {n} (no heading `## {n}. …`)"
                ));
            }
        }
    };
    for file in doc_reference_sources(root) {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue; // not UTF-8 text
        };
        let rel = file
            .strip_prefix(root)
            .unwrap_or(&file)
            .display()
            .to_string();
        for (i, line) in text.lines().enumerate() {
            let at = format!("{rel}:{}", i + 1);
            for name in &stale {
                let mut rest = line;
                while let Some(j) = rest.find(name.as_str()) {
                    if !rest[..j].ends_with("docs/") {
                        problems.push(format!(
                            "{at}: cites {name}, which is not in the repository"
                        ));
                    }
                    rest = &rest[j + name.len()..];
                }
            }
            // `docs/<name>.md`, and a `§N` after it.
            let mut rest = line;
            while let Some(j) = rest.find("docs/") {
                rest = &rest[j + "docs/".len()..];
                let name_len = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
                    .unwrap_or(rest.len());
                let Some(after) = rest[name_len..].strip_prefix(".md") else {
                    continue;
                };
                if name_len == 0 {
                    continue;
                }
                cited += 1;
                let doc = format!("docs/{}.md", &rest[..name_len]);
                if !root.join(&doc).is_file() {
                    problems.push(format!("{at}: cites {doc}, which does not exist"));
                    continue;
                }
                if let Some(cite) = section_cite(after.trim_start()) {
                    check_sections(&at, &doc, &cite, &mut problems);
                }
            }
            // `docs/events.md` cites its own sections as a bare `§N`.
            if rel == "docs/events.md" {
                for (j, _) in line.match_indices('§') {
                    if let Some(cite) = section_cite(&line[j..]) {
                        check_sections(&at, "docs/events.md", &cite, &mut problems);
                    }
                }
            }
            // Relative Markdown links, from the file's own folder.
            if rel.ends_with(".md") {
                for (j, _) in line.match_indices("](") {
                    let target = &line[j + 2..];
                    let target = &target[..target.find(')').unwrap_or(target.len())];
                    let path = target.split('#').next().unwrap_or_default();
                    if path.ends_with(".md") && !path.contains("://") {
                        let dir = file.parent().unwrap_or(root);
                        if !dir.join(path).is_file() {
                            problems.push(format!("{at}: links to {target}, which does not exist"));
                        }
                    }
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "dangling doc references:\n{}",
        problems.join("\n")
    );
    // The references are there to be checked: the code cites the docs' sections throughout.
    assert!(cited >= 50, "only {cited} docs/*.md references found");
    assert!(
        sections_cited >= 30,
        "only {sections_cited} § references found"
    );
}

/// `status` named only the kind of the last turn's end: a turn that failed said "ended:
/// error", and what the error was took `export` or `show` to find. The text form now adds its
/// code and message.
#[test]
fn status_names_the_error_a_turn_ended_with() {
    let cli = Cli::new();
    let lines = [
        r#"{"type":"turn/start","data":{"turn":1}}"#,
        r#"{"type":"user/message","data":{"role":"user","content":[{"type":"text","text":"hi"}]}}"#,
        r#"{"type":"turn/end","data":{"turn":1,"reason":{"kind":"error","error":{"code":"PROVIDER_5XX","message":"upstream timed out"}}}}"#,
    ];
    cli.run_with(&["append", "--create", "e"], lines.join("\n").as_bytes())
        .ok();
    let out = cli.run(&["status", "e"]);
    assert!(
        out.ok()
            .contains("(turn 1 ended: error: PROVIDER_5XX: upstream timed out)"),
        "{}",
        out.stdout
    );
}
