//! `Remote::follow` (what `ship --follow` runs) writes a session's cursor at most every 50 ms
//! while it ships every few ms; when it stops, every cursor is written: the cursors then say
//! what the stream acknowledged, as after a plain `ship`.

use crate::cli_common;
use testkit::nats as nats_common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use agentlog::ship::{runtime, Remote, Sessions, ShipOptions};
use agentlog::store::Store;
use cli_common::Cli;
use nats_common::{server_binary, NatsServer};

/// The six lines of a complete turn `turn`, appended one by one by `agentlog append`.
fn append_turn(cli: &Cli, id: &str, turn: u64) {
    let lines = testkit::session::turn_lines(turn);
    cli.run_with(&["append", "--create", id], lines.join("\n").as_bytes())
        .ok();
}

fn stream_events(url: &str, id: &str) -> u64 {
    runtime()
        .unwrap()
        .block_on(async {
            Remote::open(url, ShipOptions::default())
                .await?
                .remote_state(id)
                .await
        })
        .map(|s| s.events)
        .unwrap_or(0)
}

#[test]
fn follow_writes_every_cursor_when_it_stops() {
    let Some(bin) = server_binary() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let server = NatsServer::start(&bin, tmp.path());
    let url = server.url();
    let a = Cli::new();
    append_turn(&a, "f", 1);

    let stop = Arc::new(AtomicBool::new(false));
    let follower = {
        let (url, root, stop) = (url.clone(), a.store(), Arc::clone(&stop));
        std::thread::spawn(move || {
            let store = Store::open(root).unwrap();
            // Polled again each time follow wakes (every few ms).
            let stopped = std::future::poll_fn(move |_| {
                if stop.load(Ordering::SeqCst) {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            });
            runtime().unwrap().block_on(async {
                Remote::connect(&url, ShipOptions::default())
                    .await?
                    .follow(&store, Sessions::Ids(vec!["f".into()]), stopped, |_, _| {})
                    .await
            })
        })
    };
    let wait_for = |n: u64| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while stream_events(&url, "f") < n {
            assert!(
                Instant::now() < deadline,
                "the stream never held {n} events"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    wait_for(6);
    // Appended while following: shipped in steps a few ms apart.
    append_turn(&a, "f", 2);
    append_turn(&a, "f", 3);
    wait_for(18);
    stop.store(true, Ordering::SeqCst);
    follower.join().unwrap().unwrap();

    let status = a.run(&["ship", "--status", "--json"]);
    let v: serde_json::Value = serde_json::from_str(status.ok().trim()).unwrap();
    assert_eq!(
        (&v["session"], &v["shipped"], &v["local"]),
        (&"f".into(), &18.into(), &18.into()),
        "{v}"
    );
    // A plain ship afterwards finds nothing to publish.
    let again = a.run(&["ship", "--nats", &url, "f"]);
    assert!(
        again.ok().contains("f: 0 events shipped, cursor 18"),
        "{}",
        again.stdout
    );
    assert_eq!(stream_events(&url, "f"), 18);
}
