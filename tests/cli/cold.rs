//! `agentlog archive` compresses a session's segments; every command reads it as before
//! (export byte for byte, verify, search, stats, recover, fork), and `unarchive` then `append`
//! writes after the compressed segments.

use crate::cli_common;

use std::path::Path;

use cli_common::{segments, Cli};

fn cold(path: &Path) -> bool {
    std::fs::read(path).unwrap()[..8] == *b"AGLOGCSG"
}

#[test]
fn archive_compresses_and_every_command_reads_the_session_as_before() {
    let cli = Cli::with_config("segment_size = \"8KiB\"\n");
    let id = cli.import_example("tools-and-approvals", &[]);
    let dir = cli.session_dir(&id);
    let plain = segments(&dir);
    assert!(plain.len() >= 4, "{plain:?}");
    let export = cli.run(&["export", &id]).ok().to_string();
    let search = cli
        .run(&["search", "--type", "tool/*", "--session", &id])
        .ok()
        .to_string();
    let stats = cli.run(&["stats", &id, "--json"]).ok().to_string();
    assert!(!search.is_empty());

    cli.run(&["archive", &id]).ok();
    assert!(
        segments(&dir).iter().all(|s| cold(s)),
        "{:?}",
        segments(&dir)
    );
    assert_eq!(
        cli.run(&["export", &id]).ok(),
        export,
        "export is byte-identical"
    );
    assert_eq!(
        cli.run(&["search", "--type", "tool/*", "--session", &id])
            .ok(),
        search
    );
    let cold_stats: serde_json::Value =
        serde_json::from_str(cli.run(&["stats", &id, "--json"]).ok()).unwrap();
    let mut plain_stats: serde_json::Value = serde_json::from_str(&stats).unwrap();
    // Everything but the bytes on disk, which are fewer.
    let bytes = |v: &serde_json::Value| v.get("bytes").and_then(|b| b.as_u64());
    if let (Some(c), Some(p)) = (bytes(&cold_stats), bytes(&plain_stats)) {
        assert!(c < p, "{c} vs {p}");
        plain_stats["bytes"] = cold_stats["bytes"].clone();
    }
    assert_eq!(cold_stats, plain_stats);
    cli.run(&["verify", &id]).ok();
    // recover finds nothing to repair and changes nothing: it used to open the session for
    // writing, which put a new, empty plain segment (and its index) into the archive.
    let files = |dir: &Path| {
        let mut names: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        names
    };
    let before = files(&dir);
    let out = cli.run(&["recover", &id]).ok().to_string();
    assert!(out.contains("nothing to recover"), "{out}");
    assert_eq!(files(&dir), before);
    assert!(segments(&dir).iter().all(|s| cold(s)));
    assert_eq!(cli.run(&["export", &id]).ok(), export);
    cli.run(&["verify", &id]).ok();

    // A flipped byte in a compressed block: verify names the file and the block.
    let first = segments(&dir)[0].clone();
    cli_common::flip(&first, 128 + 30);
    let err = cli.run(&["verify", &id]);
    assert_ne!(err.code, 0);
    let text = format!("{}{}", err.stdout, err.stderr);
    assert!(
        text.contains("00000000000000000000.seg") && text.contains("block 0"),
        "{text}"
    );
    cli_common::flip(&first, 128 + 30);
    cli.run(&["verify", &id]).ok();

    // unarchive, then append: the new event lands after the compressed segments.
    cli.run(&["unarchive", &id]).ok();
    cli.run_with(
        &["append", &id],
        b"{\"type\":\"user/message\",\"data\":{\"role\":\"user\",\"content\":[]}}\n",
    )
    .ok();
    let after = cli.run(&["export", &id]).ok().to_string();
    assert!(
        after.starts_with(&export),
        "the earlier events stay as they were"
    );
    assert_eq!(after.lines().count(), export.lines().count() + 1);
    assert!(!cold(segments(&dir).last().unwrap()));
    cli.run(&["verify", &id]).ok();
}
