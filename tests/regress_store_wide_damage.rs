//! One damaged session stopped `search` (over the store) and `stats --all` with an error that
//! named neither the session nor what to do, and the other sessions were not searched or counted.

mod cli_common;

use cli_common::{flip, segments, Cli};

#[test]
fn a_damaged_session_is_named_and_skipped_by_store_wide_search_and_stats() {
    let cli = Cli::new();
    let good = cli.import_example("fix-typo", &["--id", "b-good"]);
    let bad = cli.import_example("fix-typo", &["--id", "a-bad"]);
    let seg = segments(&cli.session_dir(&bad))[0].clone();
    flip(&seg, 64 + 20); // inside the first record
    let clean: serde_json::Value = {
        let other = Cli::new();
        other.import_example("fix-typo", &[]);
        serde_json::from_str(other.run(&["stats", "--all", "--json"]).ok()).unwrap()
    };

    let run = cli.run(&["stats", "--all", "--json"]);
    let err = run.fails(1);
    assert!(err.contains("session a-bad was skipped"), "{err}");
    assert!(err.contains("agentlog verify a-bad"), "{err}");
    let stats: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(stats["sessions"], 1);
    assert_eq!(stats["events"], clean["events"]);
    assert_eq!(stats["byType"], clean["byType"]);

    let run = cli.run(&["search", "--type", "turn/start", "--json"]);
    let err = run.fails(1);
    assert!(err.contains("session a-bad was skipped"), "{err}");
    let sessions: Vec<String> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["session"].to_string())
        .collect();
    assert_eq!(sessions, [format!("\"{good}\"")]);

    // Without the damage both succeed.
    std::fs::remove_dir_all(cli.session_dir(&bad)).unwrap();
    cli.run(&["stats", "--all", "--json"]).ok();
    cli.run(&["search", "--type", "turn/start"]).ok();
}
