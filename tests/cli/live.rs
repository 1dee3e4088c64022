//! The command line with other processes: `append --ack` acknowledging line by line, `tail -f`
//! following another process's appends, `verify` on damaged and live sessions, `recover`.

use crate::cli_common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdout, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use agentlog::event::parse_json;
use agentlog::store::Store;
use cli_common::{flip, segments, Cli};

/// Generous: a loaded CI machine. The promises measured against it are much shorter.
const PATIENCE: Duration = Duration::from_secs(10);

/// Reads a child's stdout lines on a thread, so the test can wait with a timeout.
fn lines_of(stdout: ChildStdout) -> Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Kills a child that is still running when the test ends (also when it fails).
struct Reap(Child);

impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn event(i: u64) -> String {
    format!(
        "{{\"type\":\"user/message\",\"data\":{{\"role\":\"user\",\"content\":[{{\"type\":\"text\",\"text\":\"message {i}\"}}]}}}}\n"
    )
}

#[test]
fn append_ack_acknowledges_each_line_as_it_is_fed() {
    let cli = Cli::new();
    cli.import_example("fix-typo", &["--id", "s"]);
    for sync in [false, true] {
        let mut args = vec!["append", "s", "--ack"];
        if sync {
            args.push("--sync");
        }
        let mut child = Reap(cli.command(&args).stdin(Stdio::piped()).spawn().unwrap());
        let mut stdin = child.0.stdin.take().unwrap();
        let acks = lines_of(child.0.stdout.take().unwrap());
        let first = if sync { 15 } else { 10 };
        for i in 0..5u64 {
            // Nothing is acknowledged before its line is fed.
            assert!(acks.try_recv().is_err());
            stdin.write_all(event(i).as_bytes()).unwrap();
            stdin.flush().unwrap();
            let ack = acks.recv_timeout(PATIENCE).expect("an acknowledgement");
            assert_eq!(ack, (first + i).to_string());
            // The event is in the log once acknowledged: another process reads it.
            let status = cli.run(&["status", "s", "--json"]);
            let status = parse_json(status.ok()).unwrap();
            assert_eq!(status.get("events").unwrap().as_u64(), Some(first + i + 1));
        }
        drop(stdin);
        let status = child.0.wait().unwrap();
        assert!(status.success());
    }
    // Given seq and time are kept; a wrong seq is refused with its line, earlier lines stay.
    let lines = "{\"type\":\"x/y\",\"seq\":20,\"time\":7,\"data\":{}}\n\
                 {\"type\":\"x/y\",\"seq\":99,\"data\":{}}\n\
                 {\"type\":\"x/y\",\"data\":{}}\n";
    let run = cli.run_with(&["append", "s", "--ack"], lines.as_bytes());
    let err = run.fails(1);
    assert_eq!(run.stdout, "20\n");
    assert!(err.starts_with("error: line 2: "), "{err}");
    assert!(err.contains("seq"), "{err}");
    assert!(err.contains("stays appended (seq 20)"), "{err}");
    let last = cli.run(&["show", "s", "--from", "20", "--json"]);
    assert_eq!(
        last.ok(),
        "{\"type\":\"x/y\",\"seq\":20,\"time\":7,\"data\":{}}\n"
    );
    // A lifecycle violation and a blank line are refused the same way.
    let run = cli.run_with(
        &["append", "s"],
        b"{\"type\":\"step/end\",\"data\":{\"turn\":1,\"step\":1}}\n",
    );
    assert!(run
        .fails(1)
        .contains("line 1: step/end at seq 21 refused by the rule"));
    let run = cli.run_with(&["append", "s"], b"{\"type\":\"x/y\",\"data\":{}}\n\n");
    assert!(
        run.fails(1).contains("line 2: blank line"),
        "{}",
        run.stderr
    );
}

/// `tail -f s -n 1` of the example fix-typo imported as `s`: the child, its stdout lines and
/// the first one (the last event, seq 9).
fn tail_fix_typo(cli: &Cli) -> (Reap, Receiver<String>, String) {
    cli.import_example("fix-typo", &["--id", "s"]);
    let mut child = Reap(
        cli.command(&["tail", "-f", "s", "-n", "1"])
            .spawn()
            .unwrap(),
    );
    let lines = lines_of(child.0.stdout.take().unwrap());
    let first = lines.recv_timeout(PATIENCE).expect("the last event");
    assert!(first.trim_start().starts_with("9 "), "{first}");
    (child, lines, first)
}

