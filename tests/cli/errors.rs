//! Errors and exit codes: refused imports write nothing, usage errors exit 2, every other
//! failure exits 1 with `error: …` saying what to do; no panics, no escape codes when piped.

use crate::cli_common;

use agentlog::store::Store;
use cli_common::{example, flip, segments, Cli};

fn fix_typo_lines() -> Vec<String> {
    std::fs::read_to_string(example("fix-typo.jsonl"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn jsonl(lines: &[String]) -> Vec<u8> {
    lines
        .iter()
        .map(|l| format!("{l}\n"))
        .collect::<String>()
        .into_bytes()
}

#[test]
fn refused_imports_leave_nothing_behind() {
    let cli = Cli::new();
    cli.import_example("coding-session", &[]);
    let listed = cli.run(&["ls", "--json"]).ok().to_string();
    let entries = cli.session_entries();
    let good = fix_typo_lines();

    // A lifecycle violation on line 6: a second turn/start while turn 1 is open.
    let mut lifecycle = good.clone();
    lifecycle[5] = r#"{"type":"turn/start","seq":5,"time":1755000000050,"data":{"turn":2}}"#.into();
    // A syntax error on line 3.
    let mut syntax = good.clone();
    syntax[2] = syntax[2].replacen(',', ";", 1);
    // A seq gap on line 4.
    let mut gap = good.clone();
    gap[3] = gap[3].replace(r#""seq":3"#, r#""seq":4"#);
    // A blank line (line 5).
    let mut blank = good.clone();
    blank.insert(4, String::new());

    for (what, lines, line) in [
        ("lifecycle", lifecycle, 6),
        ("syntax", syntax, 3),
        ("seq gap", gap, 4),
        ("blank line", blank, 5),
    ] {
        let path = cli.dir.path().join("bad.jsonl");
        std::fs::write(&path, jsonl(&lines)).unwrap();
        let run = cli.run(&["import", path.to_str().unwrap(), "--id", "bad"]);
        let err = run.fails(1);
        assert!(err.starts_with("error: "), "{what}: {err}");
        assert!(err.contains(&format!("line {line}")), "{what}: {err}");
        assert!(err.contains("nothing was written"), "{what}: {err}");
        assert_eq!(run.stdout, "", "{what}");
        assert_eq!(cli.run(&["ls", "--json"]).ok(), listed, "{what}");
        assert_eq!(cli.session_entries(), entries, "{what}: leftovers");
    }

    // The syntax error names its column too.
    let mut syntax = good.clone();
    syntax[2] = syntax[2].replacen(',', ";", 1);
    let run = cli.run_with(&["import", "-"], &jsonl(&syntax));
    assert!(run.fails(1).contains("line 3, column "), "{}", run.stderr);
    assert_eq!(cli.session_entries(), entries);

    // An id that exists is refused, and the session is left as it was.
    let run = cli.run(&["import", example("coding-session.jsonl").to_str().unwrap()]);
    let err = run.fails(1);
    assert!(err.contains("exists already"), "{err}");
    assert!(err.contains("--id"), "{err}");
    assert_eq!(cli.run(&["ls", "--json"]).ok(), listed);
}

#[test]
fn usage_errors_exit_2() {
    let cli = Cli::new();
    for args in [
        vec![],
        vec!["frobnicate"],
        vec!["show"],
        vec!["export"],
        vec!["derive", "x", "--format", "xml"],
        vec!["tail", "x", "-n", "many"],
        vec!["verify"],
        vec!["verify", "x", "--all"],
        vec!["ls", "--bogus"],
        // Values agentlog checked itself exited 1; clap checks them now, as it does the others.
        vec!["export", "x", "--to", "xml"],
        vec!["import", "--from", "xml", "x.jsonl"],
        vec!["purge", "x", "--seq", "abc"],
        vec!["purge", "x", "--seq", "5..2"],
        // No worker at all was accepted (and then clamped to one).
        vec!["import", "--from", "auto", "--jobs", "0", "x.jsonl"],
        vec![
            "ship",
            "--nats",
            "nats://127.0.0.1:9",
            "--all",
            "--replicas",
            "0",
        ],
        vec![
            "ship",
            "--nats",
            "nats://127.0.0.1:9",
            "--all",
            "--replicas",
            "6",
        ],
    ] {
        let run = cli.run(&args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(!run.stderr.is_empty(), "{args:?}");
        assert!(!run.stderr.contains("panicked"), "{args:?}");
    }
    // An id may start with '-' (it was taken for an option).
    assert_eq!(cli.run(&["create", "--id", "-x"]).ok().trim(), "-x");
    // Help is not an error.
    assert!(cli.run(&["--help"]).ok().contains("Exit codes"));
    assert!(cli
        .run(&["append", "--help"])
        .ok()
        .contains("stay appended"));
}

#[test]
fn unknown_sessions_bad_ids_and_missing_files_are_clear_errors() {
    let cli = Cli::new();
    cli.import_example("fix-typo", &["--id", "typo"]);
    for cmd in [
        "show", "export", "status", "derive", "verify", "tail", "stats",
    ] {
        let run = cli.run(&[cmd, "nope"]);
        let err = run.fails(1);
        assert!(
            err.starts_with("error: no session \"nope\" in store "),
            "{cmd}: {err}"
        );
        assert!(err.contains("agentlog ls"), "{cmd}: {err}");
    }
    let run = cli.run(&["append", "nope"]);
    assert!(run.fails(1).contains("no session \"nope\""));

    // An invalid id is never a path.
    let run = cli.run(&[
        "import",
        example("fix-typo.jsonl").to_str().unwrap(),
        "--id",
        "../x",
    ]);
    let err = run.fails(1);
    assert!(err.contains("invalid session id \"../x\""), "{err}");
    assert!(!cli.store().join("x").exists());
    let run = cli.run(&["show", "bad id!"]);
    assert!(
        run.fails(1).contains("invalid session id"),
        "{}",
        run.stderr
    );
    // A SESSION with a slash is a path, and ../x is no session directory.
    let run = cli.run(&["show", "../x"]);
    let err = run.fails(1);
    assert!(err.contains("no session at \"../x\""), "{err}");
    assert!(err.contains("session directory"), "{err}");

    // A session directory given by path works like its id.
    let dir = cli.session_dir("typo");
    let by_path = cli.run(&["status", dir.to_str().unwrap(), "--json"]);
    assert_eq!(by_path.ok(), cli.run(&["status", "typo", "--json"]).ok());

    // A source file is imported by its path: `--from` does not read standard input (it said
    // "read -: No such file or directory").
    let run = cli.run_with(&["import", "--from", "auto", "-"], b"{}\n");
    let err = run.fails(1);
    assert!(err.contains("not standard input"), "{err}");

    // Missing files.
    let run = cli.run(&["import", "/nonexistent/file.jsonl"]);
    let err = run.fails(1);
    assert!(err.contains("cannot read /nonexistent/file.jsonl"), "{err}");
    let out = cli.dir.path().join("no-such-dir").join("out.jsonl");
    let run = cli.run(&["export", "typo", "-o", out.to_str().unwrap()]);
    assert!(
        run.fails(1).contains("nothing was written"),
        "{}",
        run.stderr
    );
    assert!(!out.parent().unwrap().exists());

    // An unknown store is an error (a typo must not look like an empty store) and is not
    // created by reading.
    let other = cli.dir.path().join("other");
    let run = cli
        .command(&["ls", "--json"])
        .arg("--store")
        .arg(&other)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(1));
    assert!(run.stdout.is_empty());
    assert!(String::from_utf8_lossy(&run.stderr).contains("no store at"));
    // Commands on one session say so too (they said "no session … in store").
    for cmd in ["show", "status", "derive", "export"] {
        let run = cli
            .command(&[cmd, "typo"])
            .arg("--store")
            .arg(&other)
            .output()
            .unwrap();
        assert_eq!(run.status.code(), Some(1), "{cmd}");
        let err = String::from_utf8_lossy(&run.stderr);
        assert!(err.contains("no store at"), "{cmd}: {err}");
    }
    assert!(!other.exists());
}

#[test]
fn the_store_comes_from_the_environment_by_default() {
    let cli = Cli::new();
    cli.import_example("fix-typo", &["--id", "typo"]);
    let out = std::process::Command::new(cli_common::BIN)
        .args(["status", "typo", "--json"])
        .env("AGENTLOG_STORE", cli.store())
        .current_dir(cli.dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Without it, ./.agentlog (which has no such session).
    let out = std::process::Command::new(cli_common::BIN)
        .args(["status", "typo"])
        .env_remove("AGENTLOG_STORE")
        .current_dir(cli.dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("./.agentlog"));
}

#[test]
fn a_locked_session_names_the_lock_and_its_holder() {
    let cli = Cli::new();
    cli.import_example("fix-typo", &["--id", "typo"]);
    let store = Store::open(cli.store()).unwrap();
    let writer = store.open_session("typo").unwrap();
    let run = cli.run_with(&["append", "typo"], b"{\"type\":\"x/y\",\"data\":{}}\n");
    let err = run.fails(1);
    assert!(err.contains("LOCK"), "{err}");
    assert!(
        err.contains(&format!("pid {}", std::process::id())),
        "{err}"
    );
    assert!(err.contains("stop the other writer"), "{err}");
    let run = cli.run(&["recover", "typo"]);
    assert!(run.fails(1).contains("stop the other writer"));
    // Reading works while it writes.
    cli.run(&["show", "typo"]).ok();
    drop(writer);
    // The lock goes with the last descriptor of its file: a child that another test of this
    // binary spawns at this moment holds a copy until it execs. Then it is free.
    let mut run = cli.run_with(&["append", "typo"], b"{\"type\":\"x/y\",\"data\":{}}\n");
    for _ in 0..100 {
        if run.code == 0 || !run.stderr.contains("open for writing by another process") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        run = cli.run_with(&["append", "typo"], b"{\"type\":\"x/y\",\"data\":{}}\n");
    }
    run.ok();
}

#[test]
fn piped_output_has_no_escape_codes() {
    let cli = Cli::new();
    cli.import_example("tools-and-approvals", &["--id", "t"]);
    for args in [
        vec!["show", "t"],
        vec!["tail", "t"],
        vec!["ls"],
        vec!["status", "t"],
        vec!["verify", "t"],
        vec!["stats", "t"],
    ] {
        for no_color in [false, true] {
            let mut c = cli.command(&args);
            if no_color {
                c.env("NO_COLOR", "1");
            }
            let out = c.output().unwrap();
            assert!(out.status.success(), "{args:?}");
            assert!(!out.stdout.is_empty(), "{args:?}");
            assert!(!out.stdout.contains(&0x1b), "{args:?}");
            assert!(!out.stderr.contains(&0x1b), "{args:?}");
        }
    }
}

#[test]
fn a_closed_stdout_is_not_a_failure() {
    let cli = Cli::new();
    cli.import_example("tools-and-approvals", &["--id", "t"]);
    for args in [
        vec!["show", "t"],
        vec!["export", "t"],
        vec!["derive", "t"],
        vec!["status", "t"],
        vec!["ls"],
        vec!["stats", "t"],
        vec!["verify", "t"],
    ] {
        let mut child = cli.command(&args).spawn().unwrap();
        // The reader goes away before the command writes (`agentlog show t | head -0`).
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

/// On a terminal (a pseudo-terminal from util-linux `script`) `show` is colored, and `NO_COLOR`
/// (a non-empty value; cli_usability checks that an empty one does not) turns the colors off.
#[test]
fn colors_only_on_a_terminal_and_never_with_no_color() {
    let cli = Cli::new();
    cli.import_example("fix-typo", &["--id", "t"]);
    let line = format!(
        "{} --store {} show t",
        cli_common::BIN,
        cli.store().display()
    );
    let on_tty = |no_color: Option<&str>| {
        let mut c = std::process::Command::new("script");
        c.args(["-qec", &line, "/dev/null"])
            .env_remove("NO_COLOR")
            .stdin(std::process::Stdio::null());
        if let Some(v) = no_color {
            c.env("NO_COLOR", v);
        }
        let out = c
            .output()
            .expect("util-linux `script` runs a command on a pseudo-terminal");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let colored = on_tty(None);
    assert!(colored.contains("\x1b[35mturn/start"), "{colored:?}");
    assert!(colored.contains("Fix the typo"), "{colored:?}");
    for value in ["1", "0"] {
        let plain = on_tty(Some(value));
        assert!(plain.contains("Fix the typo"), "{plain:?}");
        assert!(!plain.contains('\x1b'), "NO_COLOR={value:?}: {plain:?}");
    }
}

/// A line without an end (a binary file, `/dev/zero`) is refused once it is longer than any
/// storable event could be written (6 × max_event_size, at least 1 MiB), by `import` and by
/// `append`: a clear error naming the line, no session left behind, memory bounded.
#[test]
fn an_endless_line_is_refused_by_import_and_append() {
    let cli = Cli::new();
    let id = cli.import_example("fix-typo", &[]);
    cli.configure("max_event_size = \"1KiB\"\n");
    let entries = cli.session_entries();
    let mut endless = fix_typo_lines()[..2].join("\n").into_bytes();
    endless.push(b'\n');
    endless.extend(std::iter::repeat_n(b'a', 3 << 20));

    let run = cli.run_with(&["import", "-", "--id", "endless"], &endless);
    let err = run.fails(1);
    assert!(
        err.contains("line 3: the line is longer than 1048576 bytes"),
        "{err}"
    );
    assert!(err.contains("nothing was written"), "{err}");
    assert_eq!(cli.session_entries(), entries);

    let next = r#"{"type":"turn/start","data":{"turn":2}}"#;
    let mut input = format!("{next}\n").into_bytes();
    input.extend(std::iter::repeat_n(b'a', 3 << 20));
    let run = cli.run_with(&["append", &id, "--ack"], &input);
    let err = run.fails(1);
    assert!(
        err.contains("line 2: the line is longer than 1048576 bytes"),
        "{err}"
    );
    assert!(
        err.contains("the line before it stays appended (seq 10)"),
        "{err}"
    );
    assert_eq!(run.stdout, "10\n");
}

/// Small edges found by an audit: `close --reason` with an unknown kind is a usage error (2);
/// `export -o -` writes to stdout and `-o DIR` is refused naming the directory; `ls` shows a
/// title with line breaks and escapes on one line, without control characters.
#[test]
fn reason_values_export_to_stdout_or_a_directory_and_titles_on_one_line() {
    let cli = Cli::new();
    let id = cli.import_example("fix-typo", &["--title", "two\nlines\u{1b}[31mRED"]);

    let err = cli
        .run(&["close", &id, "--reason", "bogus"])
        .fails(2)
        .to_string();
    assert!(err.contains("max-tokens"), "lists the kinds: {err}");

    let dash = cli.run(&["export", &id, "-o", "-"]);
    assert_eq!(dash.ok(), cli.run(&["export", &id]).ok());
    assert!(!std::path::Path::new("-").exists());
    let dir = cli.dir.path().to_str().unwrap().to_string();
    let err = cli.run(&["export", &id, "-o", &dir]).fails(1).to_string();
    assert!(err.contains("is a directory"), "{err}");

    let ls = cli.run(&["ls"]);
    let row = ls.ok().lines().nth(1).unwrap().to_string();
    assert!(row.ends_with("two lines[31mRED"), "{row:?}");
    assert!(!ls.stdout.contains('\u{1b}'), "{:?}", ls.stdout);
    assert_eq!(ls.stdout.lines().count(), 2);
}

/// `verify` reports a missing index as a note (exit 0: it is derived data and every event is
/// there), and a damaged segment header once, not twice.
#[test]
fn verify_notes_a_missing_index_and_counts_damage_once() {
    let cli = Cli::new();
    let id = cli.import_example("fix-typo", &[]);
    let dir = cli.session_dir(&id);
    for entry in std::fs::read_dir(&dir).unwrap().flatten() {
        if entry.path().extension().is_some_and(|e| e == "idx") {
            std::fs::remove_file(entry.path()).unwrap();
        }
    }
    let run = cli.run(&["verify", &id]);
    let out = run.ok();
    assert!(
        out.contains("note:") && out.contains("index missing"),
        "{out}"
    );

    let seg = segments(&dir)[0].clone();
    flip(&seg, 0); // the magic bytes
    let run = cli.run(&["verify", &id]);
    run.fails(1);
    assert!(run.stdout.contains("1 problem(s)"), "{}", run.stdout);
    assert_eq!(run.stdout.matches("bad magic").count(), 1, "{}", run.stdout);
}

/// A folder in the store's sessions directory without session.json: `import` of that id says it
/// is there and not a session (not "exists already"), and `verify --all` notes it without
/// failing.
#[test]
fn a_folder_that_is_not_a_session_is_named_as_such() {
    let cli = Cli::new();
    cli.import_example("fix-typo", &["--id", "real"]);
    std::fs::create_dir_all(cli.store().join("sessions/stray")).unwrap();
    let file = example("fix-typo.jsonl");
    let err = cli
        .run(&["import", file.to_str().unwrap(), "--id", "stray"])
        .fails(1)
        .to_string();
    assert!(err.contains("is not a session"), "{err}");
    assert!(!err.contains("exists already"), "{err}");
    let run = cli.run(&["verify", "--all"]);
    assert!(run.ok().contains("1 session(s) checked, all sound"));
    assert!(
        run.stderr.contains("stray: not a session"),
        "{}",
        run.stderr
    );
}

/// An import refused for an event larger than the store's max_event_size names the line.
#[test]
fn an_oversized_event_refused_at_import_names_its_line() {
    let cli = Cli::new();
    cli.import_example("fix-typo", &[]);
    cli.configure("max_event_size = \"1KiB\"\n");
    let mut lines = fix_typo_lines();
    lines[2] = lines[2].replace("Fix the typo", &"Fix the typo ".repeat(200));
    let run = cli.run_with(&["import", "-", "--id", "big"], &jsonl(&lines));
    let err = run.fails(1);
    assert!(err.contains("line 3: event of "), "{err}");
    assert!(
        err.contains("exceeds the maximum event size of 1024 bytes"),
        "{err}"
    );
    assert!(!cli.session_entries().contains(&"big".to_string()));
}

/// A header on line 1 with a member missing or mistyped was refused as "line 1 is a second
/// session header line", naming neither the member nor the real problem. The error now says
/// what is wrong with the line.
#[test]
fn a_bad_first_header_line_is_named_for_what_it_lacks() {
    let cli = Cli::new();
    let dir = tempfile::tempdir().unwrap();
    for (line, needle) in [
        (r#"{"type":"session","id":"x","createdAt":1}"#, "version"),
        (r#"{"type":"session","version":1,"id":"x"}"#, "createdAt"),
        (
            r#"{"type":"session","version":1,"id":7,"createdAt":1}"#,
            "id",
        ),
    ] {
        let file = dir.path().join("h.jsonl");
        std::fs::write(&file, format!("{line}\n")).unwrap();
        let run = cli.run(&["import", file.to_str().unwrap()]);
        let err = run.fails(1);
        assert!(
            err.contains("line 1") && err.contains(needle) && !err.contains("second"),
            "{err}"
        );
    }
}
