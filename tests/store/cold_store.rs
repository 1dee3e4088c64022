//! Cold segments at the store layer: `archive` compresses every segment of a session, and
//! export (byte for byte), search, stats, fork and verify give what they gave before;
//! `unarchive` then append works; the store setting `compress_sealed` compresses the sealed
//! segments of a session being written.

use std::ops::ControlFlow;
use std::path::PathBuf;

use agentlog::event::parse_draft_line;
use agentlog::log::verify;
use agentlog::store::{ForkPoint, ImportOptions, NewSession, Query, Store};
use testkit::{is_cold, segments};

fn example(name: &str) -> Vec<u8> {
    std::fs::read(
        PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/sessions")).join(name),
    )
    .unwrap()
}

fn store_with(toml: &str) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("agentlog.toml"), toml).unwrap();
    let store = Store::open(dir.path()).unwrap();
    (dir, store)
}

fn export(store: &Store, id: &str) -> Vec<u8> {
    let mut out = Vec::new();
    store
        .open_reader(id)
        .unwrap()
        .export(&mut out, agentlog::session::HeaderLine::Include, |_| {})
        .unwrap();
    out
}

fn search(store: &Store, query: &Query) -> Vec<(String, u64, String)> {
    let mut found = Vec::new();
    store
        .search(query, |id, e| {
            found.push((id.to_string(), e.seq(), e.to_canonical_string()));
            ControlFlow::Continue(())
        })
        .unwrap();
    found
}

