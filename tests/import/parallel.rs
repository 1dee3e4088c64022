//! `import --from auto --jobs N`: files imported side by side give the same store as one at a
//! time (`--jobs 1`), event for event, with the same summary, whatever order the workers finish
//! in; a subagent file met before its main file still links to it.

use std::path::{Path, PathBuf};
use std::process::Command;

use agentlog::event::Event;
use agentlog::import::export_source;
use agentlog::store::Store;
use testkit::import_tree::{make_tree, Which};

fn write(path: &Path, lines: &[&str]) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(path, text).unwrap();
}

/// A tree of copies of the real samples, a Claude Code main file with a subagent file (which the
/// walk meets first: `s9/` sorts before `s9.jsonl`) and a file whose last line is torn.
fn tree(root: &Path) -> PathBuf {
    let tree = root.join("tree");
    let (files, _) = make_tree(&tree, 2, Which::Both);
    assert_eq!(files, 12);
    let project = tree.join("projects/-home-x");
    write(
        &project.join("s9/subagents/agent-def.jsonl"),
        &[
            r#"{"parentUuid":null,"isSidechain":true,"agentId":"def","type":"user","message":{"role":"user","content":"find files"},"uuid":"x1","timestamp":"2025-06-10T12:00:02.000Z","sessionId":"s9"}"#,
            r#"{"parentUuid":"x1","isSidechain":true,"agentId":"def","type":"assistant","message":{"id":"mx","role":"assistant","model":"c","content":[{"type":"tool_use","id":"tx","name":"Grep","input":{"pattern":"a"}}]},"uuid":"x2","timestamp":"2025-06-10T12:00:03.000Z","sessionId":"s9"}"#,
            r#"{"parentUuid":"x2","isSidechain":true,"agentId":"def","type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"tx","content":"a.txt"}]},"uuid":"x3","timestamp":"2025-06-10T12:00:04.000Z","sessionId":"s9"}"#,
        ],
    );
    write(
        &project.join("s9.jsonl"),
        &[
            r#"{"parentUuid":null,"isSidechain":false,"type":"user","message":{"role":"user","content":"go"},"uuid":"u1","timestamp":"2025-06-10T12:00:00.000Z","sessionId":"s9"}"#,
            r#"{"parentUuid":"u1","isSidechain":false,"type":"assistant","message":{"id":"m1","role":"assistant","model":"c","content":[{"type":"text","text":"ok"}]},"uuid":"a1","timestamp":"2025-06-10T12:00:01.000Z","sessionId":"s9"}"#,
        ],
    );
    let torn = project.join("s8.jsonl");
    write(
        &torn,
        &[
            r#"{"parentUuid":null,"isSidechain":false,"type":"user","message":{"role":"user","content":"hi"},"uuid":"u1","timestamp":"2025-06-10T12:00:00.000Z","sessionId":"s8"}"#,
        ],
    );
    let mut text = std::fs::read(&torn).unwrap();
    text.extend_from_slice(br#"{"parentUuid":"u1","isSidechain":false,"type":"assis"#);
    std::fs::write(&torn, text).unwrap();
    tree
}

/// Runs `agentlog --store STORE import --from auto --json --jobs N TREE`: its summary (stdout).
fn import(store: &Path, tree: &Path, jobs: usize) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_agentlog"))
        .arg("--store")
        .arg(store)
        .args(["import", "--from", "auto", "--json", "--jobs"])
        .arg(jobs.to_string())
        .arg(tree)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A session's events and the source file it exports.
fn contents(store: &Store, id: &str) -> (Vec<Event>, Vec<u8>) {
    let r = store.open_reader(id).unwrap();
    let events = (0..r.len()).map(|s| r.get_owned(s).unwrap()).collect();
    let mut source = Vec::new();
    // (A `-sidechains` session keeps no source lines: its main session exports them.)
    if !id.ends_with("-sidechains") {
        export_source(&r, &mut source).unwrap();
    }
    (events, source)
}

#[test]
fn a_parallel_import_equals_a_one_job_import_event_for_event() {
    let dir = tempfile::tempdir().unwrap();
    let tree = tree(dir.path());
    let (one, many) = (dir.path().join("one"), dir.path().join("many"));
    let summary_one = import(&one, &tree, 1);
    let summary_many = import(&many, &tree, 8);
    assert_eq!(summary_one, summary_many, "the summaries differ");
    // The summary names the torn line's file and line.
    assert!(
        summary_many.contains("s8.jsonl:2: the last line is incomplete"),
        "{summary_many}"
    );
    let (one, many) = (Store::open(&one).unwrap(), Store::open(&many).unwrap());
    let ids = |store: &Store| {
        let mut ids: Vec<String> = store.list().unwrap().into_iter().map(|s| s.id).collect();
        ids.sort();
        ids
    };
    let (ids, ids_many) = (ids(&one), ids(&many));
    assert_eq!(ids, ids_many);
    // One session a file (the 15 of the tree), and the sidechain sessions of those that have some.
    assert!(ids.len() >= 15, "{ids:?}");
    for id in &ids {
        let (a, b) = (contents(&one, id), contents(&many, id));
        assert!(!a.0.is_empty(), "{id} has no events");
        assert_eq!(a.0.len(), b.0.len(), "{id}: event counts differ");
        for (x, y) in a.0.iter().zip(&b.0) {
            assert_eq!(x, y, "{id}: event {} differs", x.seq);
        }
        assert!(a.1 == b.1, "{id}: the exported sources differ");
        assert_eq!(
            one.info(id).unwrap().parent_session,
            many.info(id).unwrap().parent_session,
            "{id}"
        );
    }
    // The subagent file, met before its main file, links to it in both stores.
    for store in [&one, &many] {
        let agent = store.info("claude-s9-agent-def").unwrap();
        assert_eq!(agent.parent_session.as_deref(), Some("claude-s9"));
        assert!(store.info("claude-s9").is_ok());
    }
}

/// Copies of one file in several folders of a tree (a backup beside the original) claim one
/// session: the first in walk order makes it and the others are refused, with the same
/// warnings whatever the number of workers. The refusals raced: with several workers, whichever
/// copy finished first won, and the warning said "exists already" or "was imported from another
/// file" depending on when the others looked.
#[test]
fn copies_of_one_file_make_one_session_the_same_way_whatever_the_workers() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    let sample = testkit::import_tree::samples_dir().join("codex");
    let first = std::fs::read_dir(&sample)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .min()
        .unwrap();
    let name = first.file_name().unwrap();
    for copy in ["a", "b", "c", "d", "e", "f"] {
        std::fs::create_dir_all(tree.join(copy)).unwrap();
        std::fs::copy(&first, tree.join(copy).join(name)).unwrap();
    }
    let run = |store: &Path, jobs: usize| {
        let out = Command::new(env!("CARGO_BIN_EXE_agentlog"))
            .arg("--store")
            .arg(store)
            .args(["import", "--from", "auto", "--json", "--jobs"])
            .arg(jobs.to_string())
            .arg(&tree)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "copies are refused");
        let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let warnings = summary["warnings"].to_string();
        // The store paths differ between the runs; the rest of the summary must not.
        warnings.replace(store.to_str().unwrap(), "STORE")
    };
    let one = run(&dir.path().join("one"), 1);
    // The first copy in walk order (a/) makes the session; each other one is refused once.
    let refused = format!("{}: not imported", name.to_str().unwrap());
    assert_eq!(one.matches(&refused).count(), 5, "{one}");
    assert_eq!(
        one.matches("was imported from another file").count(),
        5,
        "{one}"
    );
    assert!(!one.contains(&format!("/a/{refused}")), "{one}");
    for k in 0..4 {
        let many = run(&dir.path().join(format!("many{k}")), 8);
        assert_eq!(one, many, "run {k} with 8 workers");
        let store = Store::open(dir.path().join(format!("many{k}"))).unwrap();
        let ids: Vec<String> = store.list().unwrap().into_iter().map(|s| s.id).collect();
        assert_eq!(ids.len(), 1, "{ids:?}");
        let mut out = Vec::new();
        export_source(&store.open_reader(&ids[0]).unwrap(), &mut out).unwrap();
        assert!(out == std::fs::read(&first).unwrap());
    }
}

/// Two `import --from` runs of one tree at once (cron and a run by hand) both exited 1, each
/// reporting files "not imported: a session … exists already" that the other had just made,
/// although the store ended complete (QA pass of 2026-12-08). A run that finds the session made
/// meanwhile continues it from what the other imported; both succeed.
#[test]
fn two_imports_of_one_tree_at_once_both_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    make_tree(&tree, 10, Which::Both);
    for round in 0..3 {
        let store = dir.path().join(format!("store-{round}"));
        let run = || {
            Command::new(env!("CARGO_BIN_EXE_agentlog"))
                .arg("--store")
                .arg(&store)
                .args(["import", "--from", "auto"])
                .arg(&tree)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (a, b) = (run(), run());
        for out in [a.wait_with_output().unwrap(), b.wait_with_output().unwrap()] {
            assert!(
                out.status.success(),
                "round {round}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let again = import(&store, &tree, 4);
        assert!(again.contains("\"created\":[]"), "{again}");
    }
}
