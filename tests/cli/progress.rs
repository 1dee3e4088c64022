//! Progress bars: drawn on standard error when it is a terminal (here a pseudo-terminal made by
//! `script` from util-linux) for a long import, export and verify; never when it is piped.

use crate::cli_common;

use std::path::Path;
use std::process::Command;

use cli_common::{Cli, BIN};

/// A valid session of one turn with `chunks` text chunks of about 150 bytes: past both the byte
/// and the event thresholds below which no bar is drawn (8 MiB, 50,000 events).
fn big_session(chunks: u64) -> String {
    let mut s = String::new();
    let mut seq = 0u64;
    let mut line = |ty: &str, data: String| {
        s.push_str(&format!(
            r#"{{"type":"{ty}","seq":{seq},"time":{},"data":{data}}}"#,
            1_755_000_000_000u64 + seq
        ));
        s.push('\n');
        seq += 1;
    };
    line("turn/start", r#"{"turn":1}"#.into());
    line("step/start", r#"{"turn":1,"step":1}"#.into());
    let filler = "x".repeat(120);
    for i in 0..chunks {
        line(
            "assistant/chunk",
            format!(
                r#"{{"turn":1,"step":1,"chunk":{{"type":"text-delta","text":"word {i} {filler}"}}}}"#
            ),
        );
    }
    line("step/end", r#"{"turn":1,"step":1}"#.into());
    line(
        "turn/end",
        r#"{"turn":1,"reason":{"kind":"completed"}}"#.into(),
    );
    s
}

/// Runs `agentlog --store STORE args…` with a pseudo-terminal as its standard output and error;
/// returns everything it printed there.
fn on_terminal(store: &Path, args: &[&str]) -> String {
    run_on_terminal(store, args, None)
}

/// As [`on_terminal`], with standard input read from the file `input`.
fn on_terminal_stdin(store: &Path, args: &[&str], input: &str) -> String {
    run_on_terminal(store, args, Some(input))
}

fn run_on_terminal(store: &Path, args: &[&str], input: Option<&str>) -> String {
    let mut cmd = vec![
        BIN.to_string(),
        "--store".into(),
        store.display().to_string(),
    ];
    cmd.extend(args.iter().map(|a| a.to_string()));
    let line = cmd
        .iter()
        .map(|a| format!("'{}'", a.replace('\'', r"'\''")))
        .collect::<Vec<_>>()
        .join(" ");
    let line = match input {
        Some(file) => format!("{line} < '{}'", file.replace('\'', r"'\''")),
        None => line,
    };
    let out = Command::new("script")
        .args(["-q", "-e", "-c", &line, "/dev/null"])
        .env_remove("NO_COLOR")
        .env("TERM", "xterm")
        .output()
        .expect("`script` (util-linux) runs the command on a pseudo-terminal; install util-linux");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{line} failed on a terminal: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

#[test]
fn long_import_export_and_verify_draw_a_bar_on_a_terminal_only() {
    let cli = Cli::new();
    let file = cli.dir.path().join("big.jsonl");
    std::fs::write(&file, big_session(60_000)).unwrap();
    let file = file.to_str().unwrap();

    // Piped: the id alone on stdout, nothing on stderr.
    let piped = cli.run(&["import", file]);
    let id = piped.ok().trim_end().to_string();
    assert!(!id.is_empty() && !id.contains('\n'), "{:?}", piped.stdout);
    assert_eq!(piped.stderr, "", "no bar when stderr is piped");

    // On a terminal: a bar counting bytes that moves, then the id.
    let shown = on_terminal(&cli.store(), &["import", file]);
    assert!(shown.contains("importing ["), "{shown:?}");
    assert!(shown.contains("MiB"), "counts bytes: {shown:?}");
    assert!(shown.contains("=>"), "the bar advances: {shown:?}");
    assert!(
        shown.contains("\u{1b}[2K"),
        "the bar is redrawn in place: {shown:?}"
    );
    let second = shown
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap();
    assert_ne!(second, id, "a second session");

    // Export to a file and verify: bars counting events.
    let out = cli.dir.path().join("out.jsonl");
    let shown = on_terminal(&cli.store(), &["export", &id, "-o", out.to_str().unwrap()]);
    assert!(shown.contains("exporting ["), "{shown:?}");
    assert!(shown.contains("events"), "{shown:?}");
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(file).unwrap());
    let shown = on_terminal(&cli.store(), &["verify", &id]);
    assert!(shown.contains("verifying ["), "{shown:?}");

    // The same commands piped draw nothing.
    for args in [
        vec!["export", &id, "-o", out.to_str().unwrap()],
        vec!["verify", &id],
    ] {
        let run = cli.run(&args);
        run.ok();
        assert!(!run.stderr.contains('['), "{args:?}: {:?}", run.stderr);
    }
}

/// A short import draws no bar even on a terminal (it would only flash), also from stdin, whose
/// size is not known beforehand; a long import from stdin draws one once 8 MiB are read.
#[test]
fn short_work_draws_no_bar_on_a_terminal() {
    let cli = Cli::new();
    let file = cli_common::example("fix-typo.jsonl");
    let file = file.to_str().unwrap();
    let shown = on_terminal(&cli.store(), &["import", file]);
    assert!(!shown.contains("importing"), "{shown:?}");
    assert!(!shown.contains('['), "{shown:?}");
    let shown = on_terminal_stdin(&cli.store(), &["import", "-"], file);
    assert!(!shown.contains("importing"), "{shown:?}");

    let big = cli.dir.path().join("big.jsonl");
    std::fs::write(&big, big_session(60_000)).unwrap();
    let shown = on_terminal_stdin(&cli.store(), &["import", "-"], big.to_str().unwrap());
    assert!(shown.contains("importing"), "{shown:?}");
    assert!(shown.contains("MiB"), "{shown:?}");
}