#[test]
fn an_archived_session_is_compressed_and_reads_as_before() {
    let (_tmp, store) = store_with("segment_size = \"8KiB\"\n");
    let bytes = example("tools-and-approvals.jsonl");
    let id = store
        .import(&bytes[..], ImportOptions::default(), |_| {})
        .unwrap()
        .id;
    let dir = store.session_dir(&id).unwrap();
    assert!(segments(&dir).len() >= 4, "{:?}", segments(&dir));
    let exported = export(&store, &id);
    let stats = store.open_reader(&id).unwrap().stats().unwrap();
    let messages = store.open_reader(&id).unwrap().messages().unwrap();
    let query = Query::new().event_type("tool/*");
    let found = search(&store, &query);
    assert!(!found.is_empty());
    let text = search(&store, &Query::new().text("file"));
    let fork_before = store.fork(&id, ForkPoint::Turn(1), None).unwrap();
    let fork_export = export(&store, &fork_before.id);

    store.archive(&id).unwrap();
    for seg in segments(&dir) {
        assert!(is_cold(&seg), "{} is compressed", seg.display());
    }
    assert_eq!(export(&store, &id), exported, "export is byte-identical");
    let reader = store.open_reader(&id).unwrap();
    // The same statistics; the bytes on disk are fewer.
    let mut cold_stats = reader.stats().unwrap();
    assert!(
        cold_stats.bytes < stats.bytes,
        "{} vs {}",
        cold_stats.bytes,
        stats.bytes
    );
    cold_stats.bytes = stats.bytes;
    assert_eq!(cold_stats, stats);
    assert_eq!(reader.messages().unwrap(), messages);
    let mut after = search(&store, &query);
    after.retain(|(i, _, _)| *i == id);
    let mut expected = found.clone();
    expected.retain(|(i, _, _)| *i == id);
    assert_eq!(after, expected);
    let mut text_after = search(&store, &Query::new().text("file"));
    text_after.retain(|(i, _, _)| *i == id);
    let mut text_expected = text;
    text_expected.retain(|(i, _, _)| *i == id);
    assert_eq!(text_after, text_expected);
    let report = verify(&dir).unwrap();
    assert!(report.is_clean() && report.damage.is_none(), "{report:?}");

    // A fork of the archived (compressed) session holds the same events as one made before.
    let fork_after = store.fork(&id, ForkPoint::Turn(1), None).unwrap();
    assert_eq!(fork_after.events, fork_before.events);
    let strip_header = |b: &[u8]| -> Vec<u8> {
        let text = std::str::from_utf8(b).unwrap();
        text.lines()
            .filter(|l| !l.starts_with(r#"{"type":"session""#))
            .flat_map(|l| format!("{l}\n").into_bytes())
            .collect()
    };
    assert_eq!(
        strip_header(&export(&store, &fork_after.id)),
        strip_header(&fork_export)
    );
    let child = store.open_session(&fork_after.id).unwrap();
    let next = child.lifecycle().next_turn();
    child
        .append_draft(
            parse_draft_line(&format!(
                r#"{{"type":"turn/start","data":{{"turn":{next}}}}}"#
            ))
            .unwrap(),
        )
        .unwrap();
    child.close().unwrap();
    // The parent did not change.
    assert_eq!(export(&store, &id), exported);
}

#[test]
fn an_unarchived_session_takes_appends_after_its_compressed_segments() {
    let (_tmp, store) = store_with("segment_size = \"8KiB\"\n");
    let bytes = example("coding-session.jsonl");
    let id = store
        .import(&bytes[..], ImportOptions::default(), |_| {})
        .unwrap()
        .id;
    let dir = store.session_dir(&id).unwrap();
    let exported = export(&store, &id);
    store.archive(&id).unwrap();
    let cold = segments(&dir);
    assert!(cold.iter().all(|s| is_cold(s)));
    // Archived: no appends.
    {
        let session = store.open_session(&id).unwrap();
        let draft = parse_draft_line(r#"{"type":"turn/start","data":{"turn":99}}"#).unwrap();
        assert!(matches!(
            session.append_draft(draft),
            Err(agentlog::Error::Archived(_))
        ));
        session.close().unwrap();
    }
    store.unarchive(&id).unwrap();
    let session = store.open_session(&id).unwrap();
    let before = session.len();
    let next = session.lifecycle().next_turn();
    session
        .append_draft(
            parse_draft_line(&format!(
                r#"{{"type":"turn/start","data":{{"turn":{next}}}}}"#
            ))
            .unwrap(),
        )
        .unwrap();
    session.close().unwrap();
    let segs = segments(&dir);
    assert!(segs.len() > cold.len(), "a new plain segment");
    assert!(segs[..cold.len()].iter().all(|s| is_cold(s)));
    assert!(!is_cold(segs.last().unwrap()));
    let reader = store.open_reader(&id).unwrap();
    assert_eq!(reader.len(), before + 1);
    let out = export(&store, &id);
    assert!(
        out.starts_with(&exported),
        "the events before stay as they were"
    );
    let added = std::str::from_utf8(&out[exported.len()..]).unwrap();
    assert_eq!(added.lines().count(), 1, "{added}");
    assert!(added.contains(r#""type":"turn/start""#), "{added}");
    assert!(verify(&dir).unwrap().is_clean());
    // Archiving again compresses the new segment only.
    store.archive(&id).unwrap();
    assert!(segments(&dir).iter().all(|s| is_cold(s)));
    assert_eq!(store.open_reader(&id).unwrap().len(), before + 1);
}

#[test]
fn the_store_setting_compresses_sealed_segments_of_an_active_session() {
    let (_tmp, store) = store_with("segment_size = \"8KiB\"\ncompress_sealed = true\n");
    let session = store.create(NewSession::default()).unwrap();
    let id = session.id().to_string();
    let mut lines = Vec::new();
    for turn in 0..120u64 {
        for line in [
            format!(r#"{{"type":"turn/start","data":{{"turn":{turn}}}}}"#),
            format!(
                r#"{{"type":"user/message","data":{{"role":"user","content":[{{"type":"text","text":"please look at file {turn} and tell me what it does"}}]}}}}"#
            ),
            format!(
                r#"{{"type":"turn/end","data":{{"turn":{turn},"reason":{{"kind":"completed"}}}}}}"#
            ),
        ] {
            session
                .append_draft(parse_draft_line(&line).unwrap())
                .unwrap();
            lines.push(line);
        }
    }
    let dir = store.session_dir(&id).unwrap();
    // While the writer is open, readers read every event (compressed or not).
    let live = store.open_reader(&id).unwrap();
    assert_eq!(live.len(), 360);
    session.close().unwrap();
    let segs = segments(&dir);
    assert!(segs.len() >= 3, "{segs:?}");
    let (last, sealed) = segs.split_last().unwrap();
    assert!(
        sealed.iter().all(|s| is_cold(s)),
        "sealed segments are compressed"
    );
    assert!(!is_cold(last));
    let reader = store.open_reader(&id).unwrap();
    assert_eq!(reader.len(), 360);
    for (seq, e) in reader.events().enumerate() {
        assert_eq!(e.unwrap().seq(), seq as u64);
    }
    assert_eq!(reader.lifecycle().unwrap().next_turn(), 120);
    assert!(verify(&dir).unwrap().is_clean());
}
