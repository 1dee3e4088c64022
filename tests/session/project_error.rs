//! A stored event the projection refuses (a log written without the rules): `messages_at`
//! returns `Error::Project` with the event's seq and the typed `ProjectError` as its source, both
//! from a replay and from a checkpoint (which keeps only the error's text, so the typed error is
//! rebuilt by a replay), with the same message as before.

use std::error::Error as _;

use agentlog::event::{encode_event, parse_event_line, AlignedVec};
use agentlog::log::{Log, Options};
use agentlog::projection::{ProjectError, RangeEnd};
use agentlog::session::{
    CheckpointCheck, Session, SessionMeta, SessionOptions, SessionReader, PAYLOAD_SCHEMA,
};
use agentlog::Error;

fn user(text: &str) -> String {
    format!(
        r#"{{"type":"user/message","data":{{"role":"user","content":[{{"type":"text","text":"{text}"}}]}},"surfaceOp":"append"}}"#
    )
}

/// Asserts that `e` is `Error::Project` for seq 2 replacing the never-projected seq 7, with
/// that typed error as its `source()`, and returns its message.
fn assert_refused_at_2(e: &Error) -> String {
    let expected = ProjectError::NotANode {
        seq: 2,
        end: RangeEnd::Start,
        named: 7,
    };
    match e {
        Error::Project { seq, source } => {
            assert_eq!(*seq, 2);
            assert_eq!(source, &expected);
        }
        other => panic!("not Error::Project: {other:?}"),
    }
    let source = e.source().expect("a source");
    assert_eq!(source.downcast_ref::<ProjectError>(), Some(&expected));
    e.to_string()
}

#[test]
fn a_stored_event_the_projection_refuses_is_error_project_with_its_seq_and_source() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("s");
    let s = Session::create(&dir, SessionMeta::new("s", 0), SessionOptions::default()).unwrap();
    for text in ["u0", "u1"] {
        s.append_draft(testkit::session::d(&user(text))).unwrap();
    }
    s.close().unwrap();

    // Seq 2, written to the log directly (the session would refuse it): a replace naming seq 7,
    // which was never projected.
    let event = parse_event_line(
        r#"{"seq":2,"time":1000,"type":"user/message","data":{"role":"user","content":[{"type":"text","text":"x"}]},"surfaceOp":{"op":"replace","startSeq":7,"endSeq":7}}"#,
    )
    .unwrap();
    let mut buf = AlignedVec::new();
    let start = encode_event(&event, &mut buf).unwrap();
    let log = Log::open(&dir, Options::default().payload_schema(PAYLOAD_SCHEMA)).unwrap();
    log.append(&buf[start..]).unwrap();
    log.close().unwrap();

    // From a replay (the checkpoint covers the first two events only).
    let r = SessionReader::open(&dir).unwrap();
    assert_eq!(r.len(), 3);
    assert_eq!(r.messages_at(2).unwrap().len(), 2);
    let replayed = assert_refused_at_2(&r.messages().unwrap_err());
    // As informative as the text it was: the stored event, its seq and what is wrong.
    assert!(
        replayed.starts_with("the stored event at seq 2: ") && replayed.contains('7'),
        "{replayed}"
    );
    drop(r);

    // A clean close writes a checkpoint covering all three events, holding the error's text.
    let s = Session::open(&dir, SessionOptions::default()).unwrap();
    s.close().unwrap();
    let r = SessionReader::open(&dir).unwrap();
    assert_eq!(
        r.verify_checkpoint().unwrap(),
        CheckpointCheck::Matches { covers: 3 }
    );
    // From the checkpoint: the same typed error, rebuilt, and the same message.
    let restored = assert_refused_at_2(&r.messages().unwrap_err());
    assert_eq!(restored, replayed);
    assert_refused_at_2(&r.messages_at(3).unwrap_err());
    assert_eq!(r.messages_at(2).unwrap().len(), 2);
}
