//! Typed errors (issue 16, item 4): an import's refusal keeps its type under the line it names,
//! damage is the `source()` of the engine's error, and a full disk is recognised by its
//! `ErrorKind`, not by an errno number.

use std::error::Error as _;

use agentlog::log::{self, Corruption, Log, LogReader, Options};
use agentlog::store::{ImportOptions, Store, StoreConfig};
use agentlog::Error;

#[test]
fn an_import_refusal_names_its_line_and_keeps_the_refusal_typed() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    store.set_config(StoreConfig::parse("max_event_size = \"64KiB\"").unwrap());
    let big = "x".repeat(200_000);
    let jsonl = format!(
        "{}\n{}\n",
        r#"{"seq":0,"time":1,"type":"turn/start","data":{"turn":1}}"#,
        format_args!(
            r#"{{"seq":1,"time":2,"type":"user/message","data":{{"role":"user","content":[{{"type":"text","text":"{big}"}}]}}}}"#
        )
    );
    let e = store
        .import(jsonl.as_bytes(), ImportOptions::default(), |_| {})
        .unwrap_err();
    match &e {
        Error::Import { line, source } => {
            assert_eq!(*line, 2);
            assert!(
                matches!(
                    source.as_ref(),
                    Error::Log(log::Error::EventTooLarge { .. })
                ),
                "{source:?}"
            );
        }
        other => panic!("expected Error::Import, got {other:?}"),
    }
    assert!(e.to_string().starts_with("line 2: "), "{e}");
    // source() leads to the refusal itself.
    let source = e.source().expect("a source");
    assert!(source.downcast_ref::<Error>().is_some(), "{source:?}");
    // Nothing was imported.
    assert!(store
        .ids(agentlog::store::Deleted::Skip)
        .unwrap()
        .is_empty());
}

#[test]
fn the_corruption_is_the_source_of_a_damage_error() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), Options::default()).unwrap();
    for i in 0..10u64 {
        log.append(format!("record number {i} with some text").as_bytes())
            .unwrap();
    }
    log.close().unwrap();
    let seg = testkit::segments(dir.path()).remove(0);
    let bytes = std::fs::read(&seg).unwrap();
    let at = bytes
        .windows(b"record number 5".len())
        .position(|w| w == b"record number 5")
        .unwrap();
    testkit::flip(&seg, at + 3);
    let reader = LogReader::open(dir.path()).unwrap();
    let e = reader.get(5).unwrap_err();
    let c = e.corruption().cloned().expect("a corruption");
    assert_eq!(c.seq, Some(5));
    let source = e.source().expect("the corruption as source");
    assert_eq!(source.downcast_ref::<Corruption>(), Some(&c));
    // The session layer's error leads to it too, through the engine's.
    let wrapped = Error::Log(e);
    let inner = wrapped
        .source()
        .and_then(|s| s.source())
        .expect("two levels");
    assert_eq!(inner.downcast_ref::<Corruption>(), Some(&c));
}

#[test]
fn a_full_disk_and_a_full_quota_are_recognised_by_their_kind() {
    for errno in [28, 122] {
        let e = log::Error::Io {
            op: "append to",
            path: "/x/00000000000000000000.seg".into(),
            source: std::io::Error::from_raw_os_error(errno),
        };
        assert!(e.is_disk_full(), "errno {errno}");
        assert!(e.to_string().contains("the disk is full"), "{e}");
    }
    let other = log::Error::Io {
        op: "append to",
        path: "/x/00000000000000000000.seg".into(),
        source: std::io::Error::from_raw_os_error(5),
    };
    assert!(!other.is_disk_full());
    assert!(!other.to_string().contains("the disk is full"));
}
