//! A killed import left its hidden `sessions/.import-…` folder, which `ls`, `search`,
//! `stats --all` and `verify --all` took for a session (one that could not be opened), and no
//! command ever removed it.

mod cli_common;

use std::io::Write;
use std::process::Stdio;
use std::time::{Duration, Instant};

use cli_common::{example, Cli};

#[test]
fn a_killed_import_leaves_nothing_that_looks_like_a_session() {
    let cli = Cli::new();
    let id = cli.import_example("fix-typo", &[]);
    let lines = std::fs::read_to_string(example("fix-typo.jsonl")).unwrap();

    // An import that reads half the file, then waits for more: killed while it waits.
    let mut child = cli
        .command(&["import", "-", "--id", "slow"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let half: Vec<&str> = lines.lines().take(5).collect();
    stdin
        .write_all((half.join("\n") + "\n").as_bytes())
        .unwrap();
    stdin.flush().unwrap();
    let sessions = cli.store().join("sessions");
    let started = Instant::now();
    let temp = loop {
        let found = std::fs::read_dir(&sessions)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .find(|n| n.starts_with(".import"));
        if let Some(name) = found {
            // Its events are being written: give it a moment to write the ones it has.
            std::thread::sleep(Duration::from_millis(200));
            break name;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no import folder appeared"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    drop(stdin);
    assert!(sessions.join(&temp).exists(), "the leftover is there");

    // Nothing store-wide sees it.
    let ls = cli.run(&["ls", "--json"]);
    let listed: serde_json::Value = serde_json::from_str(ls.ok()).unwrap();
    let ids: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [id.as_str()]);
    let verify = cli.run(&["verify", "--all"]);
    assert!(!verify.ok().contains(".import"), "{}", verify.stdout);
    let stats: serde_json::Value =
        serde_json::from_str(cli.run(&["stats", "--all", "--json"]).ok()).unwrap();
    assert_eq!(stats["sessions"], 1);
    assert_eq!(stats["events"], 10);
    let found = cli.run(&["search", "--type", "turn/start", "--json"]);
    assert_eq!(found.ok().lines().count(), 1, "{}", found.stdout);

    // The next import (here of the same id) removes it and succeeds.
    let run = cli.run(&[
        "import",
        example("fix-typo.jsonl").to_str().unwrap(),
        "--id",
        "slow",
    ]);
    assert_eq!(run.ok().trim_end(), "slow");
    assert!(!sessions.join(&temp).exists(), "the leftover was removed");
    assert_eq!(cli.session_entries(), [id.as_str(), "slow"]);
}
