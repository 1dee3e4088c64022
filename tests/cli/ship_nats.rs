//! Many machines (issue 19): `agentlog ship` to a real nats-server with JetStream, `agentlog
//! restore` from it, with the shipper killed, the server restarted, and both ends following.

use crate::cli_common;
use testkit::nats as nats_common;

use std::process::Child;
use std::time::{Duration, Instant};

use agentlog::event::parse_draft_line;
use agentlog::ship::{runtime, Remote, RemoteState, ShipOptions};
use agentlog::store::{NewSession, Store};
use cli_common::Cli;
use nats_common::{server_binary, NatsServer};

/// Generous: a loaded CI machine.
const PATIENCE: Duration = Duration::from_secs(60);

/// Kills a child that is still running when the test ends (also when it fails).
struct Reap(Child);

impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Appends `turns` complete turns (six events each) to session `id` of the store at `root`,
/// creating it (with `title`) when missing.
fn append_turns(root: &std::path::Path, id: &str, title: &str, turns: u64) -> u64 {
    let store = Store::open(root).unwrap();
    let session = match store.open_session(id) {
        Ok(s) => s,
        Err(_) => store
            .create(NewSession::default().id(id).title(title))
            .unwrap(),
    };
    let first = session.lifecycle().next_turn();
    let mut drafts = Vec::new();
    for turn in first..first + turns {
        for line in testkit::session::turn_lines(turn) {
            drafts.push(parse_draft_line(&line).unwrap());
        }
        if drafts.len() >= 6000 {
            session.append_drafts(std::mem::take(&mut drafts)).unwrap();
        }
    }
    session.append_drafts(drafts).unwrap();
    let len = session.len();
    session.close().unwrap();
    len
}

/// `export --header` of a session.
fn export(cli: &Cli, id: &str) -> Vec<u8> {
    let run = cli.run(&["export", "--header", id]);
    run.ok();
    run.raw
}

/// True when store `b` holds session `id` exactly as store `a` does (`export --header`).
fn restored(a: &Cli, b: &Cli, id: &str) -> bool {
    let run = b.run(&["export", "--header", id]);
    run.code == 0 && run.raw == export(a, id)
}

/// What the stream holds of session `id`.
fn remote_state(url: &str, id: &str) -> RemoteState {
    let rt = runtime().unwrap();
    rt.block_on(async {
        let remote = Remote::connect(url, ShipOptions::default()).await?;
        remote.remote_state(id).await
    })
    .unwrap()
}

/// Waits until `f` holds, at most PATIENCE.
#[track_caller]
fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while Instant::now() < deadline {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("timed out waiting for {what}");
}

#[test]
fn ship_then_restore_is_byte_identical() {
    let Some(bin) = server_binary() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let server = NatsServer::start(&bin, tmp.path());
    let url = server.url();

    let a = Cli::new();
    let coding = a.import_example("coding-session", &[]);
    let typo = a.import_example("fix-typo", &["--title", "typo fix"]);
    append_turns(&a.store(), "gen.1", "generated", 50);
    a.run(&["archive", &typo]).ok();

    // Restoring from a stream nothing was shipped to is an error (and creates no stream).
    let none = a.run(&["restore", "--nats", &url, "--all"]);
    assert!(
        none.fails(1).contains("no stream AGENTLOG"),
        "{}",
        none.stderr
    );

    let out = a.run(&["ship", "--nats", &url, "--all"]);
    out.ok();
    assert!(
        out.stdout.contains("gen.1: 300 events shipped"),
        "{}",
        out.stdout
    );

    // The stream holds every event once; the cursors say so.
    for id in [&coding, &typo, &"gen.1".to_string()] {
        let len = Store::open(a.store())
            .unwrap()
            .open_reader(id)
            .unwrap()
            .len();
        let state = remote_state(&url, id);
        assert_eq!(state.events, len, "{id}");
        assert_eq!(state.last_seq, Some(len - 1), "{id}");
    }
    let status = a.run(&["ship", "--status", "--json"]);
    assert_eq!(status.ok().lines().count(), 3);
    for line in status.stdout.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["shipped"], v["local"], "{line}");
    }

    // A second ship publishes nothing.
    let again = a.run(&["ship", "--nats", &url, "--all"]);
    assert!(
        again.ok().contains("gen.1: 0 events shipped"),
        "{}",
        again.stdout
    );
    assert_eq!(remote_state(&url, "gen.1").events, 300);

    // Another store, another host: restored byte for byte, the archived state too.
    let b = Cli::new();
    b.run(&["restore", "--nats", &url, "--all"]).ok();
    for id in [&coding, &typo, &"gen.1".to_string()] {
        assert_eq!(export(&a, id), export(&b, id), "{id}");
    }
    let ls = b.run(&["ls", "--all", "--json"]);
    let listed: serde_json::Value = serde_json::from_str(ls.ok()).unwrap();
    let archived = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["id"] == typo.as_str())
        .unwrap();
    assert_eq!(archived["state"], "archived", "{}", ls.stdout);

    // Restoring again changes nothing; a restore under a new id has the same events.
    b.run(&["restore", "--nats", &url, "--all"]).ok();
    assert_eq!(export(&a, "gen.1"), export(&b, "gen.1"));
    b.run(&["restore", "--nats", &url, "gen.1", "--id", "copy"])
        .ok();
    assert_eq!(
        a.run(&["export", "gen.1"]).raw,
        b.run(&["export", "copy"]).raw
    );

    // A session the stream does not hold is an error.
    let missing = b.run(&["restore", "--nats", &url, "nope"]);
    assert!(missing.fails(1).contains("nope"), "{}", missing.stderr);
}

