//! The redaction rules on a generated corpus (docs/events.md §9): every built-in rule finds each
//! of its planted secrets (recall), nothing fires on look-alikes (UUIDs, hashes, base64 data,
//! documentation's example keys, placeholders) nor on the real example and import sessions
//! (false positives), hash tags are keyed and stable, custom rules and config mistakes.

use testkit::secrets as secrets_common;

use agentlog::event::{parse_jsonl, Event};
use agentlog::redact::{Mode, Redactor, BUILTIN_RULES};
use agentlog::store::StoreConfig;
use secrets_common::{look_alikes, plant, Rng, RULES};

/// Every built-in rule (`credentials` and `pii`), hash mode under `key`.
pub(crate) fn all_hashed(key: [u8; 32]) -> Redactor {
    Redactor::new(
        &["credentials".into(), "pii".into()],
        &[],
        Mode::Hash,
        Some(key),
    )
    .unwrap()
}

/// Every built-in rule (`credentials` and `pii`), replace mode.
pub(crate) fn all() -> Redactor {
    Redactor::new(
        &["credentials".into(), "pii".into()],
        &[],
        Mode::Replace,
        None,
    )
    .unwrap()
}

#[test]
fn the_corpus_covers_every_builtin_rule() {
    let builtin: Vec<&str> = BUILTIN_RULES.iter().map(|r| r.name).collect();
    let mut planted: Vec<&str> = RULES.to_vec();
    planted.sort_unstable();
    let mut b = builtin.clone();
    b.sort_unstable();
    assert_eq!(planted, b);
}

#[test]
fn every_rule_finds_every_planted_secret() {
    let r = all();
    let mut rng = Rng::new(20);
    for rule in RULES {
        for i in 0..50 {
            let p = plant(rule, &mut rng);
            let mut s = p.text.clone();
            let fired = r.redact_string(&mut s);
            assert!(
                !s.contains(&p.secret),
                "{rule} #{i}: the secret survived: {s:?} (from {:?})",
                p.text
            );
            assert!(
                fired.iter().any(|f| f == rule),
                "{rule} #{i}: fired {fired:?} on {:?}",
                p.text
            );
            assert!(s.contains(&format!("[REDACTED:{rule}]")), "{s}");
        }
    }
}

#[test]
fn a_rule_alone_finds_its_secrets_and_its_set_selects_it() {
    let mut rng = Rng::new(7);
    for b in BUILTIN_RULES {
        let alone = Redactor::new(&[b.name.to_string()], &[], Mode::Replace, None).unwrap();
        assert_eq!(alone.rule_names(), vec![b.name.to_string()]);
        let set = Redactor::new(&[b.set.to_string()], &[], Mode::Replace, None).unwrap();
        assert!(set.rule_names().contains(&b.name.to_string()));
        let p = plant(RULES.iter().find(|r| **r == b.name).unwrap(), &mut rng);
        let mut s = p.text.clone();
        alone.redact_string(&mut s);
        assert!(!s.contains(&p.secret), "{}: {s}", b.name);
    }
    // The other set does not.
    let pii = Redactor::new(&["pii".into()], &[], Mode::Replace, None).unwrap();
    let p = plant("aws-access-key-id", &mut rng);
    let mut s = p.text.clone();
    assert!(pii.redact_string(&mut s).is_empty());
}

#[test]
fn look_alikes_do_not_match() {
    let r = all();
    let mut rng = Rng::new(99);
    for _ in 0..100 {
        for text in look_alikes(&mut rng) {
            let mut s = text.clone();
            let fired = r.redact_string(&mut s);
            assert!(fired.is_empty(), "{fired:?} fired on {text:?}: {s}");
        }
    }
}

/// The sessions that ship with the repository (examples, imported real transcripts exported):
/// no finding.
#[test]
fn no_false_positive_on_the_example_sessions() {
    let r = all();
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/sessions");
    let mut events = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if !p.to_string_lossy().ends_with(".jsonl") {
            continue;
        }
        let bytes = std::fs::read(&p).unwrap();
        let (_, lines): (_, Vec<Event>) = parse_jsonl(&bytes).unwrap();
        for e in lines {
            events += 1;
            let f = r.scan_event(&e);
            assert!(f.is_empty(), "{}: seq {}: {f:?}", p.display(), e.seq);
        }
    }
    assert!(events > 20, "{events}");
}

