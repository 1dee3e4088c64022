//! Search: every filter alone and combined, compared with a straightforward computation over
//! the exported JSONL (parsed with serde_json) of the example sessions and of generated ones;
//! order, limit, case-insensitivity (ASCII and not), `tool/*`, time bounds, turns; the text
//! matcher against `str::to_lowercase` (property tests).

use testkit::search as search_common;

use std::ops::ControlFlow;

use agentlog::store::{Query, SearchStats, TextMatcher};
use agentlog::Error;
use proptest::prelude::*;
use search_common::{ref_search, Corpus, RefQuery, Rng, TOOLS};

/// The library's matches, checking on the way that each event is written exactly as the
/// exported line of that seq.
fn lib_search(corpus: &Corpus, q: &RefQuery) -> (Vec<(String, u64)>, SearchStats) {
    let mut found = Vec::new();
    let stats = corpus
        .store
        .search(&q.to_query(), |id, e| {
            let s = corpus.sessions.iter().find(|s| s.id == id).unwrap();
            assert_eq!(e.to_canonical_string(), s.lines[e.seq() as usize]);
            found.push((id.to_string(), e.seq()));
            ControlFlow::Continue(())
        })
        .unwrap();
    assert_eq!(stats.matches, found.len() as u64);
    (found, stats)
}

#[track_caller]
fn check(corpus: &Corpus, q: &RefQuery) -> usize {
    let expected = ref_search(corpus, q);
    let (got, _) = lib_search(corpus, q);
    assert_eq!(got, expected, "{q:?}");
    got.len()
}

/// Filter values worth trying, from the corpus.
struct Values {
    types: Vec<Vec<String>>,
    tools: Vec<String>,
    turns: Vec<u64>,
    times: Vec<(Option<i64>, Option<i64>)>,
    texts: Vec<String>,
    limits: Vec<usize>,
}

fn values(corpus: &Corpus) -> Values {
    let mut times: Vec<i64> = corpus
        .sessions
        .iter()
        .flat_map(|s| s.events.iter().map(|e| e["time"].as_i64().unwrap()))
        .collect();
    times.sort();
    let at = |f: f64| times[((times.len() - 1) as f64 * f) as usize];
    let (t1, t2, t3) = (at(0.1), at(0.5), at(0.9));
    let strs = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    Values {
        types: vec![
            strs(&["tool/call"]),
            strs(&["tool/*"]),
            strs(&["*"]),
            strs(&["approval/decision"]),
            strs(&["approval/*"]),
            strs(&["hook/invoked"]),
            strs(&["error"]),
            strs(&["turn/*"]),
            strs(&["nope/*"]),
            strs(&["tool"]),
            strs(&["tool/result", "user/message"]),
            strs(&["assistant/*", "system/message", "sandbox/event"]),
        ],
        tools: TOOLS
            .iter()
            .map(|t| t.to_string())
            .chain(["search", "nope", "edit-alias"].map(String::from))
            .collect(),
        turns: vec![0, 1, 2, 3, 5, 8, 100],
        times: vec![
            (Some(t2), None),
            (None, Some(t2)),
            (Some(t1), Some(t3)),
            (Some(t2), Some(t2)),
            (Some(t2), Some(t2 + 1)),
            (Some(i64::MIN), Some(i64::MAX)),
        ],
        texts: strs(&[
            "fail",
            "FAILED",
            "permission denied",
            "PERMISSION DENIED",
            "école",
            "ÉCOLE",
            "straße",
            "STRASSE",
            "ẞ",
            "ünïcode",
            "ÜNÏCODE",
            "日本",
            "🚀",
            "naïve",
            "ǆ",
            "ωMEGA",
            "σοφία",
            "\"quoted\"",
            "back\\slash",
            "tab\th",
            "line\nbreak",
            "x",
            "call_",
            "cmd",
            "deep",
            "image",
            "",
            "zz-never-there",
        ]),
        limits: vec![0, 1, 7, 1000],
    }
}