#[test]
fn ship_killed_at_random_points_leaves_no_gap_and_no_duplicate() {
    let Some(bin) = server_binary() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let server = NatsServer::start(&bin, tmp.path());
    let url = server.url();

    let a = Cli::new();
    let mut len = append_turns(&a.store(), "big", "big", 20_000);
    assert_eq!(len, 120_000);
    // A simple generator: the kill points differ from run to run, the property must not.
    let mut x = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64
        | 1;
    // The kills must land mid-ship however fast the machine: a ship that finishes before
    // its kill gets more events to ship next time and shorter waits from then on.
    let (mut kills, mut finished, mut max_wait) = (0, 0, 150);
    while kills < 10 && kills + finished < 60 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let mut child = Reap(a.command(&["ship", "--nats", &url, "big"]).spawn().unwrap());
        std::thread::sleep(Duration::from_millis(2 + x % max_wait));
        if child.0.try_wait().unwrap().is_none() {
            kills += 1;
        } else {
            finished += 1;
            max_wait = (max_wait / 2).max(4);
            len = append_turns(&a.store(), "big", "big", 2_000);
        }
        let _ = child.0.kill();
        let _ = child.0.wait();
    }
    assert!(
        kills >= 10,
        "the shipper finished before most kills ({kills} kills, {finished} finished)"
    );
    a.run(&["ship", "--nats", &url, "big"]).ok();
    let state = remote_state(&url, "big");
    assert_eq!(
        state.events, len,
        "one message per event: no gap, no duplicate"
    );
    assert_eq!(state.last_seq, Some(len - 1));
    let b = Cli::new();
    b.run(&["restore", "--nats", &url, "big"]).ok();
    assert_eq!(export(&a, "big"), export(&b, "big"));
}

#[test]
fn server_restarted_mid_ship_ship_completes() {
    let Some(bin) = server_binary() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let mut server = NatsServer::start(&bin, tmp.path());
    let url = server.url();

    let a = Cli::new();
    let len = append_turns(&a.store(), "big", "big", 10_000);
    // Create the stream first, so that the ship below is mid-way when the server goes.
    a.run(&["ship", "--nats", &url, "--all"]).ok();
    let more = append_turns(&a.store(), "big", "big", 10_000) - len;
    let mut child = Reap(a.command(&["ship", "--nats", &url, "big"]).spawn().unwrap());
    std::thread::sleep(Duration::from_millis(300));
    let mid = child.0.try_wait().unwrap().is_none();
    server.restart();
    let out = child.0.wait().unwrap();
    assert!(out.success(), "the ship retried through the restart");
    let total = len + more;
    let state = remote_state(&url, "big");
    assert_eq!(
        state.events, total,
        "no gap, no duplicate (mid-ship: {mid})"
    );
    assert_eq!(state.last_seq, Some(total - 1));
    let b = Cli::new();
    b.run(&["restore", "--nats", &url, "big"]).ok();
    assert_eq!(export(&a, "big"), export(&b, "big"));
}

