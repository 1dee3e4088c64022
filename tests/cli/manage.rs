//! `archive`, `unarchive`, `delete` and `gc`: the state of sessions from the command line.

use crate::cli_common;

use std::io::{BufRead, BufReader, Write};

use cli_common::Cli;

const PROMPT: &str = r#"{"type":"user/message","data":{"role":"user","content":[]}}"#;

fn ids(cli: &Cli, args: &[&str]) -> Vec<(String, String)> {
    let v: serde_json::Value = serde_json::from_str(cli.run(args).ok()).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["id"].as_str().unwrap().to_string(),
                s["state"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn archive_unarchive_delete_and_gc() {
    let cli = Cli::new();
    let a = cli.import_example("fix-typo", &["--id", "a"]);
    let b = cli.import_example("fix-typo", &["--id", "b"]);

    assert_eq!(cli.run(&["archive", &a]).ok(), "archived a\n");
    assert_eq!(
        ids(&cli, &["ls", "--json"])[0],
        ("a".into(), "archived".into())
    );
    let run = cli.run_with(&["append", &a], format!("{PROMPT}\n").as_bytes());
    let err = run.fails(1);
    assert!(err.contains("agentlog unarchive a"), "{err}");
    cli.run(&["export", &a]).ok(); // still readable

    assert_eq!(cli.run(&["unarchive", &a]).ok(), "active a\n");
    let run = cli.run_with(&["append", &a, "--ack"], format!("{PROMPT}\n").as_bytes());
    assert_eq!(run.ok(), "10\n");

    // One unknown id among several: the others are done, the exit code is 1.
    let run = cli.run(&["delete", &b, "nope"]);
    let err = run.fails(1);
    assert!(err.contains("no session \"nope\""), "{err}");
    assert_eq!(run.stdout, "deleted b\n");
    assert_eq!(
        ids(&cli, &["ls", "--json"]),
        [("a".to_string(), "active".to_string())]
    );
    assert_eq!(ids(&cli, &["ls", "--json", "--all"]).len(), 2);
    assert_eq!(cli.run(&["gc"]).ok(), "removed b\n");
    assert_eq!(cli.session_entries(), ["a"]);
    assert_eq!(cli.run(&["gc"]).ok(), "");

    // A session a writer holds is not changed: the writer has acknowledged an event, so it
    // holds the lock.
    let mut writer = cli
        .command(&["append", &a, "--ack"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = writer.stdin.take().unwrap();
    writeln!(stdin, "{PROMPT}").unwrap();
    stdin.flush().unwrap();
    let mut ack = String::new();
    BufReader::new(writer.stdout.take().unwrap())
        .read_line(&mut ack)
        .unwrap();
    assert_eq!(ack, "11\n");
    let err = cli.run(&["archive", &a]).fails(1).to_string();
    assert!(err.contains("open for writing by another process"), "{err}");
    drop(stdin);
    assert!(writer.wait().unwrap().success());

    // Archiving by idleness, judged by the last append: c's events are from 2025 but it was
    // imported just now (not idle) until its files are made 40 days old.
    let c = cli.import_example("fix-typo", &["--id", "c"]);
    assert_eq!(cli.run(&["archive", "--idle-days", "30"]).ok(), "");
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(40 * 86_400);
    for entry in std::fs::read_dir(cli.session_dir(&c)).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "seg" || e == "idx") {
            let f = std::fs::File::options().write(true).open(&path).unwrap();
            f.set_modified(old).unwrap();
        }
    }
    let run = cli.run(&["archive", "--idle-days", "30"]);
    assert_eq!(run.ok(), format!("archived {c}\n"));
    assert_eq!(
        ids(&cli, &["ls", "--json"])[0],
        ("a".into(), "active".into())
    );
    // Neither ids nor --idle-days: a usage error.
    cli.run(&["archive"]).fails(2);
}
