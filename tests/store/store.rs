//! The store: import/export of the examples, derive, all-or-nothing import, ids, listing,
//! archive, delete and garbage collection, idle archiving, configuration, notices.

use testkit::project as project_common;

use std::path::PathBuf;
use std::time::Duration;

use agentlog::event::{parse_draft_line, parse_json};
use agentlog::session::{HeaderLine, SessionReader, SessionState};
use agentlog::store::{ImportOptions, NewSession, Store, StoreNotice};
use agentlog::Error;
use project_common::json_eq;

fn examples_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/sessions"))
}

fn import(store: &Store, bytes: &[u8], options: ImportOptions) -> agentlog::Result<String> {
    store.import(bytes, options, |_| {}).map(|r| r.id)
}

fn export(reader: &SessionReader, header: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let header = if header {
        HeaderLine::Include
    } else {
        HeaderLine::Omit
    };
    reader.export(&mut out, header, |_| {}).unwrap();
    out
}

#[test]
fn the_examples_import_export_and_derive_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    for name in ["fix-typo", "coding-session", "tools-and-approvals"] {
        let bytes = std::fs::read(examples_dir().join(format!("{name}.jsonl"))).unwrap();
        let id = import(&store, &bytes, ImportOptions::default()).unwrap();
        let reader = store.open_reader(&id).unwrap();
        let has_header = bytes.starts_with(br#"{"type":"session""#);
        assert_eq!(export(&reader, has_header), bytes, "{name}: export differs");
        let expected =
            std::fs::read_to_string(examples_dir().join(format!("{name}.messages.json"))).unwrap();
        let expected = parse_json(&expected).unwrap();
        let derived = reader.messages().unwrap().to_value();
        assert!(
            json_eq(&derived, &expected),
            "{name}: derive differs\n{derived}"
        );
        // The writer's incremental projection after opening agrees.
        let session = store.open_session(&id).unwrap();
        let report = session.open_report().clone();
        assert!(
            report.violations.is_empty(),
            "{name}: {:?}",
            report.violations
        );
        assert!(json_eq(&session.messages().to_value(), &expected), "{name}");
    }
    // The header gave the coding session its id and title.
    let info = store.info("sess-0001").unwrap();
    assert_eq!(info.title.as_deref(), Some("corpus session 1"));
    assert_eq!(info.created_at, 1_755_000_000_001);
}

