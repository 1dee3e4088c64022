//! The redaction rules on random text (docs/events.md §9): planted secrets of every rule,
//! look-alikes and random fragments (multi-byte characters, escapes, quotes, separators) run
//! together in random order, in both modes. Redaction never panics, whatever the bytes around a
//! match; its output holds only text of the input and tags; and it is idempotent: redacting
//! the output again finds nothing, so a second `secrets --redact` run changes nothing.

use testkit::secrets as secrets_common;
use testkit::{env_count, seed};

use agentlog::redact::{Mode, Redactor};
use secrets_common::{look_alikes, plant, Rng, RULES};

use crate::secrets_corpus::all;

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
    let hash = Redactor::new(
        &["credentials".into(), "pii".into()],
        &[],
        Mode::Hash,
        Some([7u8; 32]),
    )
    .unwrap();
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