#[test]
fn redaction_records_rule_and_path_and_round_trips() {
    let r = all();
    let mut rng = Rng::new(3);
    let key = plant("github-token", &mut rng);
    let line = format!(
        r#"{{"type":"tool/result","seq":4,"time":5,"data":{{"turn":1,"step":1,"message":{{"role":"tool","toolName":"sh","content":[{{"type":"text","text":"ok"}},{{"type":"text","text":{}}}],"isError":false}},"meta":{{"env":["a",{}]}}}}}}"#,
        agentlog::event::Value::String(key.text.clone()),
        agentlog::event::Value::String("mail a.b@c.org".to_string()),
    );
    let mut e = agentlog::event::parse_event_line(&line).unwrap();
    let n = r.redact_event(&mut e);
    assert_eq!(n, 2);
    let out = e.to_canonical_string();
    assert!(!out.contains(&key.secret));
    assert!(out.ends_with(
        r#","x-redacted":[{"rule":"github-token","path":"data.message.content[1].text"},{"rule":"email","path":"data.meta.env[1]"}]}"#
    ), "{out}");
    // The redacted event is a canonical line: it reads back to itself.
    let back = agentlog::event::parse_event_line(&out).unwrap();
    assert_eq!(back, e);
    assert_eq!(back.to_canonical_string(), out);
    // Redacting again finds nothing (the tags are not secrets) and changes nothing.
    let mut again = back.clone();
    assert_eq!(r.redact_event(&mut again), 0);
    assert_eq!(again, back);
}

#[test]
fn hash_tags_are_keyed_stable_and_irreversible() {
    let k1 = [1u8; 32];
    let k2 = [2u8; 32];
    let h1 = Redactor::new(&["credentials".into()], &[], Mode::Hash, Some(k1)).unwrap();
    let h2 = Redactor::new(&["credentials".into()], &[], Mode::Hash, Some(k2)).unwrap();
    let mut rng = Rng::new(5);
    let a = plant("aws-access-key-id", &mut rng);
    let b = plant("aws-access-key-id", &mut rng);
    let tag = |r: &Redactor, t: &str| {
        let mut s = t.to_string();
        r.redact_string(&mut s);
        s
    };
    let ta = tag(&h1, &a.text);
    assert_eq!(ta, tag(&h1, &a.text), "equal values, equal tags");
    assert_ne!(ta, tag(&h1, &b.text), "different values, different tags");
    assert_ne!(ta, tag(&h2, &a.text), "another key, another tag");
    let t = ta.strip_prefix("export AWS_ACCESS_KEY_ID=").unwrap();
    let hex = t
        .strip_prefix("[HASH:aws-access-key-id:")
        .and_then(|x| x.strip_suffix(']'))
        .unwrap();
    assert_eq!(hex.len(), 12);
    assert!(hex.chars().all(|c| c.is_ascii_hexdigit()));
    assert!(!ta.contains(&a.secret));
}

#[test]
fn custom_rules_and_config_mistakes() {
    let c = StoreConfig::parse(
        "[redact]\nrules = [\"pii\"]\nmode = \"replace\"\n[redact.custom]\nticket = \"TICKET-[0-9]{6}\"\n",
    )
    .unwrap();
    let r = c.redactor().unwrap();
    assert_eq!(
        r.rule_names(),
        vec!["email", "card-number", "phone", "ticket"]
    );
    let mut s = "see TICKET-123456 and TICKET-12".to_string();
    assert_eq!(r.redact_string(&mut s), vec!["ticket"]);
    assert_eq!(s, "see [REDACTED:ticket] and TICKET-12");
    // Off by default.
    assert!(StoreConfig::parse("").unwrap().redactor().is_none());
    for (text, needle) in [
        ("[redact]\nrules = [\"creds\"]", "creds"),
        ("[redact]\nmode = \"blur\"", "redact.mode"),
        ("[redact]\nrule = []", "redact.rule"),
        ("[redact.custom]\nbad = \"(\"", "bad"),
        ("[redact.custom]\nemail = \"x\"", "email"),
    ] {
        let e = StoreConfig::parse(text).unwrap_err();
        assert!(e.contains(needle), "{text}: {e}");
    }
}
