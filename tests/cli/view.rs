//! `agentlog view` without a browser: where the page is written, that its embedded events are
//! the session's canonical JSON (docs/events.md §4), its data elements, `--open`, and errors.

use crate::browser_common;
use crate::cli_common;

use std::path::Path;

use cli_common::{example, Cli, BIN, EXAMPLES};
use serde_json::Value;

/// The text of `<script type="application/json" id="ID">` in `html`.
fn element<'a>(html: &'a str, id: &str) -> &'a str {
    let open = format!("<script type=\"application/json\" id=\"{id}\">");
    let start = html
        .find(&open)
        .unwrap_or_else(|| panic!("no element {id}"))
        + open.len();
    let len = html[start..].find("</script>").unwrap();
    &html[start..start + len]
}

#[test]
fn the_page_embeds_the_exported_events_and_the_stats() {
    let cli = Cli::new();
    for name in EXAMPLES {
        let id = cli.import_example(name, &[]);
        let out = cli.dir.path().join(format!("{name}.html"));
        let said = cli.run(&["view", &id, "-o", out.to_str().unwrap()]);
        assert!(
            said.ok().starts_with(&format!("wrote {}", out.display())),
            "{}",
            said.stdout
        );
        let html = std::fs::read_to_string(&out).unwrap();
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(
            html.contains("default-src 'none'"),
            "the page forbids every request"
        );
        let events = element(&html, "agentlog-events");
        assert!(
            !events.contains('<'),
            "{name}: a raw '<' inside the script element"
        );
        let embedded: Vec<Value> = match browser_common::parse_line(events) {
            Value::Array(a) => a,
            other => panic!("{name}: not an array: {other}"),
        };
        let exported = cli.run(&["export", &id]);
        let lines: Vec<&str> = exported.ok().lines().collect();
        assert_eq!(embedded.len(), lines.len(), "{name}");
        // Each embedded event is its canonical line (only '<' written \u003c).
        for (text, line) in events
            .trim_matches(['[', ']', '\n'])
            .split(",\n")
            .zip(&lines)
        {
            assert_eq!(text.replace("\\u003c", "<"), *line, "{name}");
        }
        for (v, line) in embedded.iter().zip(&lines) {
            assert_eq!(v, &browser_common::parse_line(line));
        }
        let stats: Value = serde_json::from_str(element(&html, "agentlog-stats")).unwrap();
        let want: Value = serde_json::from_str(cli.run(&["stats", &id, "--json"]).ok()).unwrap();
        assert_eq!(stats, want);
        let header: Value = serde_json::from_str(element(&html, "agentlog-session")).unwrap();
        assert_eq!(header["id"], Value::String(id.clone()));
        let pairs: Vec<(u64, u64)> =
            serde_json::from_str(element(&html, "agentlog-pairs")).unwrap();
        let results = embedded
            .iter()
            .filter(|e| e["type"] == "tool/result")
            .count();
        assert_eq!(
            pairs.len(),
            results,
            "{name}: every result paired with its call"
        );
        for (call, result) in pairs {
            assert_eq!(embedded[call as usize]["type"], "tool/call");
            assert_eq!(embedded[result as usize]["type"], "tool/result");
            assert!(call < result);
        }
    }
}

#[test]
fn the_default_file_is_the_session_id_in_the_current_directory() {
    let cli = Cli::new();
    let id = cli.import_example("fix-typo", &[]);
    let cwd = tempfile::tempdir().unwrap();
    let run = cli_common::finish(
        cli.command(&["view", &id])
            .current_dir(cwd.path())
            .output()
            .unwrap(),
    );
    run.ok();
    let page = cwd.path().join(format!("{id}.html"));
    assert!(page.is_file(), "{}", run.stdout);
    let names: Vec<_> = std::fs::read_dir(cwd.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "no temporary file left: {names:?}");
    // A session directory given as a path works too.
    let out = cwd.path().join("by-path.html");
    let dir = cli.session_dir(&id);
    cli.run(&["view", dir.to_str().unwrap(), "-o", out.to_str().unwrap()])
        .ok();
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&page).unwrap());
}

