//! Forking: at every turn boundary of an example the child's export is the parent's first N
//! lines; appending to a child leaves the parent unchanged; forks of forks record lineage;
//! sealed segments are shared, and a child that must change a shared segment copies it first.

use std::path::PathBuf;

use agentlog::event::parse_draft_line;
use agentlog::store::{ForkPoint, ImportOptions, NewSession, Store};
use agentlog::Error;

fn example(name: &str) -> Vec<u8> {
    std::fs::read(
        PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/sessions")).join(name),
    )
    .unwrap()
}

fn export(store: &Store, id: &str) -> Vec<u8> {
    let mut out = Vec::new();
    store
        .open_reader(id)
        .unwrap()
        .export(&mut out, agentlog::session::HeaderLine::Omit, |_| {})
        .unwrap();
    out
}

fn first_lines(bytes: &[u8], n: usize) -> Vec<u8> {
    let text = std::str::from_utf8(bytes).unwrap();
    let mut out = String::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with(r#"{"type":"session""#))
        .take(n)
    {
        out.push_str(line);
        out.push('\n');
    }
    out.into_bytes()
}

#[test]
fn a_fork_at_every_turn_boundary_holds_the_parents_first_lines() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let bytes = example("tools-and-approvals.jsonl");
    let parent = store
        .import(&bytes[..], ImportOptions::default(), |_| {})
        .unwrap()
        .id;
    let before = export(&store, &parent);
    let mut forks = 0;
    for turn in 0..20 {
        let report = match store.fork(&parent, ForkPoint::Turn(turn), None) {
            Ok(r) => r,
            Err(Error::Invalid(msg)) => {
                assert!(msg.contains("no turn/end"), "{msg}");
                continue;
            }
            Err(e) => panic!("{e}"),
        };
        forks += 1;
        let n = report.events as usize;
        assert_eq!(
            export(&store, &report.id),
            first_lines(&bytes, n),
            "turn {turn}"
        );
        let info = store.info(&report.id).unwrap();
        assert_eq!(info.parent_session.as_deref(), Some(parent.as_str()));
        assert_eq!(info.seed_length, Some(report.events));
        // The child takes appends; the parent does not change.
        let child = store.open_session(&report.id).unwrap();
        let open = child.open_report().clone();
        assert!(open.violations.is_empty(), "{:?}", open.violations);
        let next = child.lifecycle().next_turn();
        child
            .append_draft(
                parse_draft_line(&format!(
                    r#"{{"type":"turn/start","data":{{"turn":{next}}}}}"#
                ))
                .unwrap(),
            )
            .unwrap();
        assert_eq!(child.len(), report.events + 1);
    }
    assert_eq!(forks, 12, "every turn of the example ends");
    assert_eq!(export(&store, &parent), before);
    // At an event count too.
    let r = store
        .fork(&parent, ForkPoint::At(7), Some("seven".into()))
        .unwrap();
    assert_eq!(export(&store, "seven"), first_lines(&bytes, 7));
    assert_eq!(r.events, 7);
    assert!(matches!(
        store.fork(&parent, ForkPoint::At(10_000), None),
        Err(Error::Invalid(_))
    ));
    assert!(matches!(
        store.fork(&parent, ForkPoint::At(1), Some("seven".into())),
        Err(Error::Exists(_))
    ));
    assert!(matches!(
        store.fork(&parent, ForkPoint::At(1), Some("../x".into())),
        Err(Error::InvalidId(_))
    ));
}

#[test]
fn forks_of_forks_record_their_lineage() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let root = store
        .import(
            &example("coding-session.jsonl")[..],
            ImportOptions::default(),
            |_| {},
        )
        .unwrap()
        .id;
    let a = store
        .fork(&root, ForkPoint::Turn(3), Some("a".into()))
        .unwrap();
    let b = store
        .fork("a", ForkPoint::Turn(2), Some("b".into()))
        .unwrap();
    assert!(b.events < a.events);
    let info = store.info("b").unwrap();
    assert_eq!(info.parent_session.as_deref(), Some("a"));
    assert_eq!(
        store.info("a").unwrap().parent_session.as_deref(),
        Some(root.as_str())
    );
    // The header of an exported fork carries its lineage.
    let mut out = Vec::new();
    store
        .open_reader("b")
        .unwrap()
        .export(&mut out, agentlog::session::HeaderLine::Include, |_| {})
        .unwrap();
    let header = std::str::from_utf8(&out)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_string();
    assert!(
        header.contains(r#""parentSession":"a""#)
            && header.contains(&format!(r#""seedLength":{}"#, b.events)),
        "{header}"
    );
}

#[test]
fn sealed_segments_are_shared_and_copied_before_a_change() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("agentlog.toml"),
        "segment_size = \"4KiB\"\n",
    )
    .unwrap();
    let store = Store::open(dir.path()).unwrap();
    let s = store.create(NewSession::default().id("p")).unwrap();
    for i in 0..400 {
        s.append_draft(
            parse_draft_line(&format!(
                r#"{{"type":"error","data":{{"message":"event {i} {}"}}}}"#,
                "x".repeat(40)
            ))
            .unwrap(),
        )
        .unwrap();
    }
    drop(s);
    let parent_export = export(&store, "p");
    let r = store
        .fork("p", ForkPoint::At(333), Some("c".into()))
        .unwrap();
    assert!(r.copy.linked_segments > 3, "{:?}", r.copy);
    assert_eq!(r.copy.copied_segments, 1);
    assert_eq!(export(&store, "c"), first_lines(&parent_export, 333));
    // Damage a segment the child shares with the parent, and salvage the child: the child gets
    // its own copy first, the parent keeps its bytes.
    let shared = dir.path().join("sessions/c/00000000000000000000.seg");
    let parent_seg = dir.path().join("sessions/p/00000000000000000000.seg");
    let parent_bytes = std::fs::read(&parent_seg).unwrap();
    {
        use std::os::unix::fs::MetadataExt;
        assert_eq!(std::fs::metadata(&shared).unwrap().nlink(), 2);
    }
    let mut b = parent_bytes.clone();
    // In the payload of the segment's first record.
    b[64 + 16 + 4] ^= 0xff;
    // Write through the link (as a disk error would): both see it.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&shared)
        .unwrap();
    std::fs::write(&shared, &b).unwrap();
    let opts = agentlog::session::SessionOptions {
        log: agentlog::log::Options::default()
            .segment_size(4 << 10)
            .recovery(agentlog::log::RecoveryMode::Salvage),
        keep_raw_chunks: true,
        ..Default::default()
    };
    let child = agentlog::session::Session::open(dir.path().join("sessions/c"), opts).unwrap();
    assert!(child.len() < 333);
    drop(child);
    // The parent's file is a different one now, untouched by the salvage's truncation.
    assert_eq!(std::fs::read(&parent_seg).unwrap(), b);
}