#[test]
fn follow_on_both_ends_keeps_a_central_store_in_step() {
    let Some(bin) = server_binary() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let server = NatsServer::start(&bin, tmp.path());
    let url = server.url();

    let a = Cli::new();
    append_turns(&a.store(), "one", "first", 3);
    let _shipper = Reap(
        a.command(&["ship", "--nats", &url, "--all", "--follow"])
            .spawn()
            .unwrap(),
    );
    let b = Cli::new();
    let _restorer = Reap(
        b.command(&["restore", "--nats", &url, "--all", "--follow"])
            .spawn()
            .unwrap(),
    );

    let same = |id: &str| restored(&a, &b, id);
    wait_until("session one restored", || same("one"));
    // An appender keeps writing; a new session starts; a title changes.
    for round in 0..5 {
        append_turns(&a.store(), "one", "first", 2);
        if round == 2 {
            append_turns(&a.store(), "two", "second", 4);
        }
        std::thread::sleep(Duration::from_millis(30));
    }
    wait_until("the appends and the new session restored", || {
        same("one") && same("two")
    });
    let stats = b.run(&["stats", "--all"]);
    stats.ok();
}

/// Starts three clustered nodes keeping their files under `dir`.
fn start_cluster(bin: &std::path::Path, dir: &std::path::Path) -> Vec<NatsServer> {
    let cluster_ports: Vec<u16> = (0..3).map(|_| nats_common::free_port()).collect();
    let routes = cluster_ports
        .iter()
        .map(|p| format!("nats://127.0.0.1:{p}"))
        .collect::<Vec<_>>()
        .join(",");
    (0..3)
        .map(|i| {
            let dir = dir.join(format!("n{i}"));
            std::fs::create_dir_all(&dir).unwrap();
            NatsServer::start_with(
                bin,
                &dir,
                0,
                vec![
                    "-n".into(),
                    format!("n{i}"),
                    "--cluster_name".into(),
                    "agentlog-test".into(),
                    "--cluster".into(),
                    format!("nats://127.0.0.1:{}", cluster_ports[i]),
                    "--routes".into(),
                    routes.clone(),
                ],
            )
        })
        .collect()
}

/// How long a fresh cluster may take to place a stream of three replicas before it is started
/// anew, and how many clusters are tried: nats-server 2.9 places one only while it has heard from
/// all three nodes, and a loaded CI machine once saw a cluster that never got there.
const CLUSTER_PATIENCE: Duration = Duration::from_secs(40);
const CLUSTER_TRIES: usize = 3;

#[test]
fn three_node_cluster_survives_a_node_killed_mid_ship() {
    let Some(bin) = server_binary() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let a = Cli::new();
    let len = append_turns(&a.store(), "big", "big", 5000);
    // The cluster elects its JetStream meta leader after it forms: create the stream of three
    // replicas once it can. The stream's creation is the test's precondition, not its subject;
    // a cluster that never places it is replaced (with its logs on stderr).
    let rt = runtime().unwrap();
    let mut formed = None;
    for attempt in 0..CLUSTER_TRIES {
        let nodes = start_cluster(&bin, &tmp.path().join(format!("try{attempt}")));
        let url = nodes[0].url();
        let deadline = Instant::now() + CLUSTER_PATIENCE;
        let mut last = String::new();
        let mut took = false;
        loop {
            let options = ShipOptions {
                replicas: 3,
                ..ShipOptions::default()
            };
            match rt.block_on(Remote::connect(&url, options)) {
                Ok(_) => {
                    took = true;
                    break;
                }
                Err(e) if Instant::now() < deadline => {
                    last = e.to_string();
                    std::thread::sleep(Duration::from_millis(500));
                }
                Err(e) => {
                    last = e.to_string();
                    break;
                }
            }
        }
        if took {
            formed = Some(nodes);
            break;
        }
        eprintln!("cluster {attempt} never took the stream: {last}");
        for (i, node) in nodes.iter().enumerate() {
            eprintln!("--- log of n{i}:\n{}", node.log_tail());
        }
    }
    let mut nodes = formed.expect("a cluster took the stream (see the node logs above)");
    let url = nodes[0].url();
    let mut child = Reap(
        a.command(&["ship", "--nats", &url, "--replicas", "3", "big"])
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(200));
    nodes[2].kill();
    let out = child.0.wait().unwrap();
    assert!(out.success(), "the ship completed with a node down");
    let state = remote_state(&url, "big");
    assert_eq!(state.events, len, "no gap, no duplicate");
    let b = Cli::new();
    b.run(&["restore", "--nats", &nodes[1].url(), "big"]).ok();
    assert_eq!(export(&a, "big"), export(&b, "big"));
}