#[test]
fn open_starts_the_browser_named_by_browser() {
    let cli = Cli::new();
    let id = cli.import_example("fix-typo", &[]);
    let record = cli.dir.path().join("opened.txt");
    let script = cli.dir.path().join("browser.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nprintf '%s' \"$1\" > {}.tmp && mv {0}.tmp {0}\n",
            record.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = cli.dir.path().join("page.html");
    let run = cli_common::finish(
        cli.command(&["view", &id, "-o", out.to_str().unwrap(), "--open"])
            .env("BROWSER", &script)
            .output()
            .unwrap(),
    );
    run.ok();
    // The browser is not waited for.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !record.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the browser never ran"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let opened = std::fs::read_to_string(&record).unwrap();
    assert_eq!(Path::new(&opened), out.canonicalize().unwrap());
}

#[test]
fn errors_name_what_is_wrong() {
    let cli = Cli::new();
    let id = cli.import_example("fix-typo", &[]);
    let dir = cli.dir.path().to_str().unwrap().to_string();
    let err = cli.run(&["view", &id, "-o", &dir]).fails(1).to_string();
    assert!(err.contains("is a directory"), "{err}");
    let err = cli.run(&["view", "no-such-session"]).fails(1).to_string();
    assert!(err.contains("no session"), "{err}");
    let missing = cli.dir.path().join("missing/dir/page.html");
    let err = cli
        .run(&["view", &id, "-o", missing.to_str().unwrap()])
        .fails(1)
        .to_string();
    assert!(err.contains("nothing was written"), "{err}");
    let help = std::process::Command::new(BIN)
        .args(["view", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    for hook in [
        "id=\"seq-SEQ\"",
        "data-turn",
        "agentlog-events",
        "--open",
        "docs/viewer.md",
    ] {
        assert!(help.contains(hook), "--help names {hook}");
    }
    let _ = example("fix-typo.jsonl");
}

/// `-o` naming a device or a named pipe writes into it: the atomic rename of a regular file
/// would replace it with a file (as root, `-o /dev/null` replaced the system's /dev/null).
#[test]
fn output_to_a_named_pipe_writes_into_it() {
    let cli = Cli::new();
    let id = cli.import_example("fix-typo", &[]);
    let fifo = cli.dir.path().join("pipe");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(&fifo).unwrap())
    };
    cli.run(&["view", &id, "-o", fifo.to_str().unwrap()]).ok();
    // Checked first: a pipe replaced by a file leaves the reader waiting for a writer.
    let kind = std::fs::symlink_metadata(&fifo).unwrap().file_type();
    assert!(
        std::os::unix::fs::FileTypeExt::is_fifo(&kind),
        "still a named pipe"
    );
    let page = String::from_utf8(reader.join().unwrap()).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>") && page.ends_with("</html>\n"));
}

/// A `callId` used twice in a turn: each result answers the earliest unanswered call with that
/// id (docs/events.md §5), in the page's pairs and in `show`'s `↳` lines.
#[test]
fn a_repeated_call_id_pairs_each_result_with_its_own_call() {
    let cli = Cli::new();
    let lines = [
        r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}"#,
        r#"{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}"#,
        r#"{"type":"tool/call","seq":2,"time":2,"data":{"turn":1,"step":1,"callId":"c","name":"bash","arguments":"{}"}}"#,
        r#"{"type":"tool/result","seq":3,"time":3,"data":{"turn":1,"step":1,"message":{"role":"tool","toolName":"bash","content":"x","isError":false},"callId":"c"}}"#,
        r#"{"type":"step/end","seq":4,"time":4,"data":{"turn":1,"step":1}}"#,
        r#"{"type":"step/start","seq":5,"time":5,"data":{"turn":1,"step":2}}"#,
        r#"{"type":"tool/call","seq":6,"time":6,"data":{"turn":1,"step":2,"callId":"c","name":"grep","arguments":"{}"}}"#,
        r#"{"type":"tool/result","seq":7,"time":7,"data":{"turn":1,"step":2,"message":{"role":"tool","toolName":"grep","content":"y","isError":false},"callId":"c"}}"#,
        r#"{"type":"step/end","seq":8,"time":8,"data":{"turn":1,"step":2}}"#,
        r#"{"type":"turn/end","seq":9,"time":9,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
    ];
    let src = cli.dir.path().join("repeated.jsonl");
    std::fs::write(&src, lines.join("\n") + "\n").unwrap();
    let id = cli
        .run(&["import", src.to_str().unwrap()])
        .ok()
        .trim()
        .to_string();
    let out = cli.dir.path().join("repeated.html");
    cli.run(&["view", &id, "-o", out.to_str().unwrap()]).ok();
    let html = std::fs::read_to_string(&out).unwrap();
    assert_eq!(element(&html, "agentlog-pairs"), "[[2,3],[6,7]]");
    let show = cli.run(&["show", &id]);
    let result7 = show
        .ok()
        .lines()
        .find(|l| l.trim_start().starts_with("7 "))
        .unwrap();
    assert!(result7.contains("↳ c grep"), "{result7}");
}