#[test]
fn tail_follow_prints_what_another_process_appends() {
    let cli = Cli::new();
    let (mut child, lines, first) = tail_fix_typo(&cli);
    assert!(first.contains("turn/end"), "{first}");
    for i in 0..3u64 {
        cli.run_with(&["append", "s"], event(i).as_bytes()).ok();
        let appended = Instant::now();
        let line = lines.recv_timeout(PATIENCE).expect("the appended event");
        // The promise is "within a second"; PATIENCE only keeps a stalled run from hanging.
        assert!(
            appended.elapsed() < Duration::from_secs(1),
            "shown after {:?}",
            appended.elapsed()
        );
        assert!(
            line.trim_start().starts_with(&format!("{} ", 10 + i)),
            "{line}"
        );
        assert!(line.contains(&format!("message {i}")), "{line}");
        assert!(!line.contains('\x1b'));
    }
    assert!(child.0.try_wait().unwrap().is_none(), "still following");
}

/// A running `tail -f` went silent once `purge` or `redact` rewrote the session (the new files
/// are swapped in under its name; it watched the old ones): it showed neither the
/// `audit/purge` nor anything appended after. It now notes the rewrite and follows the new
/// files.
#[test]
fn tail_follow_goes_on_after_a_purge_rewrites_the_session() {
    let cli = Cli::new();
    let (mut child, lines, _) = tail_fix_typo(&cli);
    cli.run(&["purge", "s", "--seq", "2..2"]).ok();
    let audit = lines
        .recv_timeout(PATIENCE)
        .expect("the purge's audit event");
    assert!(audit.trim_start().starts_with("10 "), "{audit}");
    assert!(audit.contains("audit/purge"), "{audit}");
    cli.run_with(&["append", "s"], event(0).as_bytes()).ok();
    let line = lines.recv_timeout(PATIENCE).expect("the appended event");
    assert!(line.trim_start().starts_with("11 "), "{line}");
    assert!(line.contains("message 0"), "{line}");
    assert!(child.0.try_wait().unwrap().is_none(), "still following");
}