#[test]
fn the_corpus_has_what_the_filters_need() {
    let corpus = Corpus::build();
    let all = ref_search(&corpus, &RefQuery::default());
    assert!(all.len() > 2000, "{}", all.len());
    let count = |q: RefQuery| ref_search(&corpus, &q).len();
    for tool in TOOLS {
        let q = |t: &str| RefQuery {
            types: vec![t.into()],
            tool: Some(tool.into()),
            ..RefQuery::default()
        };
        assert!(count(q("tool/call")) > 5, "{tool}");
        assert!(count(q("approval/decision")) > 0, "{tool}");
    }
    // Case-insensitive matches that differ in case from the needle, in several kinds of text.
    let text = |t: &str, types: &[&str]| RefQuery {
        text: Some(t.into()),
        types: types.iter().map(|s| s.to_string()).collect(),
        ..RefQuery::default()
    };
    for ty in [
        "user/message",
        "assistant/message",
        "tool/call",
        "tool/result",
    ] {
        assert!(count(text("ÉCOLE", &[ty])) > 0, "{ty}");
        assert!(count(text("failed", &[ty])) > 0, "{ty}");
    }
    // Unknown types, events outside turns, and the deleted session excluded.
    assert!(count(text("", &["hook/invoked"])) > 0);
    assert!(!corpus.sessions.iter().any(|s| s.id == "gen-deleted"));
    assert!(corpus.sessions.iter().any(|s| s.events.is_empty()));
}

#[test]
fn every_filter_alone() {
    let corpus = Corpus::build();
    let v = values(&corpus);
    let all = check(&corpus, &RefQuery::default());
    let total: usize = corpus.sessions.iter().map(|s| s.events.len()).sum();
    assert_eq!(all, total);
    for types in &v.types {
        check(
            &corpus,
            &RefQuery {
                types: types.clone(),
                ..RefQuery::default()
            },
        );
    }
    for tool in &v.tools {
        let n = check(
            &corpus,
            &RefQuery {
                tool: Some(tool.clone()),
                ..RefQuery::default()
            },
        );
        assert_eq!(n > 0, tool != "nope", "{tool}");
    }
    for &turn in &v.turns {
        check(
            &corpus,
            &RefQuery {
                turn: Some(turn),
                ..RefQuery::default()
            },
        );
    }
    for &(since, until) in &v.times {
        check(
            &corpus,
            &RefQuery {
                since,
                until,
                ..RefQuery::default()
            },
        );
    }
    for text in &v.texts {
        let n = check(
            &corpus,
            &RefQuery {
                text: Some(text.clone()),
                ..RefQuery::default()
            },
        );
        if text.is_empty() {
            assert_eq!(n, total);
        }
    }
    for &limit in &v.limits {
        let n = check(
            &corpus,
            &RefQuery {
                limit: Some(limit),
                ..RefQuery::default()
            },
        );
        assert_eq!(n, limit.min(total));
    }
}

#[test]
fn filters_combined() {
    let corpus = Corpus::build();
    let v = values(&corpus);
    // Every pair of filters, each with a few values.
    for types in v.types.iter().take(6) {
        for tool in &v.tools {
            check(
                &corpus,
                &RefQuery {
                    types: types.clone(),
                    tool: Some(tool.clone()),
                    ..RefQuery::default()
                },
            );
        }
        for text in v.texts.iter().step_by(3) {
            check(
                &corpus,
                &RefQuery {
                    types: types.clone(),
                    text: Some(text.clone()),
                    ..RefQuery::default()
                },
            );
        }
    }
    for tool in &v.tools {
        for &turn in &v.turns {
            check(
                &corpus,
                &RefQuery {
                    tool: Some(tool.clone()),
                    turn: Some(turn),
                    ..RefQuery::default()
                },
            );
        }
    }
    for &(since, until) in &v.times {
        for text in v.texts.iter().step_by(4) {
            check(
                &corpus,
                &RefQuery {
                    since,
                    until,
                    text: Some(text.clone()),
                    ..RefQuery::default()
                },
            );
        }
    }
    // Random combinations of everything, sessions and limits included.
    let ids: Vec<String> = corpus.sessions.iter().map(|s| s.id.clone()).collect();
    let mut rng = Rng(42);
    let mut nonempty = 0;
    for _ in 0..300 {
        let mut q = RefQuery::default();
        if rng.one_in(2) {
            q.types = rng.pick(&v.types).clone();
        }
        if rng.one_in(2) {
            q.tool = Some(rng.pick(&v.tools).clone());
        }
        if rng.one_in(3) {
            q.turn = Some(*rng.pick(&v.turns));
        }
        if rng.one_in(3) {
            (q.since, q.until) = *rng.pick(&v.times);
        }
        if rng.one_in(2) {
            q.text = Some(rng.pick(&v.texts).clone());
        }
        if rng.one_in(3) {
            q.limit = Some(*rng.pick(&v.limits));
        }
        if rng.one_in(4) {
            let mut some: Vec<String> = ids.iter().filter(|_| rng.one_in(2)).cloned().collect();
            some.reverse(); // given in any order, searched in id order
            q.sessions = Some(some);
        }
        if check(&corpus, &q) > 0 {
            nonempty += 1;
        }
    }
    assert!(nonempty > 60, "{nonempty}");
}