/// Found by a sweep of shipping: three ways two histories of one session id met in the stream
/// without a word. (1) A session taken over on host B (restored, appended to, shipped) while
/// host A still had appends of its own: A's ship skipped its events at the seqs B had shipped
/// (dropped as duplicates) and appended the rest after B's. (2) A session redacted or purged
/// after it was shipped: the rewrite never reached the stream, which still held the secret.
/// (3) A session deleted, collected and created again under its id: the old cursor kept the
/// new events from ever being shipped. Each is now refused, naming what to do; nothing is
/// shipped. A restored session appended to on its new host ships as before.
#[test]
fn another_history_of_a_session_is_never_shipped_onto_the_streams_copy() {
    let Some(bin) = server_binary() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let server = NatsServer::start(&bin, tmp.path());
    let url = server.url();

    // (1) Diverged: A ships 2 turns; B restores, appends a turn, ships; A appends its own.
    let a = Cli::new();
    append_turns(&a.store(), "s", "shared", 2);
    a.run(&["ship", "--nats", &url, "s"]).ok();
    let b = Cli::new();
    b.run(&["restore", "--nats", &url, "s"]).ok();
    append_turns(&b.store(), "s", "shared", 1);
    let out = b.run(&["ship", "--nats", &url, "s"]);
    assert!(out.ok().contains("6 events shipped"), "{}", out.stdout);
    append_turns(&a.store(), "s", "shared", 2);
    let refused = a.run(&["ship", "--nats", &url, "s"]);
    let said = refused.fails(1).to_string();
    assert!(said.contains("another history of session s"), "{said}");
    assert!(said.contains("restore --id NEW"), "{said}");
    assert_eq!(remote_state(&url, "s").events, 18, "nothing of A's shipped");

    // (2) Rewritten after shipping: a purge of a shipped session.
    a.run(&["create", "--id", "p"]).ok();
    append_turns(&a.store(), "p", "purged", 2);
    a.run(&["ship", "--nats", &url, "p"]).ok();
    a.run(&["purge", "p", "--turn", "1"]).ok();
    let said = a.run(&["ship", "--nats", &url, "p"]).fails(1).to_string();
    assert!(said.contains("rewritten by redact or purge"), "{said}");
    assert_eq!(remote_state(&url, "p").events, 12);

    // (3) Deleted, collected, created again under the same id.
    append_turns(&a.store(), "r", "first", 2);
    a.run(&["ship", "--nats", &url, "r"]).ok();
    a.run(&["delete", "r"]).ok();
    a.run(&["gc"]).ok();
    append_turns(&a.store(), "r", "second", 1);
    let said = a.run(&["ship", "--nats", &url, "r"]).fails(1).to_string();
    assert!(said.contains("session r"), "{said}");
    assert_eq!(remote_state(&url, "r").events, 12);
}

