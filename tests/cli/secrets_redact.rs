//! Redaction at append through every input path (docs/events.md §9): `Session::append*` of a
//! store with `[redact]`, `Store::import` (header too), the Codex and Claude Code importers, and
//! the command line's `append` and `import`. After each, no byte of a planted secret is in any
//! file of the store, each event records what fired, and the redacted JSONL round-trips.

use crate::cli_common;
use testkit::secrets as secrets_common;

use std::path::PathBuf;

use agentlog::event::{parse_draft_line, Value};
use agentlog::import::{import_paths, Options};
use agentlog::redact::REDACTED_MEMBER;
use agentlog::store::{ImportOptions, NewSession, Store};
use cli_common::Cli;
use secrets_common::{grep_r, plant, Planted, Rng, RULES};

const CONFIG: &str = "[redact]\nrules = [\"credentials\", \"pii\"]\n";

fn planted(seed: u64) -> Vec<Planted> {
    let mut rng = Rng::new(seed);
    RULES.iter().map(|r| plant(r, &mut rng)).collect()
}

fn store_with_config(dir: &std::path::Path, toml: &str) -> Store {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("agentlog.toml"), toml).unwrap();
    Store::open(dir).unwrap()
}

#[track_caller]
fn assert_gone(root: &std::path::Path, secrets: &[Planted]) {
    for p in secrets {
        let hits = grep_r(root, &p.secret);
        assert!(
            hits.is_empty(),
            "{} secret {:?} still in {hits:?}",
            p.rule,
            p.secret
        );
    }
}

/// A session of one turn whose user message, tool call arguments, tool result and error each
/// carry planted secrets, as draft lines.
fn lines(secrets: &[Planted]) -> Vec<String> {
    let s = |i: usize| Value::String(secrets[i % secrets.len()].text.clone()).to_string();
    let args = Value::String(format!("{{\"cmd\":{}}}", s(1))).to_string();
    vec![
        r#"{"type":"turn/start","data":{"turn":1}}"#.to_string(),
        format!(
            r#"{{"type":"user/message","data":{{"role":"user","content":[{{"type":"text","text":{}}},{{"type":"text","text":{}}}]}}}}"#,
            s(0),
            s(2)
        ),
        r#"{"type":"step/start","data":{"turn":1,"step":1}}"#.to_string(),
        format!(
            r#"{{"type":"assistant/message","data":{{"turn":1,"step":1,"message":{{"role":"assistant","content":[{{"type":"text","text":{}}},{{"type":"tool_use","id":"c1","name":"sh","input":{{"env":[{}]}}}}]}}}}}}"#,
            s(3),
            s(4)
        ),
        format!(
            r#"{{"type":"tool/call","data":{{"turn":1,"step":1,"callId":"c1","name":"sh","arguments":{args}}}}}"#
        ),
        format!(
            r#"{{"type":"tool/result","data":{{"turn":1,"step":1,"message":{{"role":"tool","toolName":"sh","content":{},"isError":true}},"callId":"c1","error":{{"message":{}}},"meta":{{"stdout":{}}}}}}}"#,
            s(5),
            s(6),
            s(7)
        ),
        format!(
            r#"{{"type":"error","data":{{"message":{},"stack":{}}}}}"#,
            s(8),
            s(9)
        ),
        format!(
            r#"{{"type":"system/message","data":{{"role":"system","content":[{{"type":"text","text":{}}},{{"type":"reasoning","text":{}}}]}}}}"#,
            s(10),
            s(11)
        ),
        format!(
            r#"{{"type":"x/custom","data":{{"a":{},"b":[{},{}]}}}}"#,
            s(12),
            s(13),
            s(14)
        ),
        format!(
            r#"{{"type":"sandbox/event","data":{{"kind":"start","detail":{}}}}}"#,
            s(15)
        ),
        r#"{"type":"step/end","data":{"turn":1,"step":1}}"#.to_string(),
        r#"{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}"#.to_string(),
    ]
}

#[test]
fn library_appends_are_redacted_before_disk() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("store");
    let secrets = planted(1);
    let store = store_with_config(&root, CONFIG);
    let title = secrets[0].text.clone();
    let s = store
        .create(
            NewSession::default()
                .id("s1")
                .title(title)
                .cwd(secrets[1].text.clone()),
        )
        .unwrap();
    let ls = lines(&secrets);
    // One by one, and the rest as a batch.
    for l in &ls[..4] {
        s.append_draft(parse_draft_line(l).unwrap()).unwrap();
    }
    s.append_drafts(
        ls[4..]
            .iter()
            .map(|l| parse_draft_line(l).unwrap())
            .collect(),
    )
    .unwrap();
    s.close().unwrap();
    assert_gone(&root, &secrets);
    let r = store.open_reader("s1").unwrap();
    let mut recorded = 0;
    for seq in 0..r.len() {
        let e = r.get_owned(seq).unwrap();
        if let Some(Value::Array(list)) = e.extra.get(REDACTED_MEMBER) {
            recorded += list.len();
        }
    }
    assert!(recorded >= RULES.len(), "{recorded}");
    assert!(r.meta().title.present().unwrap().contains("[REDACTED:"));
    // Every rule fired somewhere.
    let mut jsonl = Vec::new();
    r.export(&mut jsonl, agentlog::session::HeaderLine::Include, |_| {})
        .unwrap();
    let text = String::from_utf8(jsonl.clone()).unwrap();
    for rule in RULES {
        assert!(text.contains(&format!("[REDACTED:{rule}]")), "{rule}");
    }
    // Canonical JSONL round trip: into a store without redaction and out again, byte for byte.
    let plain = Store::open(tmp.path().join("plain")).unwrap();
    plain
        .import(&jsonl[..], ImportOptions::default(), |_| {})
        .unwrap();
    let mut again = Vec::new();
    plain
        .open_reader("s1")
        .unwrap()
        .export(&mut again, agentlog::session::HeaderLine::Include, |_| {})
        .unwrap();
    assert_eq!(String::from_utf8(again).unwrap(), text);
}