#[test]
fn limits_stop_the_scan_and_order_is_session_then_seq() {
    let corpus = Corpus::build();
    let (all, full) = lib_search(&corpus, &RefQuery::default());
    let mut sorted = all.clone();
    sorted.sort();
    assert_eq!(all, sorted);
    let total: u64 = corpus.sessions.iter().map(|s| s.events.len() as u64).sum();
    assert_eq!(full.events_scanned, total);
    // Every session is searched once, empty one included; each event once.
    assert_eq!(full.sessions, corpus.sessions.len() as u64);
    let bytes: u64 = corpus
        .sessions
        .iter()
        .map(|s| {
            let r = corpus.store.open_reader(&s.id).unwrap();
            r.log()
                .iter()
                .map(|rec| rec.unwrap().payload.len() as u64)
                .sum::<u64>()
        })
        .sum();
    assert_eq!(full.bytes_scanned, bytes);

    let (first, stats) = lib_search(
        &corpus,
        &RefQuery {
            limit: Some(3),
            ..RefQuery::default()
        },
    );
    assert_eq!(first, all[..3]);
    assert_eq!((stats.events_scanned, stats.sessions), (3, 1));
    let (none, stats) = lib_search(
        &corpus,
        &RefQuery {
            limit: Some(0),
            ..RefQuery::default()
        },
    );
    assert!(none.is_empty());
    assert_eq!(stats, SearchStats::default());

    // The callback stops the search too.
    let mut seen = 0;
    let stats = corpus
        .store
        .search(&Query::new().event_type("tool/result"), |_, _| {
            seen += 1;
            if seen == 5 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .unwrap();
    assert_eq!((seen, stats.matches), (5, 5));
    assert!(stats.events_scanned < total);
}

#[test]
fn one_session_and_named_sessions() {
    let corpus = Corpus::build();
    let q = RefQuery {
        tool: Some("bash".into()),
        text: Some("the".into()),
        ..RefQuery::default()
    };
    for s in &corpus.sessions {
        let only = RefQuery {
            sessions: Some(vec![s.id.clone()]),
            ..q.clone()
        };
        let expected = ref_search(&corpus, &only);
        assert_eq!(lib_search(&corpus, &only).0, expected);
        // The session-level search gives the same, ignoring the query's sessions.
        let reader = corpus.store.open_reader(&s.id).unwrap();
        let mut seqs = Vec::new();
        let stats = reader
            .search(&q.to_query().session("ignored"), |e| {
                seqs.push(e.seq());
                ControlFlow::Continue(())
            })
            .unwrap();
        let want: Vec<u64> = expected.iter().map(|(_, seq)| *seq).collect();
        assert_eq!(seqs, want, "{}", s.id);
        assert_eq!(stats.events_scanned, s.events.len() as u64);
    }
    // A session named twice is searched once.
    let id = corpus.sessions[0].id.clone();
    let twice = Query::new().session(id.as_str()).session(id.as_str());
    let stats = corpus
        .store
        .search(&twice, |_, _| ControlFlow::Continue(()))
        .unwrap();
    assert_eq!(stats.sessions, 1);
    // A deleted session and a missing one are errors when named.
    let deleted = corpus
        .store
        .search(&Query::new().session("gen-deleted"), |_, _| {
            ControlFlow::Continue(())
        })
        .unwrap_err();
    assert!(
        matches!(deleted, Error::Deleted(ref id) if id == "gen-deleted"),
        "{deleted}"
    );
    let missing = corpus
        .store
        .search(&Query::new().session("no-such"), |_, _| {
            ControlFlow::Continue(())
        })
        .unwrap_err();
    assert!(matches!(missing, Error::NotFound(_)), "{missing}");
}

#[test]
fn approval_decisions_follow_their_call_within_the_turn() {
    // Call ids are reused across turns with other tools: a decision matches the tool of the
    // call (or request) with its callId in its own turn.
    let corpus = Corpus::build();
    let mut reused = false;
    for s in &corpus.sessions {
        let mut by_id: std::collections::HashMap<String, Vec<(u64, String)>> =
            std::collections::HashMap::new();
        for e in &s.events {
            if e["type"] == "tool/call" {
                let d = &e["data"];
                by_id
                    .entry(d["callId"].as_str().unwrap().into())
                    .or_default()
                    .push((
                        d["turn"].as_u64().unwrap(),
                        d["name"].as_str().unwrap().into(),
                    ));
            }
        }
        reused |= by_id.values().any(|v| v.iter().any(|(_, n)| *n != v[0].1));
    }
    assert!(
        reused,
        "the corpus should reuse call ids across turns with other tools"
    );
    for tool in TOOLS {
        check(
            &corpus,
            &RefQuery {
                types: vec!["approval/decision".into()],
                tool: Some(tool.into()),
                ..RefQuery::default()
            },
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// ASCII text: exactly `to_lowercase().contains`.
    #[test]
    fn matcher_on_ascii(hay in "[ -~]{0,40}", needle in "[a-eA-E .]{0,4}") {
        let expected = hay.to_lowercase().contains(&needle.to_lowercase());
        prop_assert_eq!(TextMatcher::new(&needle).is_match(&hay), expected);
    }

    /// Mixed text, from an alphabet with characters whose case changes their UTF-8 length
    /// (ẞ/ß, Ω/ω, Ⱥ/ⱥ), titlecase digraphs, and ASCII; without the documented exceptions
    /// (Greek capital sigma, KELVIN SIGN, capital I with dot).
    #[test]
    fn matcher_on_mixed_text(
        hay in proptest::collection::vec(
            proptest::sample::select(vec!['a', 'A', 'b', 'é', 'É', 'ß', 'ẞ', 'Ω', 'ω', 'Ⱥ', 'ⱥ', 'ǅ', 'ǆ', 'Ǆ', 'ü', 'Ü', '日', '🚀', ' ', 'k', 'K']),
            0..24,
        ),
        needle in proptest::collection::vec(
            proptest::sample::select(vec!['a', 'A', 'é', 'É', 'ß', 'ẞ', 'Ω', 'ω', 'ⱥ', 'Ⱥ', 'ǅ', 'Ǆ', 'ü', '日', 'k', 'K']),
            0..4,
        ),
    ) {
        let hay: String = hay.into_iter().collect();
        let needle: String = needle.into_iter().collect();
        let expected = hay.to_lowercase().contains(&needle.to_lowercase());
        prop_assert_eq!(TextMatcher::new(&needle).is_match(&hay), expected, "{:?} in {:?}", needle, hay);
    }
}

/// `search --text` matches canonically equivalent text: a needle typed composed (NFC) finds
/// text stored decomposed (NFD), and the other way round, case still ignored.
#[test]
fn text_matches_canonically_equivalent_unicode() {
    let nfc = "Caf\u{e9} cr\u{e8}me";
    let nfd = "Cafe\u{301} cre\u{300}me";
    for (needle, hay) in [(nfc, nfd), (nfd, nfc), (nfc, nfc), (nfd, nfd)] {
        let m = TextMatcher::new(&needle.to_uppercase());
        assert!(m.is_match(&format!("a {hay} b")), "{needle:?} in {hay:?}");
    }
    assert!(!TextMatcher::new("caf\u{e9}").is_match("cafe"));
    assert!(!TextMatcher::new("cafe\u{301}").is_match("caf\u{e8}"));
}