#[test]
fn verify_passes_clean_sessions_and_names_damage() {
    // Small segments, so that the session has sealed segments and an active one.
    let cli = Cli::with_config("segment_size = \"16KiB\"\n");
    cli.import_example("tools-and-approvals", &["--id", "t"]);
    cli.import_example("fix-typo", &["--id", "f"]);
    let run = cli.run(&["verify", "t"]);
    assert!(run.ok().starts_with("ok t: 330 event(s)"), "{}", run.stdout);
    assert!(cli
        .run(&["verify", "--all"])
        .ok()
        .contains("2 session(s) checked"));
    let segs = segments(&cli.session_dir("t"));
    assert!(segs.len() > 2, "{segs:?}");

    // A flipped byte in the payload of the first record of a sealed segment.
    flip(&segs[0], 64 + 16 + 8);
    let run = cli.run(&["verify", "t"]);
    run.fails(1);
    let name = segs[0].file_name().unwrap().to_str().unwrap();
    assert!(run.stdout.starts_with("FAILED t:"), "{}", run.stdout);
    assert!(run.stdout.contains(name), "{}", run.stdout);
    assert!(
        run.stdout.contains("byte offset 64 (seq 0)"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("checksum mismatch"), "{}", run.stdout);
    let run = cli.run(&["verify", "--all"]);
    assert!(run.fails(1).contains("1 of 2"), "{}", run.stderr);
    flip(&segs[0], 64 + 16 + 8);
    cli.run(&["verify", "t"]).ok();

    // And in the active segment: the payload of its last record (sealed ones before it intact).
    let last = segs.last().unwrap();
    let bytes = std::fs::read(last).unwrap();
    let end = bytes.iter().rposition(|&b| b != 0).unwrap();
    flip(last, end - 2);
    let run = cli.run(&["verify", "t"]);
    run.fails(1);
    let name = last.file_name().unwrap().to_str().unwrap();
    assert!(run.stdout.contains(name), "{}", run.stdout);
    assert!(run.stdout.contains("(seq 329)"), "{}", run.stdout);
    // Nothing was changed by verifying.
    assert_eq!(std::fs::read(last).unwrap()[end - 2], bytes[end - 2] ^ 0x20);

    // Reading commands report the damage; recover refuses it without --salvage.
    let run = cli.run(&["recover", "t"]);
    assert!(run.fails(1).contains("--salvage"), "{}", run.stderr);
    let run = cli.run(&["recover", "t", "--salvage"]);
    let out = run.ok();
    assert!(out.contains("cut: damage in"), "{out}");
    assert!(out.contains("from seq 329 on"), "{out}");
    assert!(out.contains("329 event(s) now"), "{out}");
    assert!(cli.session_dir("t").join("damaged").is_dir());
    assert!(cli
        .run(&["verify", "t"])
        .ok()
        .starts_with("ok t: 329 event(s)"));
    // Recovering a sound session cuts nothing.
    assert!(cli.run(&["recover", "f"]).ok().contains("nothing was cut"));
}

#[test]
fn verify_works_while_a_writer_appends() {
    let cli = Cli::new();
    cli.import_example("fix-typo", &["--id", "s"]);
    let store = Store::open(cli.store()).unwrap();
    let writer = store.open_session("s").unwrap();
    let before = std::fs::read(&segments(&cli.session_dir("s"))[0]).unwrap();
    let run = cli.run(&["verify", "s"]);
    assert!(run.ok().starts_with("ok s: 10 event(s)"), "{}", run.stdout);
    assert_eq!(
        std::fs::read(&segments(&cli.session_dir("s"))[0]).unwrap(),
        before
    );
    drop(writer);
}

#[test]
fn recover_cuts_the_torn_tail_a_killed_writer_left() {
    use std::os::unix::fs::FileExt;

    let cli = Cli::new();
    cli.import_example("fix-typo", &["--id", "s"]);
    // A writer killed (SIGKILL) after two acknowledged appends.
    let mut child = Reap(
        cli.command(&["append", "s", "--ack"])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut stdin = child.0.stdin.take().unwrap();
    let acks = lines_of(child.0.stdout.take().unwrap());
    for i in 0..2u64 {
        stdin.write_all(event(i).as_bytes()).unwrap();
        stdin.flush().unwrap();
        assert_eq!(acks.recv_timeout(PATIENCE).unwrap(), (10 + i).to_string());
    }
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    // And half a record after the last one, as a crash in the middle of an append leaves it.
    let dir = cli.session_dir("s");
    let report = agentlog::log::verify(&dir).unwrap();
    assert_eq!(report.events, 12);
    let last = report.segments.last().unwrap();
    let seg = std::fs::OpenOptions::new()
        .write(true)
        .open(&last.path)
        .unwrap();
    seg.write_all_at(&[0xAB; 16], last.end).unwrap();
    drop(seg);

    // verify notes it without failing; recover cuts it and says where.
    let run = cli.run(&["verify", "s"]);
    assert!(
        run.ok().contains("note: incomplete last record"),
        "{}",
        run.stdout
    );
    let run = cli.run(&["recover", "s"]);
    let out = run.ok();
    assert!(out.contains("cut a torn tail"), "{out}");
    assert!(out.contains("cut: torn tail in"), "{out}");
    assert!(
        out.contains(&format!("at byte offset {}", last.end)),
        "{out}"
    );
    assert!(out.contains("from seq 12 on, 16 byte(s)"), "{out}");
    assert!(out.contains("12 event(s) now"), "{out}");
    // Every acknowledged event survived; the session is clean again.
    let run = cli.run(&["verify", "s"]);
    assert!(!run.ok().contains("note:"), "{}", run.stdout);
    let status = parse_json(cli.run(&["status", "s", "--json"]).ok()).unwrap();
    assert_eq!(status.get("events").unwrap().as_u64(), Some(12));
    assert!(cli.run(&["recover", "s"]).ok().contains("nothing was cut"));
}
