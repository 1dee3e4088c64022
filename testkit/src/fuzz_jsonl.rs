//! The check of the `jsonl_import` fuzz target, shared with `tests/log/fuzz_corpus.rs`: arbitrary
//! bytes as a JSONL session file. The reader never panics; every line it accepts round-trips
//! (canonical text → equal event → identical text, also through the rkyv archive); importing
//! the file into a store either accepts exactly what the reader accepted, or leaves nothing.
#![allow(dead_code)]

use agentlog::event::{
    access_event, encode_event, parse_event_line, parse_header_line, JsonlReader, Line,
};
use agentlog::store::{ImportOptions, Store};
use rkyv::util::AlignedVec;

pub fn jsonl_import(data: &[u8]) {
    let mut parsed = Vec::new();
    let mut all_ok = true;
    let mut buf = AlignedVec::new();
    for line in JsonlReader::new(data) {
        match line {
            Ok(Line::Header(h)) => {
                let text = h.to_canonical_string();
                let back = parse_header_line(&text)
                    .unwrap_or_else(|e| panic!("canonical header refused: {e}\n{text}"));
                assert_eq!(back, h, "header round trip");
            }
            Ok(Line::Event(e)) => {
                let text = e.to_canonical_string();
                let back = parse_event_line(&text)
                    .unwrap_or_else(|err| panic!("canonical line refused: {err}\n{text}"));
                assert_eq!(back, e, "event round trip of {text}");
                assert_eq!(back.to_canonical_string(), text);
                buf.clear();
                let start = encode_event(&e, &mut buf).expect("encode");
                let archived = access_event(&buf[start..]).expect("own archive");
                assert_eq!(archived.to_canonical_string(), text, "archive round trip");
                parsed.push(text);
            }
            Err(_) => {
                all_ok = false;
                break;
            }
        }
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open(dir.path()).expect("store");
    let options = ImportOptions {
        id: Some("fuzz".into()),
        title: None,
    };
    match store.import(data, options, |_| {}) {
        Ok(report) => {
            assert!(all_ok, "the store imported a file the reader refused");
            let reader = store.open_reader(&report.id).expect("imported session");
            // The import's id replaces the header's, so compare the events.
            let mut out = Vec::new();
            reader
                .export(&mut out, agentlog::session::HeaderLine::Omit, |_| {})
                .expect("export");
            let out = String::from_utf8(out).expect("UTF-8");
            let exported: Vec<&str> = out.lines().collect();
            assert_eq!(exported.len(), parsed.len(), "events exported");
            if let Some(i) = (0..parsed.len()).find(|&i| exported[i] != parsed[i]) {
                panic!(
                    "export differs at event {i}:\n{}\n{}",
                    exported[i], parsed[i]
                );
            }
        }
        Err(_) => {
            let left: Vec<_> = std::fs::read_dir(dir.path().join("sessions"))
                .expect("sessions dir")
                .collect();
            assert!(left.is_empty(), "a refused import left {left:?}");
        }
    }
}
