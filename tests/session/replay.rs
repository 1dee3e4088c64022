//! Replay: dry-run shows every step with its history and the recorded calls and results; run
//! mode with an executor that echoes the recorded results finds no divergence, one that changes
//! one result finds exactly that call.

use std::path::PathBuf;

use agentlog::event::ToolContent;
use agentlog::session::{replay, ReplayCall, ToolExecutor, ToolOutput};
use agentlog::store::{ImportOptions, Store};

fn import(store: &Store, name: &str) -> String {
    let path = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/sessions")).join(name);
    let bytes = std::fs::read(path).unwrap();
    store
        .import(&bytes[..], ImportOptions::default(), |_| {})
        .unwrap()
        .id
}

struct Echo;

impl ToolExecutor for Echo {
    fn execute(&mut self, call: &ReplayCall) -> Result<ToolOutput, String> {
        call.recorded
            .clone()
            .ok_or_else(|| "no recorded result".to_string())
    }
}

struct ChangeOne(String);

impl ToolExecutor for ChangeOne {
    fn execute(&mut self, call: &ReplayCall) -> Result<ToolOutput, String> {
        let mut out = call.recorded.clone().ok_or("no recorded result")?;
        if call.call_id == self.0 {
            out.content = ToolContent::Text("something else".into());
        }
        Ok(out)
    }
}

#[test]
fn dry_run_shows_steps_histories_and_recorded_calls() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let id = import(&store, "tools-and-approvals.jsonl");
    let reader = store.open_reader(&id).unwrap();
    let report = replay(&reader, None).unwrap();
    assert!(!report.ran);
    assert_eq!(report.steps.len(), 33);
    assert_eq!(report.calls, 41);
    assert_eq!(report.divergences, 0);
    // Every call of the example has its result, found whichever way the result names its call.
    for step in &report.steps {
        for c in &step.calls {
            assert!(
                c.call.recorded.is_some(),
                "call {} has no result",
                c.call.call_id
            );
            assert_eq!((c.call.turn, c.call.step), (step.turn, step.step));
        }
    }
    // The history a step saw is the projection when it started: it grows over the session.
    let first = &report.steps[0];
    let expected = reader.messages_at(first.seq).unwrap();
    assert_eq!(first.history_messages, expected.len());
    assert_eq!(
        first.history_bytes as usize,
        expected
            .iter()
            .map(|m| m.to_canonical_string().len())
            .sum::<usize>()
    );
    let last = report.steps.last().unwrap();
    assert_eq!(
        last.history_messages,
        reader.messages_at(last.seq).unwrap().len()
    );
    assert!(last.history_bytes > first.history_bytes);
}

#[test]
fn run_mode_reports_exactly_the_calls_that_diverge() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    for name in [
        "fix-typo.jsonl",
        "coding-session.jsonl",
        "tools-and-approvals.jsonl",
    ] {
        let id = import(&store, name);
        let reader = store.open_reader(&id).unwrap();
        let report = replay(&reader, Some(&mut Echo)).unwrap();
        assert!(report.ran);
        assert_eq!(report.divergences, 0, "{name}");
        let some_call = report
            .steps
            .iter()
            .flat_map(|s| &s.calls)
            .last()
            .unwrap()
            .call
            .call_id
            .clone();
        let report = replay(&reader, Some(&mut ChangeOne(some_call.clone()))).unwrap();
        assert_eq!(report.divergences, 1, "{name}");
        let diverged: Vec<_> = report.diverged().map(|c| c.call.call_id.clone()).collect();
        assert_eq!(diverged, [some_call]);
    }
}
