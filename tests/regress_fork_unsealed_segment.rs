//! `fork` stopped at the first segment before the last one whose seal had not finished (the
//! writer seals in the background, and a crash can leave a seal unfinished): it copied that
//! segment and no later one, so the fork reported N events and held fewer.

mod cli_common;
mod common;

use cli_common::Cli;

/// Sets the state field of an index header (byte 12; 1 = open, the seal not finished).
fn mark_open(idx: &std::path::Path) {
    common::rewrite_header(idx, 12, &1u32.to_le_bytes());
}

#[test]
fn a_fork_past_an_unsealed_segment_holds_every_event_it_reports() {
    let cli = Cli::with_config("segment_size = \"4KiB\"\n");
    let mut lines = String::new();
    let text = "x".repeat(300);
    for turn in 1..=20u64 {
        let seq = (turn - 1) * 3;
        lines.push_str(&format!(
            "{{\"type\":\"turn/start\",\"seq\":{seq},\"time\":1,\"data\":{{\"turn\":{turn}}}}}\n\
             {{\"type\":\"user/message\",\"seq\":{},\"time\":1,\"data\":{{\"role\":\"user\",\"content\":[{{\"type\":\"text\",\"text\":\"{text}\"}}]}}}}\n\
             {{\"type\":\"turn/end\",\"seq\":{},\"time\":1,\"data\":{{\"turn\":{turn},\"reason\":{{\"kind\":\"completed\"}}}}}}\n",
            seq + 1,
            seq + 2
        ));
    }
    let id = cli
        .run_with(&["import", "-", "--id", "p"], lines.as_bytes())
        .ok()
        .trim_end()
        .to_string();
    let dir = cli.session_dir(&id);
    let mut idx: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "idx"))
        .collect();
    idx.sort();
    assert!(idx.len() >= 4, "{idx:?}");
    mark_open(&idx[1]); // the second segment's seal did not finish

    let child = cli.run(&["fork", &id, "--at", "40", "--id", "f"]);
    assert_eq!(child.ok().trim_end(), "f");
    let parent = cli.run(&["export", &id]).ok().to_string();
    let forked = cli.run(&["export", "f"]).ok().to_string();
    let first: Vec<&str> = parent.lines().take(40).collect();
    assert_eq!(forked.lines().collect::<Vec<_>>(), first);
    cli.run(&["verify", "f"]).ok();
    let next = r#"{"type":"user/message","data":{"role":"user","content":[]}}"#;
    let run = cli.run_with(&["append", "f", "--ack"], format!("{next}\n").as_bytes());
    assert_eq!(run.ok(), "40\n");
}
