//! `Session::open_report` / `Log::recovery_report`: what opening found, kept on the opened value
//! (`open` returns the session or log alone, not a `(value, report)` pair).

use agentlog::event::{EventData, Map, TurnStart};
use agentlog::log::{Log, Options};
use agentlog::session::{Session, SessionMeta, SessionOptions, TurnState};

/// A session just created reports an empty log and nothing open; reopened without a
/// close after a `turn/start`, it reports the events, the clean close of its log, the open turn
/// and its state.
#[test]
fn open_report_of_created_and_reopened_session() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s1");
    let s = Session::create(&dir, SessionMeta::new("s1", 0), SessionOptions::default()).unwrap();
    let created = s.open_report();
    assert_eq!(created.log.events, 0);
    assert!(created.log.cut.is_none());
    assert_eq!(created.state, TurnState::Idle);
    assert_eq!(created.open_work.turn, None);
    assert!(created.violations.is_empty() && created.salvaged.is_empty());
    s.append(EventData::TurnStart(TurnStart {
        turn: 1,
        extra: Map::new(),
    }))
    .unwrap();
    s.close().unwrap();

    let s = Session::open(&dir, SessionOptions::default()).unwrap();
    let report = s.open_report();
    assert!(!report.log.created);
    assert!(report.log.clean, "{}", report.log);
    assert_eq!(report.log.events, 1);
    assert_eq!(report.state, TurnState::Pending);
    assert_eq!(report.open_work.turn, Some((1, 0)));
    // The report is what opening found: later appends do not change it.
    s.append(EventData::TurnStart(TurnStart {
        turn: 2,
        extra: Map::new(),
    }))
    .unwrap_err();
    assert_eq!(s.open_report().log.events, 1);
}

/// `Log::recovery_report` of a new log says created; of a log reopened after a clean close,
/// clean with its records.
#[test]
fn recovery_report_of_created_and_reopened_log() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let log = Log::open(&dir, Options::default()).unwrap();
    assert!(log.recovery_report().created);
    log.append(b"a").unwrap();
    log.append(b"b").unwrap();
    log.close().unwrap();
    let log = Log::open(&dir, Options::default()).unwrap();
    let report = log.recovery_report();
    assert!(!report.created && report.clean, "{report}");
    assert_eq!((report.events, report.segments), (2, 1));
    assert!(report.cut.is_none());
}
