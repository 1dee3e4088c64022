//! The redaction rules on random text (docs/events.md §9): planted secrets of every rule,
//! look-alikes and random fragments (multi-byte characters, escapes, quotes, separators) run
//! together in random order, in both modes. Redaction never panics, whatever the bytes around a
//! match; its output holds only text of the input and tags; and it is idempotent: redacting
//! the output again finds nothing, so a second `secrets --redact` run changes nothing. The same
//! through the store, on whole sessions (`Store::redact`, `Store::scan_secrets`), with secrets
//! in streamed deltas cut at random places. More inputs: `AGENTLOG_FUZZ_ITERS`, `AGENTLOG_SEED`.

use testkit::secrets as secrets_common;
use testkit::{env_count, seed};

use secrets_common::{look_alikes, plant, Rng, RULES};

use crate::secrets_corpus::{all, all_hashed};

/// Fragments that sit next to secrets in real text, or split them from their labels.
const FRAGMENTS: &[&str] = &[
    " ", "\n", "\\n", "\\\"", "\"", "'", "=", ": ", ":", "/", "@", "-", "_", ".", ",", "é", "中文",
    "🙂", "\u{0}", "\t", "key", "token", "password", "Bearer ", "https://", "ß", "İ", "\u{301}",
    "０", "=\"", "\r\n", "ǅ", "\u{feff}",
];

fn fragment(rng: &mut Rng) -> &'static str {
    FRAGMENTS[rng.below(FRAGMENTS.len() as u64) as usize]
}

/// A random text: one to eight pieces, each a planted secret's sentence, a look-alike, or a
/// fragment, joined with no separator or with a random fragment.
fn mixed(rng: &mut Rng, looks: &[String]) -> String {
    let mut s = String::new();
    for _ in 0..rng.range(1, 9) {
        match rng.below(3) {
            0 => {
                let rule = *rng.pick(RULES);
                s.push_str(&plant(rule, rng).text);
            }
            1 => s.push_str(rng.pick(looks).as_str()),
            _ => s.push_str(fragment(rng)),
        }
        if rng.one_in(2) {
            s.push_str(fragment(rng));
        }
    }
    s
}

#[test]
fn redaction_of_mixed_text_is_total_and_idempotent() {
    let mut rng = Rng::new(seed(0x5ec7));
    let looks = look_alikes(&mut rng);
    let hash = all_hashed([7u8; 32]);
    for (mode, r) in [("replace", all()), ("hash", hash)] {
        for i in 0..env_count("AGENTLOG_FUZZ_ITERS", 400) {
            let text = mixed(&mut rng, &looks);
            let mut once = text.clone();
            let fired = r.redact_string(&mut once);
            assert_eq!(fired.is_empty(), once == text, "{mode} #{i}: {text:?}");
            let mut twice = once.clone();
            let again = r.redact_string(&mut twice);
            assert!(
                again.is_empty() && twice == once,
                "{mode} #{i}: a second redaction fired {again:?}\n  input  {text:?}\n  once   {once:?}\n  twice  {twice:?}"
            );
        }
    }
}

/// One canonical JSONL line.
fn line(seq: u64, ty: &str, data: serde_json::Value) -> String {
    serde_json::json!({"type": ty, "seq": seq, "time": 1, "data": data}).to_string()
}

/// A session whose texts are mixed texts everywhere a secret can be: a prompt, the model's
/// streamed deltas (each text cut into pieces at random places, so secrets split across
/// chunks) and its message, a call's arguments (a JSON member named `password`), a result.
fn mixed_session(rng: &mut Rng, looks: &[String]) -> String {
    let mut lines = vec![line(0, "turn/start", serde_json::json!({"turn": 1}))];
    let mut seq = 1;
    let mut push = |ty: &str, data: serde_json::Value| {
        lines.push(line(seq, ty, data));
        seq += 1;
    };
    push(
        "user/message",
        serde_json::json!({"role": "user", "content": [{"type": "text", "text": mixed(rng, looks)}]}),
    );
    push("step/start", serde_json::json!({"turn": 1, "step": 1}));
    let said = mixed(rng, looks);
    let bounds: Vec<usize> = (0..=said.len())
        .filter(|&i| said.is_char_boundary(i))
        .collect();
    let mut cuts: Vec<usize> = (0..rng.range(1, 4))
        .map(|_| bounds[rng.below(bounds.len() as u64) as usize])
        .collect();
    cuts.extend([0, said.len()]);
    cuts.sort_unstable();
    cuts.dedup();
    for w in cuts.windows(2) {
        push(
            "assistant/chunk",
            serde_json::json!({"turn": 1, "step": 1, "chunk": {"type": "text-delta", "text": &said[w[0]..w[1]]}}),
        );
    }
    let arguments = serde_json::json!({"password": mixed(rng, looks), "cmd": mixed(rng, looks)});
    push(
        "assistant/message",
        serde_json::json!({"turn": 1, "step": 1, "message": {"role": "assistant", "content": [
            {"type": "text", "text": said},
            {"type": "tool_use", "id": "c1", "name": "sh", "input": arguments}
        ]}}),
    );
    push(
        "tool/call",
        serde_json::json!({"turn": 1, "step": 1, "callId": "c1", "name": "sh", "arguments": arguments.to_string()}),
    );
    push(
        "tool/result",
        serde_json::json!({"turn": 1, "step": 1, "callId": "c1", "message": {"role": "tool", "toolName": "sh", "content": mixed(rng, looks), "isError": false}}),
    );
    push("step/end", serde_json::json!({"turn": 1, "step": 1}));
    push(
        "turn/end",
        serde_json::json!({"turn": 1, "reason": {"kind": "completed"}}),
    );
    lines.join("\n") + "\n"
}

/// `Store::redact` (what `secrets --redact` runs) leaves a session in which `Store::scan_secrets`
/// (what `secrets` runs) finds nothing and a second `redact` rewrites nothing, in both modes,
/// whatever the mixed texts hold and however the deltas cut them.
#[test]
fn a_redacted_session_holds_nothing_a_second_run_finds() {
    use agentlog::store::{ImportOptions, Store};
    let mut rng = Rng::new(seed(0x5ec8));
    let looks = look_alikes(&mut rng);
    let hash = all_hashed([9u8; 32]);
    let replace = all();
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path()).unwrap();
    for i in 0..env_count("AGENTLOG_FUZZ_ITERS", 20) {
        let text = mixed_session(&mut rng, &looks);
        for (mode, r) in [("replace", &replace), ("hash", &hash)] {
            let id = format!("m{i}-{mode}");
            let options = ImportOptions {
                id: Some(id.clone()),
                title: None,
            };
            store
                .import(text.as_bytes(), options, |_| {})
                .unwrap_or_else(|e| panic!("{id}: {e}\n{text}"));
            store.redact(&id, r).unwrap();
            let left = store.scan_secrets(&id, r).unwrap();
            assert!(
                left.is_empty(),
                "{id}: found after redaction: {left:?}\n{text}"
            );
            assert!(store.redact(&id, r).unwrap().is_empty(), "{id}");
        }
    }
}
