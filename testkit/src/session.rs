//! Helpers for the tests that append to one session: a session in a temporary directory,
//! appends that must be accepted, and appends a given lifecycle rule must refuse.
#![allow(dead_code)]

use std::path::Path;

use agentlog::event::{parse_draft_line, Draft};
use agentlog::session::{Rule, Session, SessionMeta, SessionOptions};

/// A draft event from a JSONL line (seq and time may be left out).
pub fn d(json: &str) -> Draft {
    parse_draft_line(json).unwrap_or_else(|e| panic!("{json}: {e}"))
}

/// A new session `s` in `dir`, with default options.
pub fn new_session(dir: &Path) -> Session {
    Session::create(
        dir.join("s"),
        SessionMeta::new("s", 0),
        SessionOptions::default(),
    )
    .unwrap()
}

/// Appends `json`, which must be accepted; its seq (`None`: a chunk the store does not keep).
pub fn append(s: &Session, json: &str) -> Option<u64> {
    s.append_draft(d(json))
        .unwrap_or_else(|e| panic!("{json} refused: {e}"))
}

/// A session in a temporary directory that lives as long as it.
pub struct T {
    _dir: tempfile::TempDir,
    pub s: Session,
}

pub fn session() -> T {
    let dir = tempfile::tempdir().unwrap();
    let s = new_session(dir.path());
    T { _dir: dir, s }
}

impl T {
    /// Appends `json`, which must be accepted and stored; its seq.
    pub fn ok(&self, json: &str) -> u64 {
        append(&self.s, json).unwrap_or_else(|| panic!("{json}: not stored"))
    }

    /// Appends `json`, expects `rule` to refuse it, and checks nothing was written.
    pub fn refused(&self, json: &str, rule: Rule) -> String {
        let before = self.s.len();
        let err = self.s.append_draft(d(json)).unwrap_err();
        let l = err
            .lifecycle()
            .unwrap_or_else(|| panic!("{json}: not a lifecycle error: {err}"));
        assert_eq!(l.rule, rule, "{json}: {err}");
        assert_eq!(l.seq, before, "the error names the seq it would have had");
        assert_eq!(self.s.len(), before, "nothing was written");
        let msg = err.to_string();
        assert!(msg.contains(rule.text()), "{msg}");
        assert!(msg.contains(&format!("seq {before}")), "{msg}");
        msg
    }
}

/// A session written step by step by a test's generator: the session (taken out at a close),
/// its directory, the last turn number and the number of events appended. A clean close and
/// an open (`reopen`) use the options it was created with.
pub struct Driver {
    pub dir: std::path::PathBuf,
    pub s: Option<Session>,
    pub turn: u64,
    pub n: u64,
    options: fn() -> SessionOptions,
}

impl Driver {
    /// A new session `s` under `root`.
    pub fn new(root: &Path, options: fn() -> SessionOptions) -> Driver {
        let dir = root.join("s");
        let s = Session::create(&dir, SessionMeta::new("s", 0), options()).unwrap();
        Driver {
            dir,
            s: Some(s),
            turn: 0,
            n: 0,
            options,
        }
    }

    /// The open session.
    pub fn s(&self) -> &Session {
        self.s.as_ref().unwrap()
    }

    /// Appends one event, which must be accepted.
    pub fn ev(&mut self, json: &str) {
        append(self.s(), json);
        self.n += 1;
    }

    /// Closes the session cleanly and opens it again.
    pub fn reopen(&mut self) {
        self.s.take().unwrap().close().unwrap();
        let s = Session::open(&self.dir, (self.options)()).unwrap();
        self.s = Some(s);
    }
}

/// The six JSONL lines of a complete turn `turn` (one step: a question and its answer).
pub fn turn_lines(turn: u64) -> [String; 6] {
    [
        format!(r#"{{"type":"turn/start","data":{{"turn":{turn}}}}}"#),
        format!(
            r#"{{"type":"user/message","data":{{"role":"user","content":[{{"type":"text","text":"question {turn}"}}]}}}}"#
        ),
        format!(r#"{{"type":"step/start","data":{{"turn":{turn},"step":1}}}}"#),
        format!(
            r#"{{"type":"assistant/message","data":{{"turn":{turn},"step":1,"message":{{"role":"assistant","content":[{{"type":"text","text":"answer {turn}"}}]}}}}}}"#
        ),
        format!(r#"{{"type":"step/end","data":{{"turn":{turn},"step":1}}}}"#),
        format!(
            r#"{{"type":"turn/end","data":{{"turn":{turn},"reason":{{"kind":"completed"}}}}}}"#
        ),
    ]
}