/// `restore --all` stopped at the first local session of the same id that is not the
/// stream's, and the sessions after it were not restored. It now restores the others and
/// fails naming the one it left out.
#[test]
fn restore_all_restores_the_others_around_a_conflict() {
    let Some(bin) = server_binary() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let server = NatsServer::start(&bin, tmp.path());
    let url = server.url();
    let b = Cli::new();
    append_turns(&b.store(), "clash", "b's own", 1);
    let a = Cli::new();
    for id in ["a-ok", "clash", "z-ok"] {
        append_turns(&a.store(), id, id, 1);
    }
    a.run(&["ship", "--nats", &url, "--all"]).ok();
    let run = b.run(&["restore", "--nats", &url, "--all"]);
    let said = run.fails(1).to_string();
    assert!(
        said.contains("clash (the local session is not the stream's"),
        "{said}"
    );
    assert!(said.contains("a-ok, z-ok"), "{said}");
    for id in ["a-ok", "z-ok"] {
        assert_eq!(export(&b, id), export(&a, id), "{id}");
    }
    assert_ne!(export(&b, "clash"), export(&a, "clash"));
}

/// `restore --follow` stopped receiving when the server restarted and exited 1 about 15 s
/// later ("consumer not found"), while `ship --follow` rode the restart out. It now reads on
/// after the last message it had read, once the server is back.
#[test]
fn restore_follow_rides_out_a_server_restart() {
    let Some(bin) = server_binary() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let mut server = NatsServer::start(&bin, tmp.path());
    let url = server.url();
    let a = Cli::new();
    append_turns(&a.store(), "one", "first", 3);
    a.run(&["ship", "--nats", &url, "--all"]).ok();
    let b = Cli::new();
    let mut restorer = Reap(
        b.command(&["restore", "--nats", &url, "--all", "--follow"])
            .spawn()
            .unwrap(),
    );
    let same = |id: &str| restored(&a, &b, id);
    wait_until("session one restored", || same("one"));
    server.restart();
    append_turns(&a.store(), "one", "first", 2);
    a.run(&["ship", "--nats", &url, "--all"]).ok();
    wait_until("the events shipped after the restart restored", || {
        same("one")
    });
    assert!(
        restorer.0.try_wait().unwrap().is_none(),
        "restore --follow still runs"
    );
}

/// Sends `signal` (`INT`, `TERM`) to a running command and waits for it to exit: its exit
/// status and what it wrote on stderr.
fn signal_and_wait(child: &mut Reap, signal: &str) -> (std::process::ExitStatus, String) {
    let pid = child.0.id().to_string();
    let sent = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &pid])
        .status()
        .unwrap();
    assert!(sent.success(), "kill -{signal} {pid}");
    let deadline = Instant::now() + PATIENCE;
    let status = loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "still running after SIG{signal}");
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    if let Some(mut e) = child.0.stderr.take() {
        std::io::Read::read_to_string(&mut e, &mut stderr).unwrap();
    }
    (status, stderr)
}

/// `ship --follow` and `restore --follow` had no signal handler: Ctrl-C or a service manager's
/// SIGTERM killed them where they stood, and `ship`'s cursor held only its last periodic write
/// (at most every 50 ms). Both now stop on SIGINT or SIGTERM, write every cursor and exit 0.
#[test]
fn follow_commands_stop_cleanly_on_sigint_and_sigterm() {
    let Some(bin) = server_binary() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let server = NatsServer::start(&bin, tmp.path());
    let url = server.url();
    let a = Cli::new();
    append_turns(&a.store(), "s", "signals", 2);
    let mut shipper = Reap(
        a.command(&["ship", "--nats", &url, "s", "--follow"])
            .spawn()
            .unwrap(),
    );
    wait_until("12 events shipped", || remote_state(&url, "s").events == 12);
    append_turns(&a.store(), "s", "signals", 1);
    wait_until("18 events shipped", || remote_state(&url, "s").events == 18);
    // At once: the follower's periodic cursor write may not have come yet.
    let (status, stderr) = signal_and_wait(&mut shipper, "INT");
    assert!(status.success(), "{status}: {stderr}");
    assert!(stderr.contains("interrupted: stopping"), "{stderr}");
    let run = a.run(&["ship", "--status", "--json"]);
    let v: serde_json::Value = serde_json::from_str(run.ok().trim()).unwrap();
    assert_eq!(
        (&v["shipped"], &v["local"]),
        (&18.into(), &18.into()),
        "{v}"
    );

    let b = Cli::new();
    let mut restorer = Reap(
        b.command(&["restore", "--nats", &url, "--all", "--follow"])
            .spawn()
            .unwrap(),
    );
    wait_until("session s restored", || restored(&a, &b, "s"));
    let (status, stderr) = signal_and_wait(&mut restorer, "TERM");
    assert!(status.success(), "{status}: {stderr}");
    assert!(stderr.contains("interrupted: stopping"), "{stderr}");
}

