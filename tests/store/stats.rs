//! Statistics: every statistic of every session, and of the whole store, compared with a
//! straightforward computation over the exported JSONL parsed with serde_json.

use testkit::search as search_common;

use agentlog::session::{SessionStats, StatsCollector};
use agentlog::store::Store;
use search_common::{json_close, median, ref_json, ref_merge, ref_stats, Corpus, RefStats};

#[track_caller]
fn same(lib: &SessionStats, r: &RefStats, what: &str) {
    assert_eq!(lib.events, r.events, "{what}: events");
    assert_eq!(lib.by_type, r.by_type, "{what}: byType");
    assert_eq!(lib.turns, r.turns, "{what}: turns");
    assert_eq!(lib.end_reasons, r.end_reasons, "{what}: endReasons");
    assert_eq!(lib.steps, r.steps, "{what}: steps");
    let t = &lib.tokens;
    assert_eq!(
        [t.input, t.output, t.cache_read, t.cache_write, t.reasoning],
        r.tokens,
        "{what}: tokens"
    );
    let names: Vec<&String> = lib.tools.keys().collect();
    let want: Vec<&String> = r.tools.keys().collect();
    assert_eq!(names, want, "{what}: tools");
    for (name, t) in &lib.tools {
        let rt = &r.tools[name];
        assert_eq!((t.calls, t.errors), (rt.calls, rt.errors), "{what}: {name}");
        let rate = if rt.calls == 0 {
            0.0
        } else {
            rt.errors as f64 / rt.calls as f64
        };
        assert_eq!(t.failure_rate(), rate, "{what}: {name} failure rate");
        let mut lat = t.latency.as_slice().to_vec();
        lat.sort();
        assert_eq!(lat, rt.latencies, "{what}: {name} latencies");
        assert_eq!(t.latency.median(), median(&rt.latencies), "{what}: {name}");
        assert_eq!(
            t.latency.max(),
            rt.latencies.last().copied(),
            "{what}: {name}"
        );
    }
    let mut durations = lib.turn_durations.as_slice().to_vec();
    durations.sort();
    assert_eq!(durations, r.turn_durations, "{what}: turn durations");
    assert_eq!(
        lib.turn_durations.median(),
        median(&r.turn_durations),
        "{what}"
    );
}

/// The library's JSON, parsed by serde_json, against the reference JSON.
#[track_caller]
fn same_json(lib: &agentlog::event::Value, want: &serde_json::Value) {
    let got: serde_json::Value = serde_json::from_str(&lib.to_string()).unwrap();
    assert!(json_close(&got, want), "got  {got}\nwant {want}");
}

#[test]
fn every_statistic_of_every_session() {
    let corpus = Corpus::build();
    let mut with_latency = 0;
    for s in &corpus.sessions {
        let reader = corpus.store.open_reader(&s.id).unwrap();
        let lib = reader.stats().unwrap();
        let r = ref_stats(&s.events);
        same(&lib, &r, &s.id);
        assert_eq!(lib.bytes, reader.bytes_on_disk());
        assert!(lib.bytes > 0);
        same_json(&lib.to_json(), &ref_json(&r, lib.bytes));
        if lib.tools.values().any(|t| t.latency.len() > 1) {
            with_latency += 1;
        }
    }
    assert!(with_latency >= 6, "{with_latency}");
}

#[test]
fn the_whole_store() {
    let corpus = Corpus::build();
    let all = corpus.store.stats().unwrap();
    assert_eq!(all.sessions, corpus.sessions.len() as u64);
    let refs: Vec<RefStats> = corpus
        .sessions
        .iter()
        .map(|s| ref_stats(&s.events))
        .collect();
    let r = ref_merge(&refs);
    same(&all.total, &r, "--all");
    let bytes: u64 = corpus
        .sessions
        .iter()
        .map(|s| corpus.store.open_reader(&s.id).unwrap().bytes_on_disk())
        .sum();
    assert_eq!(all.total.bytes, bytes);
    let mut want = ref_json(&r, bytes);
    want["sessions"] = serde_json::json!(corpus.sessions.len());
    same_json(&all.to_json(), &want);
    // The medians are over every latency of the store, not a combination of the sessions'.
    let bash = &all.total.tools["bash"];
    assert_eq!(bash.latency.median(), median(&r.tools["bash"].latencies));
}

#[test]
fn an_empty_store_and_an_empty_session() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let all = store.stats().unwrap();
    assert_eq!(all.sessions, 0);
    assert_eq!(
        all.to_json().to_string(),
        r#"{"events":0,"byType":{},"turns":0,"endReasons":{},"turnDurationMs":{"median":null,"max":null},"steps":0,"tokens":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"reasoning":0},"tools":{},"unansweredCalls":0,"bytes":0,"sessions":0}"#
    );
    let corpus = Corpus::build();
    let empty = corpus
        .store
        .open_reader("gen-empty")
        .unwrap()
        .stats()
        .unwrap();
    assert_eq!(empty.events, 0);
    assert!(empty.tools.is_empty() && empty.turn_durations.is_empty());
}

#[test]
fn the_fix_typo_example_by_hand() {
    // Independent of the reference: the numbers read off the file.
    let corpus = Corpus::build();
    let s = corpus
        .store
        .open_reader("ex-fix-typo")
        .unwrap()
        .stats()
        .unwrap();
    let json = s.to_json().to_string();
    let bytes = s.bytes;
    assert_eq!(
        json,
        format!(
            r#"{{"events":10,"byType":{{"assistant/chunk":2,"assistant/message":1,"step/end":1,"step/start":1,"tool/call":1,"tool/result":1,"turn/end":1,"turn/start":1,"user/message":1}},"turns":1,"endReasons":{{"completed":1}},"turnDurationMs":{{"median":90,"max":90}},"steps":1,"tokens":{{"input":12,"output":4,"cacheRead":0,"cacheWrite":0,"reasoning":0}},"tools":{{"bash":{{"calls":1,"errors":0,"failureRate":0,"latencyMs":{{"median":10,"max":10}}}}}},"unansweredCalls":0,"bytes":{bytes}}}"#
        )
    );
    assert_eq!(s.turn_durations.as_slice(), &[90]);
}

#[test]
fn the_collector_reads_archived_events_in_order() {
    // Fed event by event, the collector gives what the reader's stats give (but the bytes).
    let corpus = Corpus::build();
    let reader = corpus.store.open_reader("ex-tools-and-approvals").unwrap();
    let mut c = StatsCollector::new();
    for e in reader.events() {
        c.add(e.unwrap());
    }
    let mut fed = c.finish();
    assert_eq!(fed.bytes, 0);
    fed.bytes = reader.bytes_on_disk();
    assert_eq!(fed, reader.stats().unwrap());
}
