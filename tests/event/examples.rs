//! Acceptance 1: the example sessions import and export byte for byte, directly and through the
//! rkyv archive (parse → encode → access → write from the archive).

use std::path::PathBuf;

use agentlog::event::{
    access_event, decode_event, encode_event, parse_jsonl, JsonlReader, JsonlWriter, Line,
};
use rkyv::util::AlignedVec;

fn examples() -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/sessions"));
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
        .collect();
    files.sort();
    assert!(files.len() >= 3, "examples missing in {}", dir.display());
    files
        .into_iter()
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect()
}

#[test]
fn examples_round_trip_byte_for_byte() {
    for (name, input) in examples() {
        let (header, events) = parse_jsonl(&input).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut out = JsonlWriter::new(Vec::new());
        if let Some(header) = &header {
            out.write_header(header).unwrap();
        }
        for event in &events {
            out.write_event(event).unwrap();
        }
        let out = out.into_inner().unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out),
            String::from_utf8_lossy(&input),
            "{name}"
        );
    }
}

#[test]
fn examples_round_trip_through_the_archive() {
    let mut buf = AlignedVec::<16>::new();
    for (name, input) in examples() {
        let mut out = JsonlWriter::new(Vec::new());
        for line in JsonlReader::new(&input[..]) {
            match line.unwrap_or_else(|e| panic!("{name}: {e}")) {
                Line::Header(header) => out.write_header(&header).unwrap(),
                Line::Event(event) => {
                    buf.clear();
                    let start = encode_event(&event, &mut buf).unwrap();
                    let archived = access_event(&buf[start..]).unwrap();
                    assert_eq!(archived.seq(), event.seq);
                    assert_eq!(archived.type_name(), event.type_name());
                    assert_eq!(decode_event(archived).unwrap(), event, "{name}");
                    out.write_archived(archived).unwrap();
                }
            }
        }
        assert_eq!(out.into_inner().unwrap(), input, "{name}");
    }
}

#[test]
fn examples_have_what_the_readme_promises() {
    let all = examples();
    let coding = &all
        .iter()
        .find(|(n, _)| n == "coding-session.jsonl")
        .unwrap()
        .1;
    let (header, events) = parse_jsonl(coding).unwrap();
    let header = header.expect("coding-session.jsonl starts with a header");
    assert_eq!(header.id, "sess-0001");
    assert_eq!(header.extra.keys().collect::<Vec<_>>(), ["origin"]);
    assert!(events.iter().any(|e| e.type_name() == "hook/invoked"));
    assert!(events.iter().any(|e| matches!(
        e.surface_op,
        Some(agentlog::event::SurfaceOp::Replace {
            start_seq: 0,
            end_seq: 25,
            ..
        })
    )));
}