/// Reads a running command's stderr on a thread: the lines so far, shared.
fn stderr_lines(child: &mut Reap) -> std::sync::Arc<std::sync::Mutex<String>> {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let mut stderr = child.0.stderr.take().unwrap();
    let into = std::sync::Arc::clone(&seen);
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = std::io::Read::read(&mut stderr, &mut buf) {
            if n == 0 {
                break;
            }
            into.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    seen
}

/// One session that cannot be shipped (here: purged after it was shipped, so the stream holds
/// another history of it) stopped `ship --all` and `ship --follow --all` for every session,
/// and one local session that is not the stream's stopped `restore --all --follow`. Each now
/// names the session, leaves it out and goes on with the others; `ship --all` then exits 1.
#[test]
fn one_refused_session_does_not_stop_the_others() {
    let Some(bin) = server_binary() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let server = NatsServer::start(&bin, tmp.path());
    let url = server.url();
    let a = Cli::new();
    for id in ["a-ok", "bad", "z-ok"] {
        append_turns(&a.store(), id, id, 2);
    }
    a.run(&["ship", "--nats", &url, "--all"]).ok();
    a.run(&["purge", "bad", "--turn", "1"]).ok();
    append_turns(&a.store(), "a-ok", "a-ok", 1);
    append_turns(&a.store(), "z-ok", "z-ok", 1);

    let run = a.run(&["ship", "--nats", &url, "--all"]);
    let said = run.fails(1).to_string();
    assert!(said.contains("bad: not shipped"), "{said}");
    assert!(said.contains("1 session not shipped"), "{said}");
    assert!(
        run.stdout.contains("a-ok: 6 events shipped"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("z-ok: 6 events shipped"),
        "{}",
        run.stdout
    );
    assert_eq!(remote_state(&url, "z-ok").events, 18);

    let mut shipper = Reap(
        a.command(&["ship", "--nats", &url, "--all", "--follow"])
            .spawn()
            .unwrap(),
    );
    let said = stderr_lines(&mut shipper);
    append_turns(&a.store(), "z-ok", "z-ok", 1);
    wait_until("z-ok's new turn shipped past the refused session", || {
        remote_state(&url, "z-ok").events == 24
    });
    assert!(
        shipper.0.try_wait().unwrap().is_none(),
        "ship --follow runs on"
    );
    assert!(
        said.lock()
            .unwrap()
            .contains("bad: not shipped, left out until ship restarts"),
        "{}",
        said.lock().unwrap()
    );

    // A store where "a-ok" is another session: restore --all --follow restores the others.
    let b = Cli::new();
    append_turns(&b.store(), "a-ok", "b's own", 1);
    let mut restorer = Reap(
        b.command(&["restore", "--nats", &url, "--all", "--follow"])
            .spawn()
            .unwrap(),
    );
    let said = stderr_lines(&mut restorer);
    wait_until("z-ok restored", || restored(&a, &b, "z-ok"));
    append_turns(&a.store(), "z-ok", "z-ok", 1);
    wait_until("z-ok's next turn restored", || restored(&a, &b, "z-ok"));
    assert!(
        restorer.0.try_wait().unwrap().is_none(),
        "restore --follow runs on"
    );
    assert!(
        said.lock()
            .unwrap()
            .contains("a-ok: not restored, left out until restore restarts"),
        "{}",
        said.lock().unwrap()
    );
    assert_ne!(export(&b, "a-ok"), export(&a, "a-ok"));
}

/// Creates a stream on the server at `url` as its operator would, after deleting stream
/// `delete` (subjects of two streams must not overlap).
fn create_stream(url: &str, delete: Option<&str>, config: async_nats::jetstream::stream::Config) {
    runtime().unwrap().block_on(async {
        let client = async_nats::connect(url).await.unwrap();
        let js = async_nats::jetstream::new(client);
        if let Some(name) = delete {
            js.delete_stream(name).await.unwrap();
        }
        js.create_stream(config).await.unwrap();
    });
}

/// A stream that could never take the events was retried for 60 s like a server that is down,
/// and then named as a network failure: one whose subjects do not take `agentlog.<session>.*`
/// (its publishes get "no responders"), and one that is full and discards new messages. The
/// first is now refused on connecting, the second at its first refused publish, each with what
/// to change.
#[test]
fn a_stream_that_cannot_take_the_events_is_refused_at_once() {
    use async_nats::jetstream::stream::{Config, DiscardPolicy};
    let Some(bin) = server_binary() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let server = NatsServer::start(&bin, tmp.path());
    let url = server.url();
    let a = Cli::new();
    append_turns(&a.store(), "s", "s", 2);

    create_stream(
        &url,
        None,
        Config {
            name: "NARROW".into(),
            subjects: vec!["agentlog.host1.>".into(), "other.>".into()],
            ..Default::default()
        },
    );
    let said = a
        .run(&["ship", "--nats", &url, "--stream", "NARROW", "s"])
        .fails(1)
        .to_string();
    assert!(said.contains("stream NARROW takes the subjects"), "{said}");
    assert!(said.contains("\"agentlog.>\""), "{said}");

    create_stream(
        &url,
        Some("NARROW"),
        Config {
            name: "FULL".into(),
            subjects: vec!["agentlog.>".into()],
            max_messages: 5,
            discard: DiscardPolicy::New,
            ..Default::default()
        },
    );
    let said = a
        .run(&["ship", "--nats", &url, "--stream", "FULL", "s"])
        .fails(1)
        .to_string();
    assert!(said.contains("stream FULL refused it"), "{said}");
    assert!(said.contains("maximum messages exceeded"), "{said}");
    let run = a.run(&["ship", "--status", "--stream", "FULL", "--json"]);
    let v: serde_json::Value = serde_json::from_str(run.ok().trim()).unwrap();
    assert_eq!(v["shipped"], 4, "the metadata and 4 events fit: {v}");
}

/// Deletes the messages of stream `name` at stream sequences `seqs`.
fn delete_messages(url: &str, name: &str, seqs: &[u64]) {
    runtime().unwrap().block_on(async {
        let client = async_nats::connect(url).await.unwrap();
        let stream = async_nats::jetstream::new(client)
            .get_stream(name)
            .await
            .unwrap();
        for &seq in seqs {
            stream.delete_message(seq).await.unwrap();
        }
    });
}

/// `restore` of a session whose first events were gone from the stream (deleted, or expired
/// by its limits) failed naming the gap, but left an empty session behind, created from the
/// metadata: it passed for the stream's copy. It is now not created, and a gap later in a
/// session leaves the events before it restored.
#[test]
fn a_stream_lacking_a_sessions_first_events_leaves_no_empty_session() {
    let Some(bin) = server_binary() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let server = NatsServer::start(&bin, tmp.path());
    let url = server.url();
    let a = Cli::new();
    append_turns(&a.store(), "head", "head", 1);
    a.run(&["ship", "--nats", &url, "head"]).ok();
    append_turns(&a.store(), "mid", "mid", 1);
    a.run(&["ship", "--nats", &url, "mid"]).ok();
    // Stream sequences: 1 head's metadata, 2..=7 its seqs 0..=5; 8 mid's metadata, 9..=14.
    delete_messages(&url, agentlog::ship::DEFAULT_STREAM, &[2, 3, 12]);

    let b = Cli::new();
    let said = b
        .run(&["restore", "--nats", &url, "head"])
        .fails(1)
        .to_string();
    assert!(
        said.contains("session head: the stream lacks seq 0"),
        "{said}"
    );
    assert!(said.contains("so it was not created"), "{said}");
    assert!(
        !b.session_entries().contains(&"head".to_string()),
        "{:?}",
        b.session_entries()
    );

    let said = b
        .run(&["restore", "--nats", &url, "mid"])
        .fails(1)
        .to_string();
    assert!(
        said.contains("session mid: the stream lacks seq 3"),
        "{said}"
    );
    assert!(!said.contains("not created"), "{said}");
    let export = b.run(&["export", "mid"]);
    assert_eq!(export.ok().lines().count(), 3, "{}", export.stdout);
}