/// `view -o -` wrote a file named `-` (where `export -o -` means standard output), and
/// `view -o /dev/stdout` put its "wrote …" line after the page's `</html>`. `-o -` now writes
/// the page to standard output, and the line goes to stderr when the output is not a file.
#[test]
fn the_page_goes_to_standard_output_alone() {
    let cli = Cli::new();
    let id = cli.import_example("fix-typo", &[]);
    let dash = cli.run(&["view", &id, "-o", "-"]);
    let page = dash.ok();
    assert!(page.starts_with("<!DOCTYPE html>"), "{page}");
    assert!(page.trim_end().ends_with("</html>"), "the page alone");
    assert!(!cli.dir.path().join("-").exists());
    let device = cli.run(&["view", &id, "-o", "/dev/stdout"]);
    assert!(
        device.ok().trim_end().ends_with("</html>"),
        "the page alone"
    );
    assert!(
        device.stderr.starts_with("wrote /dev/stdout"),
        "{}",
        device.stderr
    );
    assert!(cli
        .run(&["view", &id, "-o", "-", "--open"])
        .fails(1)
        .contains("--open"));
}

/// `view -o /dev/stdout` (and `export -o /dev/stdout`) with standard output redirected to a
/// file renamed a temporary file over the link `/dev/stdout` itself (it leads to a regular file
/// then): run as root, it replaced the machine's `/dev/stdout`. A link into `/proc` is now
/// written through, in place, and another link has its target replaced, not the link. (A link
/// in the test's folder stands for `/dev/stdout`.)
#[test]
fn links_are_written_through_never_replaced() {
    use std::os::unix::fs::symlink;
    let cli = Cli::new();
    let id = cli.import_example("fix-typo", &[]);
    let dir = cli.dir.path();
    let fd1 = dir.join("fd1");
    symlink("/proc/self/fd/1", &fd1).unwrap();
    for args in [
        vec!["view", id.as_str(), "-o", fd1.to_str().unwrap()],
        vec!["export", id.as_str(), "-o", fd1.to_str().unwrap()],
    ] {
        let redirected = dir.join("redirected");
        let out = cli
            .command(&args)
            .stdout(std::fs::File::create(&redirected).unwrap())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let link = std::fs::symlink_metadata(&fd1).unwrap();
        assert!(link.file_type().is_symlink(), "{args:?} replaced the link");
        let written = std::fs::read_to_string(&redirected).unwrap();
        assert!(
            written.starts_with("<!DOCTYPE html>") || written.starts_with("{\"type\""),
            "{args:?}: {written}"
        );
    }
    // A link elsewhere: its target gets the page, the link stays.
    let target = dir.join("real.html");
    let link = dir.join("page.html");
    symlink(&target, &link).unwrap();
    cli.run(&["view", &id, "-o", link.to_str().unwrap()]).ok();
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(std::fs::read_to_string(&target)
        .unwrap()
        .starts_with("<!DOCTYPE html>"));
}