#[test]
fn a_refused_import_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let good = std::fs::read(examples_dir().join("fix-typo.jsonl")).unwrap();
    let text = String::from_utf8(good.clone()).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    // A lifecycle violation in the middle: the step/end of a step that is not open.
    let bad_step = r#"{"type":"step/end","seq":8,"time":1755000000080,"data":{"turn":1,"step":7}}"#;
    lines[8] = bad_step;
    let bad = lines.join("\n") + "\n";
    let err = import(
        &store,
        bad.as_bytes(),
        ImportOptions {
            id: Some("x".into()),
            ..Default::default()
        },
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("line 9") && msg.contains("step/end closes the open step"),
        "{msg}"
    );
    // A syntax error.
    let err = import(
        &store,
        b"{\"type\":\"turn/start\"",
        ImportOptions {
            id: Some("y".into()),
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(matches!(err, Error::Parse(_)), "{err}");
    // A seq gap.
    let gap = text.replace(r#""seq":9"#, r#""seq":10"#);
    assert!(import(
        &store,
        gap.as_bytes(),
        ImportOptions {
            id: Some("z".into()),
            ..Default::default()
        }
    )
    .is_err());
    let sessions = dir.path().join("sessions");
    let left: Vec<_> = std::fs::read_dir(&sessions).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    assert!(store.list().unwrap().is_empty());
    // An id that exists is refused, and the existing session is untouched.
    let id = import(
        &store,
        &good,
        ImportOptions {
            id: Some("x".into()),
            ..Default::default()
        },
    )
    .unwrap();
    let err = import(
        &store,
        &good,
        ImportOptions {
            id: Some(id.clone()),
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(matches!(err, Error::Exists(_)), "{err}");
    assert_eq!(store.open_reader(&id).unwrap().len(), 10);
}

#[test]
fn ids_are_names_never_paths() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    for bad in [
        "../x",
        "/etc",
        "",
        ".",
        "..",
        "a/b",
        "a b",
        &"x".repeat(129),
    ] {
        assert!(
            matches!(
                store.create(NewSession::default().id(bad)),
                Err(Error::InvalidId(_))
            ),
            "{bad:?}"
        );
        assert!(
            matches!(store.open_reader(bad), Err(Error::InvalidId(_))),
            "{bad:?}"
        );
        let good = std::fs::read(examples_dir().join("fix-typo.jsonl")).unwrap();
        assert!(matches!(
            import(
                &store,
                &good,
                ImportOptions {
                    id: Some(bad.into()),
                    ..Default::default()
                }
            ),
            Err(Error::InvalidId(_))
        ));
    }
    assert!(matches!(
        store.open_reader("missing"),
        Err(Error::NotFound(_))
    ));
    // New ids are unique and sort by creation time.
    let ids: Vec<String> = (0..20)
        .map(|_| store.create(NewSession::default()).unwrap().id())
        .collect();
    let mut sorted = ids.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted, ids);
    let listed: Vec<String> = store.list().unwrap().into_iter().map(|i| i.id).collect();
    assert_eq!(listed, ids);
}

#[test]
fn archive_unarchive_delete_and_gc() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let rx = store.subscribe();
    let s = store
        .create(NewSession::default().id("a").title("first"))
        .unwrap();
    s.append_draft(parse_draft_line(r#"{"type":"turn/start","data":{"turn":1}}"#).unwrap())
        .unwrap();
    // Archiving needs the writer gone.
    assert!(matches!(
        store.archive("a"),
        Err(Error::Log(agentlog::log::Error::Locked { .. }))
    ));
    drop(s);
    store.archive("a").unwrap();
    assert_eq!(store.info("a").unwrap().state, SessionState::Archived);
    let s = store.open_session("a").unwrap();
    let err = s
        .append_draft(parse_draft_line(r#"{"type":"error","data":{"message":"x"}}"#).unwrap())
        .unwrap_err();
    assert!(matches!(err, Error::Archived(_)), "{err}");
    drop(s);
    store.unarchive("a").unwrap();
    let s = store.open_session("a").unwrap();
    s.append_draft(parse_draft_line(r#"{"type":"error","data":{"message":"x"}}"#).unwrap())
        .unwrap();
    drop(s);
    store.create(NewSession::default().id("b")).unwrap();
    store.delete("a").unwrap();
    let listed: Vec<String> = store.list().unwrap().into_iter().map(|i| i.id).collect();
    assert_eq!(listed, ["b"]);
    assert!(
        dir.path().join("sessions/a").exists(),
        "deleted sessions stay until gc"
    );
    assert_eq!(store.gc().unwrap(), ["a"]);
    assert!(!dir.path().join("sessions/a").exists());
    let notices: Vec<StoreNotice> = rx.try_iter().collect();
    assert_eq!(
        notices,
        [
            StoreNotice::Created("a".into()),
            StoreNotice::Archived("a".into()),
            StoreNotice::Unarchived("a".into()),
            StoreNotice::Created("b".into()),
            StoreNotice::Deleted("a".into()),
            StoreNotice::Removed("a".into()),
        ]
    );
}

#[test]
fn listing_carries_the_metadata_and_the_log_facts() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let bytes = std::fs::read(examples_dir().join("coding-session.jsonl")).unwrap();
    import(&store, &bytes, ImportOptions::default()).unwrap();
    let info = store.info("sess-0001").unwrap();
    assert_eq!(info.events, 107);
    assert!(info.bytes > 0);
    assert_eq!(info.state, SessionState::Active);
    let last: i64 = {
        let text = String::from_utf8(bytes).unwrap();
        let line = text.lines().last().unwrap();
        let ev = agentlog::event::parse_event_line(line).unwrap();
        ev.time
    };
    assert_eq!(info.last_event_time, Some(last));
}

#[test]
fn idle_sessions_are_archived() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    // The examples' events are from 2025: idle for a long time.
    let bytes = std::fs::read(examples_dir().join("fix-typo.jsonl")).unwrap();
    let old = import(&store, &bytes, ImportOptions::default()).unwrap();
    let fresh = store.create(NewSession::default()).unwrap();
    fresh
        .append_draft(parse_draft_line(r#"{"type":"turn/start","data":{"turn":1}}"#).unwrap())
        .unwrap();
    let fresh_id = fresh.id();
    drop(fresh);
    // Idleness is judged by the last append (the log files' times), not the events' 2025
    // times: a session just imported is not idle.
    let day = Duration::from_secs(24 * 3600);
    assert!(store.archive_idle(day).unwrap().is_empty());
    let two_days_ago = std::time::SystemTime::now() - 2 * day;
    for entry in std::fs::read_dir(store.session_dir(&old).unwrap()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "seg" || e == "idx") {
            let f = std::fs::File::options().write(true).open(&path).unwrap();
            f.set_modified(two_days_ago).unwrap();
        }
    }
    assert_eq!(
        store.idle_skipping(day, |_, e| Err(e)).unwrap(),
        std::slice::from_ref(&old)
    );
    assert_eq!(store.info(&old).unwrap().state, SessionState::Active);
    let archived = store.archive_idle(day).unwrap();
    assert_eq!(archived, std::slice::from_ref(&old));
    assert_eq!(store.info(&old).unwrap().state, SessionState::Archived);
    assert_eq!(store.info(&fresh_id).unwrap().state, SessionState::Active);
}

#[test]
fn the_store_configuration_applies_to_its_sessions() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("agentlog.toml"),
        "keep_raw_chunks = false\nsegment_size = \"1MiB\"\nmax_event_size = \"64KiB\"\n",
    )
    .unwrap();
    let store = Store::open(dir.path()).unwrap();
    assert!(!store.config().keep_raw_chunks);
    let s = store.create(NewSession::default()).unwrap();
    for json in [
        r#"{"type":"turn/start","data":{"turn":1}}"#,
        r#"{"type":"step/start","data":{"turn":1,"step":1}}"#,
    ] {
        s.append_draft(parse_draft_line(json).unwrap()).unwrap();
    }
    let chunk = r#"{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"text-delta","text":"x"}}}"#;
    assert_eq!(
        s.append_draft(parse_draft_line(chunk).unwrap()).unwrap(),
        None
    );
    let big = format!(
        r#"{{"type":"error","data":{{"message":"{}"}}}}"#,
        "x".repeat(70_000)
    );
    let err = s.append_draft(parse_draft_line(&big).unwrap()).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Log(agentlog::log::Error::EventTooLarge { max: 65536, .. })
        ),
        "{err}"
    );
    assert_eq!(s.len(), 2);
    // A bad configuration is refused with the file and the key.
    std::fs::write(dir.path().join("agentlog.toml"), "durability = \"maybe\"\n").unwrap();
    let err = Store::open(dir.path()).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("agentlog.toml") && msg.contains("durability"),
        "{msg}"
    );
}

#[test]
fn import_without_header_gets_a_new_id_and_the_given_title() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let bytes = std::fs::read(examples_dir().join("fix-typo.jsonl")).unwrap();
    let report = store
        .import(
            &bytes[..],
            ImportOptions {
                id: None,
                title: Some("typo".into()),
            },
            |_| {},
        )
        .unwrap();
    assert!(!report.had_header);
    assert_eq!(report.events, 10);
    assert_eq!(report.id.len(), 26);
    let r = store.open_reader(&report.id).unwrap();
    assert_eq!(r.meta().title.present().map(String::as_str), Some("typo"));
    // Exported with a header, and imported again under another id, it is the same session.
    let with_header = export(&r, true);
    let again = import(
        &store,
        &with_header,
        ImportOptions {
            id: Some("copy".into()),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(export(&store.open_reader(&again).unwrap(), false), bytes);
}

/// A library user can learn each event's record size from a reader: the payload and what the
/// record takes on disk (16-byte header, payload, padding to 16).
#[test]
fn a_reader_tells_each_records_size() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let s = store.create(NewSession::default().id("r")).unwrap();
    for text in ["a", &"b".repeat(1000)] {
        let line = format!(
            r#"{{"type":"system/message","data":{{"role":"system","content":[{{"type":"text","text":"{text}"}}]}}}}"#
        );
        s.append_draft(parse_draft_line(&line).unwrap()).unwrap();
    }
    s.close().unwrap();
    let r = store.open_reader("r").unwrap();
    let small = r.record_size(0).unwrap();
    let big = r.record_size(1).unwrap();
    assert!(big.payload >= small.payload + 999, "{small:?} {big:?}");
    for size in [small, big] {
        assert_eq!(size.on_disk % 16, 0);
        assert!(size.on_disk >= size.payload + 16 && size.on_disk < size.payload + 32);
    }
    assert!(r.record_size(2).is_err());
}

/// `NewSession::durability` sets the durability of the created session's appends, instead of
/// the store's.
#[test]
fn a_new_session_can_choose_its_durability() {
    use agentlog::log::Durability;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let plain = store.create(NewSession::default().id("a")).unwrap();
    assert_eq!(plain.durability(), Durability::Os);
    let synced = store
        .create(NewSession::default().id("b").durability(Durability::Sync))
        .unwrap();
    assert_eq!(synced.durability(), Durability::Sync);
    let line = r#"{"type":"system/message","data":{"role":"system","content":[{"type":"text","text":"x"}]}}"#;
    assert_eq!(
        synced
            .append_draft(parse_draft_line(line).unwrap())
            .unwrap(),
        Some(0)
    );
    assert_eq!(
        synced
            .append_with(parse_draft_line(line).unwrap(), Durability::Os)
            .unwrap(),
        Some(1)
    );
    synced.sync_through(1).unwrap();
}

/// `Store::import_limited` imports a prefix: the first N events, or the lines that end within
/// the first N bytes (the header line counts), and the session holds exactly those events.
#[test]
fn import_limited_takes_a_prefix_of_events_or_bytes() {
    use agentlog::store::ImportLimit;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let bytes = std::fs::read(examples_dir().join("coding-session.jsonl")).unwrap();
    let lines: Vec<&[u8]> = bytes.split_inclusive(|&b| b == b'\n').collect();
    assert!(lines.len() > 20 && lines[1].len() > 40);
    let run = |id: &str, limit: ImportLimit| {
        let options = ImportOptions {
            id: Some(id.into()),
            title: None,
        };
        let r = store
            .import_limited(bytes.as_slice(), options, limit, |_| {})
            .unwrap();
        (r.events, export(&store.open_reader(id).unwrap(), false))
    };
    // The header line, then events: the first k lines hold k - 1 events.
    let events_of = |k: usize| lines[1..k].concat();
    let end = |k: usize| lines[..k].concat().len() as u64;

    assert_eq!(
        run("e", ImportLimit::default().events(10)),
        (10, events_of(11))
    );
    assert_eq!(
        run("b1", ImportLimit::default().bytes(end(6))),
        (5, events_of(6))
    );
    assert_eq!(
        run("b2", ImportLimit::default().bytes(end(6) - 1)),
        (4, events_of(5))
    );
    assert_eq!(
        run("b3", ImportLimit::default().bytes(end(6) + 30)),
        (5, events_of(6))
    );
    assert_eq!(
        run("both", ImportLimit::default().bytes(end(6)).events(3)),
        (3, events_of(4))
    );
    let all = run("all", ImportLimit::default());
    assert_eq!(all.0 as usize, lines.len() - 1);
    assert_eq!(all.1, events_of(lines.len()));
}