#[test]
fn off_by_default_stores_everything_verbatim() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path()).unwrap();
    let secrets = planted(2);
    let s = store.create(NewSession::default().id("s")).unwrap();
    for l in lines(&secrets) {
        s.append_draft(parse_draft_line(&l).unwrap()).unwrap();
    }
    s.close().unwrap();
    // The secrets of the events are there (lossless default).
    assert!(!grep_r(tmp.path(), &secrets[0].secret).is_empty());
}

#[test]
fn import_redacts_events_and_header() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("store");
    let secrets = planted(3);
    let store = store_with_config(
        &root,
        "[redact]\nrules = [\"credentials\", \"pii\"]\nmode = \"hash\"\n",
    );
    let mut input = format!(
        "{{\"type\":\"session\",\"version\":1,\"id\":\"imp\",\"createdAt\":1,\"title\":{},\"x-note\":{}}}\n",
        Value::String(secrets[2].text.clone()),
        Value::String(secrets[3].text.clone())
    );
    for (i, l) in lines(&secrets).iter().enumerate() {
        // Import needs seq and time.
        let l = l.replacen(
            "{\"type\":",
            &format!("{{\"seq\":{i},\"time\":{i},\"type\":"),
            1,
        );
        input.push_str(&l);
        input.push('\n');
    }
    store
        .import(input.as_bytes(), ImportOptions::default(), |_| {})
        .unwrap();
    assert_gone(&root, &secrets);
    let key = root.join("redact.key");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let r = store.open_reader("imp").unwrap();
    let title = r.meta().title.present().unwrap().clone();
    assert!(title.contains("[HASH:"), "{title}");
    let mut out = Vec::new();
    r.export(&mut out, agentlog::session::HeaderLine::Include, |_| {})
        .unwrap();
    let header = String::from_utf8(out).unwrap();
    let header = header.lines().next().unwrap();
    assert!(header.contains(r#""x-redacted":[{"rule":"#), "{header}");
}

#[test]
fn the_importers_redact() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("store");
    let secrets = planted(4);
    let store = store_with_config(&root, CONFIG);
    let data = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/import"));
    let mut files = Vec::new();
    // Every string of the source lines gets a planted secret beside it: the message texts,
    // commands and paths the importers turn into events, and what they keep of the source.
    for (i, sample) in [
        "claude-code/marot__spotter__short.jsonl",
        "codex/yoavf__ai-sessions__codex-pomodor-timer.jsonl",
    ]
    .iter()
    .enumerate()
    {
        let text = std::fs::read_to_string(data.join(sample)).unwrap();
        let mut k = 0;
        let mut out = String::new();
        for line in text.lines() {
            // After each `"text":"` / `"cwd":"` / `"message":"`, a secret and a space.
            let mut l = line.to_string();
            for key in ["\"text\":\"", "\"cwd\":\"", "\"content\":\""] {
                if let Some(pos) = l.find(key) {
                    let p = &secrets[k % secrets.len()];
                    k += 1;
                    let escaped = Value::String(p.text.clone()).to_string();
                    let inner = &escaped[1..escaped.len() - 1];
                    l.insert_str(pos + key.len(), &format!("{inner} "));
                }
            }
            out.push_str(&l);
            out.push('\n');
        }
        assert!(k > 10, "{sample}: {k}");
        let f = tmp.path().join(format!("sample{i}.jsonl"));
        std::fs::write(&f, out).unwrap();
        files.push(f);
    }
    let summary = import_paths(
        &store,
        &files,
        &Options {
            format: None,
            workers: None,
            keep_open: false,
        },
        |_, _| {},
    )
    .unwrap();
    assert_eq!(summary.created.len(), 2, "{summary:?}");
    assert_gone(&root, &secrets);
    for id in &summary.created {
        let r = store.open_reader(id).unwrap();
        let n = (0..r.len())
            .filter(|&s| r.get_owned(s).unwrap().extra.contains_key(REDACTED_MEMBER))
            .count();
        assert!(n > 0, "{id}");
    }
}

#[test]
fn cli_append_and_import_redact() {
    let cli = Cli::with_config(CONFIG);
    let secrets = planted(5);
    cli.run(&["create", "--id", "a"]).ok();
    let input = lines(&secrets).join("\n") + "\n";
    cli.run_with(&["append", "a"], input.as_bytes()).ok();
    let exported = cli.run(&["export", "a"]).ok().to_string();
    let f = cli.dir.path().join("a.jsonl");
    // The export holds no secret; import a file that does (with seqs and times).
    let mut raw = String::new();
    for (i, l) in lines(&secrets).iter().enumerate() {
        raw.push_str(&l.replacen(
            "{\"type\":",
            &format!("{{\"seq\":{i},\"time\":{i},\"type\":"),
            1,
        ));
        raw.push('\n');
    }
    std::fs::write(&f, raw).unwrap();
    cli.run(&["import", f.to_str().unwrap(), "--id", "b"]).ok();
    std::fs::remove_file(&f).unwrap();
    assert_gone(&cli.store(), &secrets);
    assert!(exported.contains("[REDACTED:"));
    // Both are clean for `secrets`.
    cli.run(&["secrets", "a", "b"]).ok();
}
