//! `agentlog ship --status --nats URL` (issue 19): per session, the local length, the shipped
//! cursor and what the stream holds (its event messages and last seq), read from a real
//! nats-server; `--json` too. Without `--nats` no server is asked.

use crate::cli_common;
use testkit::nats as nats_common;

use cli_common::Cli;
use nats_common::{server_binary, NatsServer};

/// The six lines of a complete turn `turn`.
fn turn(turn: u64) -> Vec<u8> {
    testkit::session::turn_lines(turn).join("\n").into_bytes()
}

/// `ship --status --json` (with `extra` arguments), one object per session, by session id.
fn status(cli: &Cli, extra: &[&str]) -> Vec<(String, serde_json::Value)> {
    let mut args = vec!["ship", "--status", "--json"];
    args.extend_from_slice(extra);
    let run = cli.run(&args);
    run.ok()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (v["session"].as_str().unwrap().to_string(), v)
        })
        .collect()
}

#[test]
fn status_with_nats_shows_local_shipped_and_stream_per_session() {
    let Some(bin) = server_binary() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let server = NatsServer::start(&bin, tmp.path());
    let url = server.url();

    let a = Cli::new();
    a.run_with(&["append", "--create", "s"], &turn(1)).ok();
    a.run(&["ship", "--nats", &url, "s"]).ok();
    // After the ship: s grows by a turn; t is new and never shipped.
    a.run_with(&["append", "s"], &turn(2)).ok();
    a.run_with(&["append", "--create", "t"], &turn(1)).ok();

    let rows = status(&a, &["--nats", &url]);
    let ids: Vec<&str> = rows.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["s", "t"]);
    let (s, t) = (&rows[0].1, &rows[1].1);
    assert_eq!(
        (
            &s["local"],
            &s["shipped"],
            &s["stream_events"],
            &s["stream_last_seq"]
        ),
        (&12.into(), &6.into(), &6.into(), &5.into()),
        "{s}"
    );
    assert_eq!(
        (
            &t["local"],
            &t["shipped"],
            &t["stream_events"],
            &t["stream_last_seq"]
        ),
        (&6.into(), &0.into(), &0.into(), &serde_json::Value::Null),
        "{t}"
    );

    let text = a.run(&["ship", "--status", "--nats", &url]);
    let text = text.ok();
    assert!(
        text.contains("s  6/12  (6 to ship)  stream: 6 events, last seq 5\n"),
        "{text}"
    );
    assert!(
        text.contains("t  0/6  (6 to ship)  stream: none\n"),
        "{text}"
    );

    // Without --nats: the cursors only, no server asked (the stream members absent).
    for (id, v) in status(&a, &[]) {
        assert!(v.get("stream_events").is_none(), "{id}: {v}");
        assert!(v.get("stream_last_seq").is_none(), "{id}: {v}");
    }

    // The stream's side comes from the stream, not from the cursor: a lost cursor (a crash
    // after the acknowledgement) shows shipped 0 while the stream still holds seqs 0..=5.
    std::fs::remove_file(a.store().join("ship").join("AGENTLOG").join("s")).unwrap();
    let rows = status(&a, &["--nats", &url]);
    assert_eq!(
        (
            &rows[0].1["shipped"],
            &rows[0].1["stream_events"],
            &rows[0].1["stream_last_seq"]
        ),
        (&0.into(), &6.into(), &5.into()),
        "{}",
        rows[0].1
    );

    // Everything shipped: all three agree, for both sessions.
    a.run(&["ship", "--nats", &url, "--all"]).ok();
    for (id, v) in status(&a, &["--nats", &url]) {
        let len = v["local"].as_u64().unwrap();
        assert_eq!(v["shipped"], len, "{id}: {v}");
        assert_eq!(v["stream_events"], len, "{id}: {v}");
        assert_eq!(v["stream_last_seq"], len - 1, "{id}: {v}");
    }

    // A stream that does not exist is an error naming it (and is not created).
    let other = a.run(&["ship", "--status", "--nats", &url, "--stream", "OTHER"]);
    assert!(
        other.fails(1).contains("no stream OTHER"),
        "{}",
        other.stderr
    );
    let again = a.run(&["ship", "--status", "--nats", &url, "--stream", "OTHER"]);
    assert!(
        again.fails(1).contains("no stream OTHER"),
        "{}",
        again.stderr
    );
}

/// `--store TYPO ship --status` created `TYPO/sessions` and printed nothing, exit 0 (and `ship
/// --nats URL --all` created the store before failing to connect): shipping only reads the
/// store, so a missing one is now an error, and nothing is created. Naming no session (and no
/// `--all`) is a usage error, exit 2, for `ship` and `restore`.
#[test]
fn ship_never_creates_a_store_and_needs_sessions_or_all() {
    let cli = Cli::new();
    assert!(!cli.store().exists());
    for args in [
        vec!["ship", "--status"],
        vec!["ship", "--nats", "nats://127.0.0.1:9", "--all"],
    ] {
        let said = cli.run(&args).fails(1).to_string();
        assert!(said.contains("no store at"), "{args:?}: {said}");
        assert!(!cli.store().exists(), "{args:?} created the store");
    }
    // A restore makes its store, but only once the stream is reached: a server that is down
    // left an empty store behind.
    cli.run(&["restore", "--nats", "nats://127.0.0.1:9", "--all"])
        .fails(1);
    assert!(!cli.store().exists(), "restore created the store");
    cli.run(&["create", "--id", "s"]).ok();
    cli.run(&["ship", "--nats", "nats://127.0.0.1:9"]).fails(2);
    cli.run(&["restore", "--nats", "nats://127.0.0.1:9"])
        .fails(2);
}
