//! Redaction of secrets and personal data (docs/events.md §9).
//!
//! A [`Redactor`] holds rules (regular expressions with a name): the built-in sets
//! `credentials` and `pii` (see [`BUILTIN_RULES`]) and named custom rules. It runs on every
//! string value of an event (text, tool arguments, results, errors, unknown members, the
//! header): each match is replaced by `[REDACTED:<rule>]`, or in [`Mode::Hash`] by
//! `[HASH:<rule>:<12 hex>]`, a keyed hash of the value under the store's secret key (equal
//! values give equal tags; nothing can be reversed without the key, and not even with it).
//! The event records what fired in its envelope member `x-redacted`:
//! `[{"rule":"aws-access-key-id","path":"data.content[0].text"},…]`.
//!
//! A store turns it on in `agentlog.toml` (off by default: the default contract is lossless):
//!
//! ```toml
//! [redact]
//! rules = ["credentials", "pii"]   # sets or single rule names
//! mode = "replace"                 # or "hash" (key: <store>/redact.key, created 0600)
//! [redact.custom]
//! ticket = "TICKET-[0-9]{6}"       # a named custom rule, always on
//! ```
//!
//! ```
//! use agentlog::redact::{Mode, Redactor};
//!
//! let r = Redactor::new(&["credentials".into()], &[], Mode::Replace, None)?;
//! let mut s = String::from("export AWS_ACCESS_KEY_ID=AKIAQ4W7RZ2N5KXJ3LPM");
//! let fired = r.redact_string(&mut s);
//! assert_eq!(s, "export AWS_ACCESS_KEY_ID=[REDACTED:aws-access-key-id]");
//! assert_eq!(fired, vec!["aws-access-key-id".to_string()]);
//! # Ok::<(), String>(())
//! ```

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use regex::Regex;

use crate::error::{Error, Result};
use crate::event::{
    Block, Chunk, ErrorInfo, Event, EventData, Map, Opt, SessionHeader, ToolContent, Value,
};

/// The envelope member an event records its redactions in.
pub const REDACTED_MEMBER: &str = "x-redacted";

/// The name of a store's hash key file (32 random bytes, mode 0600).
pub const KEY_FILE: &str = "redact.key";

/// What replaces a match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// `[REDACTED:<rule>]`.
    #[default]
    Replace,
    /// `[HASH:<rule>:<12 hex>]`: the first 6 bytes of the keyed BLAKE3 hash of the value.
    Hash,
}

/// How a rule's match is confirmed beyond its pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    /// Nothing more.
    None,
    /// A key or token: not a placeholder (`EXAMPLE`, `xxxx…`, too few distinct characters).
    Token,
    /// A [`Check::Token`] holding a digit (so `sk-loading-spinner` is a CSS class, not a key).
    TokenWithDigit,
    /// A password value: not a placeholder (`${VAR}`, `<password>`, `****`, `string`, …).
    Value,
    /// A card number: 13 to 19 digits passing the Luhn check.
    Luhn,
    /// An e-mail address, not a Git remote's `git@host` (`git@github.com:owner/repo.git`).
    Email,
    /// A phone number: 10 to 15 digits. Without `+` or parentheses, only `NXX-NXX-XXXX` or
    /// `NXX.NXX.XXXX` (the same separator twice): `250 300 1200` is a run of numbers.
    Phone,
}

/// One built-in rule: name, set, pattern (group 1, when there is one, is the secret), check.
pub struct BuiltinRule {
    /// The rule's name, as written in tags and findings.
    pub name: &'static str,
    /// Its set: `credentials` or `pii`.
    pub set: &'static str,
    pattern: &'static str,
    check: Check,
}

/// The built-in rules, in priority order (where two matches overlap the earlier one wins, then
/// the rule listed first).
pub static BUILTIN_RULES: &[BuiltinRule] = &[
    BuiltinRule {
        name: "private-key",
        set: "credentials",
        // Through the END line; a key cut short (`head -5 key.pem`) through its body only:
        // the `Proc-Type:`/`DEK-Info:`/`Comment:` headers of an encrypted key and chunks of
        // base64 (16 or more characters, or a last one ending in `=`), each after a line break
        // (real, or escaped as `\n` in JSON text) or a space (a key flattened onto one line).
        pattern: r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:(?s:.*?)-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|(?:(?:(?:\r?\n|\\r\\n|\\n)[ \t]*)+(?:Proc-Type|DEK-Info|Comment):[^\r\n\\]*|(?:(?:\r?\n|\\r\\n|\\n)[ \t]*|[ \t]+)+(?:[A-Za-z0-9+/=]{16,}|[A-Za-z0-9+/]+={1,2}))*)",
        check: Check::None,
    },
    BuiltinRule {
        name: "aws-access-key-id",
        set: "credentials",
        pattern: r"\b((?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16})\b",
        check: Check::Token,
    },
    BuiltinRule {
        name: "aws-secret-access-key",
        set: "credentials",
        pattern: r#"(?i:aws_?secret_?(?:access_?)?key|secret_?access_?key)\\?["']?\s*[:=]\s*\\?["']?([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+]|$)"#,
        check: Check::Token,
    },
    BuiltinRule {
        name: "anthropic-key",
        set: "credentials",
        pattern: r"\b(sk-ant-[a-z0-9]{2,10}-[A-Za-z0-9_-]{20,})",
        check: Check::Token,
    },
    BuiltinRule {
        name: "openai-key",
        set: "credentials",
        pattern: r"\b(sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,})",
        check: Check::TokenWithDigit,
    },
    BuiltinRule {
        name: "github-token",
        set: "credentials",
        pattern: r"\b((?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
        check: Check::Token,
    },
    BuiltinRule {
        name: "gitlab-token",
        set: "credentials",
        pattern: r"\b(gl(?:pat|dt|rt|ptt|cbt)-[A-Za-z0-9_-]{20,})",
        check: Check::Token,
    },
    BuiltinRule {
        name: "slack-token",
        set: "credentials",
        pattern: r"\b(xox[abposr]-[A-Za-z0-9-]{10,}|https://hooks\.slack\.com/services/T[A-Z0-9]+/B[A-Z0-9]+/[A-Za-z0-9]{16,})",
        check: Check::Token,
    },
    BuiltinRule {
        name: "google-api-key",
        set: "credentials",
        pattern: r"\b(AIza[0-9A-Za-z_-]{35})",
        check: Check::Token,
    },
    BuiltinRule {
        name: "stripe-key",
        set: "credentials",
        pattern: r"\b((?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,})",
        check: Check::Token,
    },
    BuiltinRule {
        name: "jwt",
        set: "credentials",
        pattern: r"\b(eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{10,})",
        check: Check::None,
    },
    BuiltinRule {
        name: "url-password",
        set: "credentials",
        pattern: r#"\b[A-Za-z][A-Za-z0-9+.-]{1,15}://[^\s:/@"'<>\\]+:([^\s:/"'<>\\\[]+)@"#,
        check: Check::Value,
    },
    BuiltinRule {
        name: "password-assignment",
        set: "credentials",
        // The value: quoted (to its closing quote: `;`, `&` and `,` are in it), or bare: runs
        // of value characters joined by `;` or `&` (a connection string's `p@ss;w0rd`), cut
        // before the `;`/`&` that starts the next `name=` pair (see `before_next_pair`).
        pattern: r#"(?i:password|passwd|passphrase|secret_?key|client_?secret|api_?key|apikey|access_?token|auth_?token|session_?token)\\?["']?\s*[:=]\s*(?:\\?"([^\s"\\]{4,})\\?"|'([^\s'\\]{4,})'|\\?["']?([^\s"'\\&,;<>{}()\[\]]+(?:[;&][^\s"'\\&,;<>{}()\[\]]+)*))"#,
        check: Check::Value,
    },
    BuiltinRule {
        name: "email",
        set: "pii",
        pattern: r"\b([A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,})\b",
        check: Check::Email,
    },
    BuiltinRule {
        name: "card-number",
        set: "pii",
        pattern: r"\b((?:4\d{3}|5[1-5]\d{2}|2[2-7]\d{2}|3[47]\d{2}|6011|65\d{2})(?:[ -]?\d){9,15})\b",
        check: Check::Luhn,
    },
    BuiltinRule {
        name: "phone",
        set: "pii",
        pattern: r"(?:^|[^\w+])(\+[1-9]\d{0,2}[ .-]?(?:\(\d{1,4}\)|\d{1,4})(?:[ .-]?\d{2,4}){2,4}|\(\d{3}\)[ .-]?\d{3}[ .-]\d{4}|\b[2-9]\d{2}-[2-9]\d{2}-\d{4}|\b[2-9]\d{2}\.[2-9]\d{2}\.\d{4})\b",
        check: Check::Phone,
    },
];

/// The names of the built-in sets.
pub const SETS: &[&str] = &["credentials", "pii"];

struct Rule {
    name: String,
    regex: Regex,
    check: Check,
    /// The group that is the secret: 1 for a built-in rule that has one (the first of its
    /// groups that took part in the match, when it has several), a custom rule's group named
    /// `secret`, else 0 (the whole match).
    group: usize,
    /// The group of a bare `name=value` value that is cut before the next `name=` pair
    /// ([`before_next_pair`]): `password-assignment`'s last.
    pairs: Option<usize>,
    /// A built-in rule (its secret is the first of its groups that took part).
    builtin: bool,
}

/// A compiled set of rules and what replaces their matches.
pub struct Redactor {
    rules: Vec<Rule>,
    /// Every rule's pattern in one: a string none of them matches is passed over at once.
    any: Regex,
    mode: Mode,
    key: [u8; 32],
    /// Strings shorter than this are not scanned (6 with built-in rules only: none of them
    /// matches fewer bytes; a custom rule may).
    min_len: usize,
    /// The rule a JSON member named like a secret's label fires (`password-assignment`, when
    /// chosen), and the pattern of such names.
    member: Option<(usize, Regex)>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor")
            .field("rules", &self.rule_names())
            .field("mode", &self.mode)
            .finish()
    }
}

/// One match found by a scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Where in the event (`data.content[0].text`, `header.title`).
    pub path: String,
    /// The rule that matched.
    pub rule: String,
    /// A masked preview of the value: its first 4 characters, then `…` and its length.
    pub preview: String,
}

/// A masked preview of a secret: never more than its first 4 characters (fewer for a short one).
pub fn mask(secret: &str) -> String {
    let n = secret.chars().count();
    let shown = if n >= 16 { 4 } else { n / 4 };
    let head: String = secret.chars().take(shown).collect();
    format!("{head}…({n} chars)")
}

fn luhn(s: &str) -> bool {
    let digits: Vec<u32> = s.chars().filter_map(|c| c.to_digit(10)).collect();
    if !(13..=19).contains(&digits.len()) || digits.iter().all(|&d| d == digits[0]) {
        return false;
    }
    let mut sum = 0;
    for (i, &d) in digits.iter().rev().enumerate() {
        let d = if i % 2 == 1 { d * 2 } else { d };
        sum += if d > 9 { d - 9 } else { d };
    }
    sum % 10 == 0
}

fn distinct(s: &str) -> usize {
    let mut seen = [false; 128];
    let mut n = 0;
    for b in s.bytes().filter(|b| b.is_ascii_alphanumeric()) {
        let b = (b as usize) & 127;
        if !seen[b] {
            seen[b] = true;
            n += 1;
        }
    }
    n
}

/// The group of a match that is the secret, and its index: a custom rule's `secret` group
/// (else the whole match); the first group of a built-in rule that took part (else the whole
/// match).
fn secret_group<'h>(rule: &Rule, caps: &regex::Captures<'h>) -> Option<(usize, regex::Match<'h>)> {
    if rule.builtin {
        if let Some(found) = (1..caps.len()).find_map(|g| caps.get(g).map(|m| (g, m))) {
            return Some(found);
        }
    } else if let Some(m) = caps.get(rule.group) {
        return Some((rule.group, m));
    }
    caps.get(0).map(|m| (0, m))
}

/// The length of a bare value's part before the `;` or `&` that starts the next `name=` pair
/// (`p@ss;w0rd;Encrypt=true` → `p@ss;w0rd`, `hunter2&next=/` → `hunter2`); its whole length
/// when none does (`abc;def&x`: `def&x` and `x` are not pairs, so they are the value's).
fn before_next_pair(value: &str) -> usize {
    let b = value.as_bytes();
    for (i, &c) in b.iter().enumerate() {
        if c == b';' || c == b'&' {
            let rest = &b[i + 1..];
            let n = rest
                .iter()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
                .count();
            if n > 0 && rest.get(n) == Some(&b'=') {
                return i;
            }
        }
    }
    b.len()
}

/// Values that stand for a password in docs and code, never one.
const PLACEHOLDERS: &[&str] = &[
    "string",
    "str",
    "none",
    "null",
    "nil",
    "true",
    "false",
    "required",
    "optional",
    "undefined",
    "password",
    "passwd",
    "secret",
    "example",
    "changeme",
    "redacted",
    "hidden",
    "value",
    "your",
    "xxxx",
    "****",
    "env",
    "process",
];

impl Check {
    fn accepts(self, secret: &str) -> bool {
        if secret.starts_with("[REDACTED:") || secret.starts_with("[HASH:") {
            return false;
        }
        let lower = secret.to_ascii_lowercase();
        match self {
            Check::None => true,
            Check::Token => {
                !lower.contains("example")
                    && !lower.contains("xxxxxx")
                    && !lower.contains("000000")
                    && distinct(secret) >= 8
            }
            Check::TokenWithDigit => {
                Check::Token.accepts(secret) && secret.bytes().any(|b| b.is_ascii_digit())
            }
            Check::Value => {
                let first = secret.chars().next().unwrap_or('$');
                !matches!(first, '$' | '%' | '*' | '<' | '{' | '[')
                    && !PLACEHOLDERS.iter().any(|p| is_placeholder(&lower, p))
                    && !is_reference(secret)
                    && !lower.contains("example")
                    && !lower.contains("xxxx")
                    && distinct(secret) >= 4
            }
            Check::Luhn => luhn(secret),
            Check::Email => !lower.starts_with("git@"),
            Check::Phone => {
                let d = secret.chars().filter(char::is_ascii_digit).count();
                (10..=15).contains(&d)
            }
        }
    }
}

/// Whether a (lower-case) value is the placeholder `p`: the word itself, or the word followed
/// by a character that is not a letter or digit (`your_api_key`, `process.env.X`,
/// `password-here`). `Password2024!`, `secretsauce42` and `nullpointer-7781` are values.
fn is_placeholder(lower: &str, p: &str) -> bool {
    lower
        .strip_prefix(p)
        .is_some_and(|rest| !rest.starts_with(|c: char| c.is_ascii_alphanumeric()))
}

/// Whether a value is a reference in code rather than a secret: a label word itself
/// (`api_key=api_key`), or a dotted name (`form.password.data`, `os.environ`,
/// `getpass.getpass`).
fn is_reference(value: &str) -> bool {
    let folded: String = value
        .chars()
        .filter(|c| !matches!(c, '_' | '-'))
        .collect::<String>()
        .to_ascii_lowercase();
    if LABEL_WORDS.contains(&folded.as_str()) {
        return true;
    }
    let ident = |part: &str| {
        part.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    let mut parts = value.split('.');
    let dotted = value.contains('.') && parts.all(ident);
    dotted && !value.ends_with('.')
}

/// The label words of `password-assignment`, folded (lower case, no `_` or `-`).
const LABEL_WORDS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "secretkey",
    "clientsecret",
    "apikey",
    "accesstoken",
    "authtoken",
    "sessiontoken",
];

/// A JSON member name that labels a secret (`password`, `DB_PASSWORD`, `api_key`,
/// `AWS_SECRET_ACCESS_KEY`, `client_secret`, …): its string value is one, whole.
const SECRET_MEMBER: &str = r"(?i)(?:^|[_.-])(?:password|passwd|passphrase|secret_?key|client_?secret|api_?key|apikey|access_?token|auth_?token|session_?token|secret_?access_?key|private_?key)$";

/// A built-in pattern with ASCII classes: word boundaries, digits, word characters and spaces
/// of ASCII, so that the regex engine's DFA handles any text (a Unicode word boundary sends
/// non-ASCII text to a much slower engine) and its tables stay small. Every built-in rule is
/// about ASCII secrets.
fn ascii(pattern: &str) -> String {
    pattern
        .replace(r"\b", r"(?-u:\b)")
        .replace(r"\d", "[0-9]")
        .replace(r"[^\w", "[^0-9A-Za-z_")
        .replace(r"[^\s", r"[^\t\n\x0B\x0C\r ")
        .replace(r"\s", r"[\t\n\x0B\x0C\r ]")
}

/// The rules a list of names selects: set names, built-in rule names, custom rule names.
/// Unknown names are an error naming them.
fn select(names: &[String], custom: &[(String, String)]) -> std::result::Result<Vec<Rule>, String> {
    let mut chosen: Vec<Rule> = Vec::new();
    for name in names {
        let name = name.trim();
        let known = SETS.contains(&name)
            || BUILTIN_RULES.iter().any(|r| r.name == name)
            || custom.iter().any(|(n, _)| n == name);
        if !known {
            return Err(format!(
                "unknown redaction rule {name:?} (sets: credentials, pii; rules: {}{})",
                BUILTIN_RULES
                    .iter()
                    .map(|r| r.name)
                    .collect::<Vec<_>>()
                    .join(", "),
                custom
                    .iter()
                    .map(|(n, _)| format!(", {n}"))
                    .collect::<String>()
            ));
        }
    }
    let wanted = |rule: &str, set: &str| names.iter().any(|n| n.trim() == rule || n.trim() == set);
    for b in BUILTIN_RULES {
        if wanted(b.name, b.set) {
            let regex =
                Regex::new(&ascii(b.pattern)).map_err(|e| format!("rule {}: {e}", b.name))?;
            let group = usize::from(regex.captures_len() > 1);
            let pairs = (b.name == "password-assignment").then(|| regex.captures_len() - 1);
            chosen.push(Rule {
                name: b.name.to_string(),
                regex,
                check: b.check,
                group,
                pairs,
                builtin: true,
            });
        }
    }
    for (name, pattern) in custom {
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(format!(
                "custom rule name {name:?}: use letters, digits, '-' and '_'"
            ));
        }
        if BUILTIN_RULES.iter().any(|r| r.name == name) || SETS.contains(&name.as_str()) {
            return Err(format!(
                "custom rule {name:?}: the name of a built-in rule or set"
            ));
        }
        let regex =
            Regex::new(pattern).map_err(|e| format!("custom rule {name:?} = {pattern:?}: {e}"))?;
        let group = regex
            .capture_names()
            .position(|n| n == Some("secret"))
            .unwrap_or(0);
        chosen.push(Rule {
            name: name.clone(),
            regex,
            check: Check::None,
            group,
            pairs: None,
            builtin: false,
        });
    }
    Ok(chosen)
}

/// A path in an event, built on the stack as the walk descends (no allocation until a match).
#[derive(Clone, Copy)]
struct At<'a> {
    parent: Option<&'a At<'a>>,
    seg: Seg<'a>,
}

#[derive(Clone, Copy)]
enum Seg<'a> {
    Name(&'a str),
    Index(usize),
}

impl<'a> At<'a> {
    fn root(name: &'a str) -> At<'a> {
        At {
            parent: None,
            seg: Seg::Name(name),
        }
    }
    fn name(&'a self, name: &'a str) -> At<'a> {
        At {
            parent: Some(self),
            seg: Seg::Name(name),
        }
    }
    fn index(&'a self, i: usize) -> At<'a> {
        At {
            parent: Some(self),
            seg: Seg::Index(i),
        }
    }
    fn render(&self) -> String {
        let mut segs = Vec::new();
        let mut at = Some(self);
        while let Some(a) = at {
            segs.push(a.seg);
            at = a.parent;
        }
        let mut out = String::new();
        for seg in segs.iter().rev() {
            match seg {
                Seg::Name(n) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(n);
                }
                Seg::Index(i) => {
                    out.push('[');
                    out.push_str(&i.to_string());
                    out.push(']');
                }
            }
        }
        out
    }
}

/// What a walk does with each string.
struct Walk<'r> {
    redactor: &'r Redactor,
    /// Replace the matches (else only record them).
    apply: bool,
    /// `(rule, path)` of each match, in order.
    fired: Vec<(String, String)>,
    /// The findings of a scan (not applying).
    findings: Vec<Finding>,
}

/// `s` with each JSON escape of a control character (`\n`, `\r`, `\t`, `\b`, `\f`) made two
/// spaces (the same length), or `None` when it has none.
fn unescape_view(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let escape = |i: usize| {
        bytes[i] == b'\\' && matches!(bytes.get(i + 1), Some(b'n' | b'r' | b't' | b'b' | b'f'))
    };
    // Most strings hold no backslash: `find` looks for one with memchr.
    let first = s.find('\\')?;
    let first = (first..bytes.len()).find(|&i| escape(i))?;
    let mut out = bytes.to_vec();
    let mut i = first;
    while i < out.len() {
        if escape(i) {
            out[i] = b' ';
            out[i + 1] = b' ';
            i += 2;
        } else {
            i += 1;
        }
    }
    // Only ASCII bytes were changed, for ASCII bytes: still UTF-8.
    String::from_utf8(out).ok()
}

/// `s` with its JSON escapes decoded (`\u0061` → `a`, a surrogate pair → its character, a lone
/// surrogate → U+FFFD, `\n` `\r` `\t` `\b` `\f` → a space, `\"` `\\` `\/` → the character),
/// and for each byte of it (and its end) the offset in `s` of what it was decoded from; `None`
/// when `s` holds no `\u` escape (the other escapes are seen by [`unescape_view`]).
fn decoded_view(s: &str) -> Option<(String, Vec<usize>)> {
    if !s.contains("\\u") {
        return None;
    }
    let bytes = s.as_bytes();
    let hex4 = |i: usize| -> Option<u32> {
        let h = s.get(i..i + 4)?;
        if !h.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        u32::from_str_radix(h, 16).ok()
    };
    let mut out = String::with_capacity(s.len());
    let mut map = Vec::with_capacity(s.len() + 1);
    let push = |out: &mut String, map: &mut Vec<usize>, c: char, from: usize| {
        let before = out.len();
        out.push(c);
        map.extend(std::iter::repeat_n(from, out.len() - before));
    };
    let mut i = 0;
    let mut any = false;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            let decoded = match bytes.get(i + 1) {
                Some(b'u') => hex4(i + 2).map(|u| {
                    // A surrogate pair is two escapes.
                    let low = (0xD800..0xDC00)
                        .contains(&u)
                        .then(|| {
                            (bytes.get(i + 6) == Some(&b'\\') && bytes.get(i + 7) == Some(&b'u'))
                                .then(|| hex4(i + 8))
                                .flatten()
                        })
                        .flatten()
                        .filter(|l| (0xDC00..0xE000).contains(l));
                    match low {
                        Some(l) => (
                            char::from_u32(0x10000 + ((u - 0xD800) << 10) + (l - 0xDC00)),
                            12,
                        ),
                        None => (char::from_u32(u), 6),
                    }
                }),
                Some(b'n' | b'r' | b't' | b'b' | b'f') => Some((Some(' '), 2)),
                Some(b'"') => Some((Some('"'), 2)),
                Some(b'\\') => Some((Some('\\'), 2)),
                Some(b'/') => Some((Some('/'), 2)),
                _ => None,
            };
            if let Some((c, len)) = decoded {
                any |= len >= 6;
                push(&mut out, &mut map, c.unwrap_or('\u{FFFD}'), i);
                i += len;
                continue;
            }
        }
        // Not an escape: the character as it is.
        let Some(c) = s.get(i..).and_then(|rest| rest.chars().next()) else {
            break;
        };
        push(&mut out, &mut map, c, i);
        i += c.len_utf8();
    }
    map.push(s.len());
    any.then_some((out, map))
}

/// The byte ranges of the tags a redaction wrote into `s`: `[REDACTED:RULE]` and
/// `[HASH:RULE:HEX]`, HEX the 12 hex digits of [`Redactor::tag`], RULE a name `is_rule`
/// accepts (so that no text in brackets can pass a secret off as a tag).
fn tag_spans(s: &str, is_rule: impl Fn(&str) -> bool) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut from = 0;
    while let Some(at) = s[from..].find('[').map(|i| from + i) {
        from = at + 1;
        let rest = &s[at..];
        let (body, hashed) = match rest.strip_prefix("[REDACTED:") {
            Some(body) => (body, false),
            None => match rest.strip_prefix("[HASH:") {
                Some(body) => (body, true),
                None => continue,
            },
        };
        let Some(close) = body.find(']') else {
            break;
        };
        let inner = &body[..close];
        let name = if hashed {
            match inner.rsplit_once(':') {
                Some((name, hex))
                    if hex.len() == 12
                        && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) =>
                {
                    name
                }
                _ => continue,
            }
        } else {
            inner
        };
        if is_rule(name) {
            let end = at + (rest.len() - body.len()) + close + 1;
            spans.push((at, end));
            from = end;
        }
    }
    spans
}

/// A JSON-escaped secret as it reads (`sk-\u0061bc…` → `sk-abc…`): what hash mode hashes, so
/// equal values give equal tags however they were written.
fn decoded_secret(secret: &str) -> std::borrow::Cow<'_, str> {
    match decoded_view(secret) {
        Some((d, _)) => std::borrow::Cow::Owned(d),
        None => std::borrow::Cow::Borrowed(secret),
    }
}

/// The bytes a `rawHex` string (an imported line that is not UTF-8: two lower- or upper-case
/// hex digits a byte) holds, or `None` when it is not one.
fn unhex(hex: &str) -> Option<Vec<u8>> {
    let b = hex.as_bytes();
    if !b.len().is_multiple_of(2) {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16);
    b.chunks(2)
        .map(|p| Some((digit(p[0])? * 16 + digit(p[1])?) as u8))
        .collect()
}

fn to_hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 15)]));
    }
    out
}

impl Walk<'_> {
    /// A `rawHex` source line (docs/import.md): its bytes decoded and each run of UTF-8 in them
    /// scanned; redacted, the bytes are encoded again with the bytes that are not UTF-8 as they
    /// were. Returns false when `hex` is not hex (then it is scanned as a string).
    fn raw_hex(&mut self, hex: &mut String, at: &At<'_>) -> bool {
        let Some(bytes) = unhex(hex) else {
            return false;
        };
        let mut out: Vec<u8> = Vec::with_capacity(bytes.len());
        let mut changed = false;
        for piece in bytes.utf8_chunks() {
            let mut text = piece.valid().to_string();
            let hits = self.redactor.hits(&text);
            changed |= !hits.is_empty();
            self.apply_hits(&mut text, hits, at);
            out.extend_from_slice(text.as_bytes());
            out.extend_from_slice(piece.invalid());
        }
        if changed && self.apply {
            *hex = to_hex(&out);
        }
        true
    }

    fn string(&mut self, s: &mut String, at: &At<'_>) {
        let hits = self.redactor.hits(s);
        self.apply_hits(s, hits, at);
    }

    fn apply_hits(&mut self, s: &mut String, hits: Vec<(usize, usize, usize)>, at: &At<'_>) {
        if hits.is_empty() {
            return;
        }
        let path = at.render();
        if self.apply {
            for (_, _, rule) in &hits {
                self.fired
                    .push((self.redactor.rules[*rule].name.clone(), path.clone()));
            }
            *s = self.redactor.replace(s, &hits);
        } else {
            for (start, end, rule) in hits {
                self.findings.push(Finding {
                    path: path.clone(),
                    rule: self.redactor.rules[rule].name.clone(),
                    preview: mask(&s[start..end]),
                });
            }
        }
    }

    fn opt_string(&mut self, s: &mut Opt<String>, at: &At<'_>) {
        if let Opt::Present(s) = s {
            self.string(s, at);
        }
    }

    fn map(&mut self, m: &mut Map, at: &At<'_>) {
        for (key, value) in m.values_mut() {
            let at = at.name(key);
            // A member named like a secret's label holds one: its whole string value
            // (`{"password":"…"}`, `{"AWS_SECRET_ACCESS_KEY":"…"}`).
            if let Value::String(s) = value {
                if let Some(rule) = self.redactor.member_hit(key, s) {
                    let whole = vec![(0, s.len(), rule)];
                    self.apply_hits(s, whole, &at);
                    continue;
                }
                // An imported line that is not UTF-8, kept as hex in `x-source`.
                if key == "rawHex" && self.raw_hex(s, &at) {
                    continue;
                }
            }
            self.value(value, &at);
        }
    }

    fn value(&mut self, v: &mut Value, at: &At<'_>) {
        match v {
            Value::String(s) => self.string(s, at),
            Value::Array(items) => {
                for (i, item) in items.iter_mut().enumerate() {
                    self.value(item, &at.index(i));
                }
            }
            Value::Object(m) => self.map(m, at),
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }

    fn opt_value(&mut self, v: &mut Opt<Value>, at: &At<'_>) {
        if let Opt::Present(v) = v {
            self.value(v, at);
        }
    }

    fn blocks(&mut self, blocks: &mut [Block], at: &At<'_>) {
        for (i, b) in blocks.iter_mut().enumerate() {
            let at = at.index(i);
            match b {
                Block::Text { text, extra } | Block::Reasoning { text, extra } => {
                    self.string(text, &at.name("text"));
                    self.map(extra, &at);
                }
                Block::ToolUse {
                    id,
                    name,
                    input,
                    extra,
                } => {
                    self.string(id, &at.name("id"));
                    self.string(name, &at.name("name"));
                    self.value(input, &at.name("input"));
                    self.map(extra, &at);
                }
                Block::ToolResult {
                    tool_use_id,
                    tool_name,
                    content,
                    extra,
                    ..
                } => {
                    self.string(tool_use_id, &at.name("toolUseId"));
                    self.string(tool_name, &at.name("toolName"));
                    self.tool_content(content, &at.name("content"));
                    self.map(extra, &at);
                }
                Block::Other(m) => self.map(m, &at),
            }
        }
    }

    fn tool_content(&mut self, c: &mut ToolContent, at: &At<'_>) {
        match c {
            ToolContent::Text(s) => self.string(s, at),
            ToolContent::Blocks(b) => self.blocks(b, at),
        }
    }

    fn error_info(&mut self, e: &mut Opt<ErrorInfo>, at: &At<'_>) {
        if let Opt::Present(e) = e {
            self.opt_string(&mut e.code, &at.name("code"));
            self.opt_string(&mut e.message, &at.name("message"));
            self.map(&mut e.extra, at);
        }
    }

    fn event(&mut self, e: &mut Event) {
        let root = At::root("data");
        let at = &root;
        match &mut e.data {
            EventData::TurnStart(d) => self.map(&mut d.extra, at),
            EventData::TurnEnd(d) => {
                let r = at.name("reason");
                self.error_info(&mut d.reason.error, &r.name("error"));
                self.map(&mut d.reason.extra, &r);
                self.map(&mut d.extra, at);
            }
            EventData::StepStart(d) => {
                if let Opt::Present(req) = &mut d.request {
                    self.map(req, &at.name("request"));
                }
                self.map(&mut d.extra, at);
            }
            EventData::StepEnd(d) => self.map(&mut d.extra, at),
            EventData::UserMessage(d) => {
                self.blocks(&mut d.content, &at.name("content"));
                self.opt_value(&mut d.envelope, &at.name("envelope"));
                self.map(&mut d.extra, at);
            }
            EventData::AssistantChunk(d) => {
                let c = at.name("chunk");
                match &mut d.chunk {
                    Chunk::TextDelta { text, extra } | Chunk::ReasoningDelta { text, extra } => {
                        self.string(text, &c.name("text"));
                        self.map(extra, &c);
                    }
                    Chunk::ToolCallDelta {
                        id,
                        name,
                        arguments,
                        extra,
                    } => {
                        self.opt_string(id, &c.name("id"));
                        self.opt_string(name, &c.name("name"));
                        self.opt_string(arguments, &c.name("arguments"));
                        self.map(extra, &c);
                    }
                    Chunk::Other(m) => self.map(m, &c),
                }
                self.map(&mut d.extra, at);
            }
            EventData::AssistantMessage(d) => {
                let m = at.name("message");
                self.blocks(&mut d.message.content, &m.name("content"));
                self.opt_string(&mut d.message.provider, &m.name("provider"));
                self.opt_string(&mut d.message.model, &m.name("model"));
                self.opt_value(&mut d.message.replay, &m.name("replay"));
                self.map(&mut d.message.extra, &m);
                if let Opt::Present(u) = &mut d.usage {
                    self.map(&mut u.extra, &at.name("usage"));
                }
                self.map(&mut d.extra, at);
            }
            EventData::ToolCall(d) => {
                self.string(&mut d.call_id, &at.name("callId"));
                self.string(&mut d.name, &at.name("name"));
                self.string(&mut d.arguments, &at.name("arguments"));
                self.map(&mut d.extra, at);
            }
            EventData::ToolResult(d) => {
                let m = at.name("message");
                self.string(&mut d.message.tool_name, &m.name("toolName"));
                self.tool_content(&mut d.message.content, &m.name("content"));
                self.map(&mut d.message.extra, &m);
                self.opt_string(&mut d.call_id, &at.name("callId"));
                self.error_info(&mut d.error, &at.name("error"));
                self.opt_value(&mut d.meta, &at.name("meta"));
                self.map(&mut d.extra, at);
            }
            EventData::SystemMessage(d) => {
                self.blocks(&mut d.content, &at.name("content"));
                self.map(&mut d.extra, at);
            }
            EventData::ApprovalRequest(d) => {
                self.string(&mut d.call_id, &at.name("callId"));
                self.string(&mut d.tool, &at.name("tool"));
                self.opt_string(&mut d.reason, &at.name("reason"));
                self.map(&mut d.extra, at);
            }
            EventData::ApprovalDecision(d) => {
                self.string(&mut d.call_id, &at.name("callId"));
                self.opt_string(&mut d.by, &at.name("by"));
                self.opt_string(&mut d.note, &at.name("note"));
                self.map(&mut d.extra, at);
            }
            EventData::SandboxEvent(d) => {
                self.string(&mut d.kind, &at.name("kind"));
                self.opt_value(&mut d.detail, &at.name("detail"));
                self.map(&mut d.extra, at);
            }
            EventData::Error(d) => {
                self.string(&mut d.message, &at.name("message"));
                self.opt_string(&mut d.stack, &at.name("stack"));
                self.map(&mut d.extra, at);
            }
            EventData::CompactStart(d) => self.map(&mut d.extra, at),
            EventData::CompactSummary(d) => {
                self.string(&mut d.summary, &at.name("summary"));
                if let Opt::Present(u) = &mut d.usage {
                    self.map(&mut u.extra, &at.name("usage"));
                }
                self.map(&mut d.extra, at);
            }
            EventData::CompactEnd(d) => self.map(&mut d.extra, at),
            EventData::Unknown(d) => self.map(&mut d.data, at),
        }
        // Unknown envelope members (an importer's `x-source`), not the record of redactions.
        for (key, value) in e.extra.values_mut() {
            if key != REDACTED_MEMBER {
                self.value(value, &At::root(key));
            }
        }
    }
}

impl Redactor {
    /// A redactor of the rules `names` selects (set names, built-in rule names, custom rule
    /// names) plus every rule of `custom` (`(name, pattern)`), replacing as `mode` says; `key`
    /// is the hash key ([`Mode::Hash`]; all zeros when `None`).
    pub fn new(
        names: &[String],
        custom: &[(String, String)],
        mode: Mode,
        key: Option<[u8; 32]>,
    ) -> std::result::Result<Redactor, String> {
        let rules = select(names, custom)?;
        let any = if rules.is_empty() {
            // Matches nothing.
            Regex::new(r"[^\s\S]")
        } else {
            Regex::new(
                &rules
                    .iter()
                    .map(|r| format!("(?:{})", r.regex.as_str()))
                    .collect::<Vec<_>>()
                    .join("|"),
            )
        }
        .map_err(|e| e.to_string())?;
        let min_len = if custom.is_empty() { 6 } else { 1 };
        let member = match rules.iter().position(|r| r.name == "password-assignment") {
            Some(i) => Some((i, Regex::new(SECRET_MEMBER).map_err(|e| e.to_string())?)),
            None => None,
        };
        Ok(Redactor {
            rules,
            any,
            mode,
            key: key.unwrap_or([0; 32]),
            min_len,
            member,
        })
    }

    /// The names of the rules it applies, in priority order.
    pub fn rule_names(&self) -> Vec<String> {
        self.rules.iter().map(|r| r.name.clone()).collect()
    }

    /// The mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The non-overlapping matches in `s`: `(start, end, rule index)`, in order.
    ///
    /// A string holding JSON escapes (a raw source line, a tool's output that is JSON text) is
    /// also scanned as if each escape of a control character (`\n`, `\r`, `\t`, `\b`, `\f`)
    /// were two spaces: a token that starts a line there follows the escape's letter, and no
    /// word boundary would be found before it. The view has the string's length, so its
    /// matches are the string's.
    ///
    /// The result is a fixed point: a rule's matches do not overlap, so one match can hide
    /// another that starts inside it (a label a longer token swallowed), which a scan of the
    /// redacted string would then find; such matches are added (at most two more rounds), so
    /// redacting twice changes nothing the first time did not.
    fn hits(&self, s: &str) -> Vec<(usize, usize, usize)> {
        let mut hits = self.hits_once(s);
        for _ in 0..2 {
            if hits.is_empty() {
                break;
            }
            let redacted = self.replace(s, &hits);
            let more = self.hits_once(&redacted);
            if more.is_empty() {
                break;
            }
            // Back to `s`'s offsets: the text between tags is `s`'s, shifted by what the tags
            // before it changed (no new match overlaps a tag: `hits_once` leaves tags out).
            let tags: Vec<usize> = hits
                .iter()
                .map(|&(a, b, r)| self.tag(&self.rules[r].name, &s[a..b]).len())
                .collect();
            let mut mapped = Vec::with_capacity(more.len());
            for (start, end, rule) in more {
                let mut shift: isize = 0;
                let mut pos = 0usize;
                for (&(a, b, _), &tag) in hits.iter().zip(&tags) {
                    let at = a.checked_add_signed(shift).unwrap_or(a);
                    if at >= start {
                        break;
                    }
                    shift += tag as isize - (b - a) as isize;
                    pos = b;
                }
                let (Some(a), Some(b)) = (
                    start.checked_add_signed(-shift),
                    end.checked_add_signed(-shift),
                ) else {
                    continue;
                };
                if a >= pos && b <= s.len() && s.is_char_boundary(a) && s.is_char_boundary(b) {
                    mapped.push((a, b, rule));
                }
            }
            if mapped.is_empty() {
                break;
            }
            hits.extend(mapped);
            hits.sort_by_key(|&(start, end, _)| (start, end));
            let mut kept: Vec<(usize, usize, usize)> = Vec::with_capacity(hits.len());
            for h in hits {
                if kept.last().is_none_or(|last| h.0 >= last.1) {
                    kept.push(h);
                }
            }
            hits = kept;
        }
        hits
    }

    /// One scan's matches ([`Redactor::hits`]).
    fn hits_once(&self, s: &str) -> Vec<(usize, usize, usize)> {
        if s.len() < self.min_len {
            return Vec::new();
        }
        let view = unescape_view(s);
        let decoded = decoded_view(s);
        if !self.any.is_match(s)
            && !view.as_deref().is_some_and(|v| self.any.is_match(v))
            && !decoded.as_ref().is_some_and(|(d, _)| self.any.is_match(d))
        {
            return Vec::new();
        }
        let mut hits = Vec::new();
        self.scan(s, s, &mut hits);
        if let Some(v) = &view {
            self.scan(v, s, &mut hits);
        }
        if let Some((d, map)) = &decoded {
            // Its matches are checked as they read, and replaced where their escapes are.
            let mut found = Vec::new();
            self.scan(d, d, &mut found);
            for (start, end, rule) in found {
                if let (Some(&a), Some(&b)) = (map.get(start), map.get(end)) {
                    if a < b && s.is_char_boundary(a) && s.is_char_boundary(b) {
                        hits.push((a, b, rule));
                    }
                }
            }
        }
        // What an earlier redaction wrote is no secret: a hash tag's `url-password:4f0c…`
        // reads as a password assignment, so a second run hashed its own tags again (and
        // `secrets` reported them as found).
        let tags = self.tag_spans(s);
        if !tags.is_empty() {
            hits.retain(|&(start, end, _)| !tags.iter().any(|&(a, b)| start < b && a < end));
        }
        hits.sort_by_key(|&(start, end, rule)| (start, rule, std::cmp::Reverse(end)));
        let mut out: Vec<(usize, usize, usize)> = Vec::with_capacity(hits.len());
        for h in hits {
            if out.last().is_none_or(|last| h.0 >= last.1) {
                out.push(h);
            }
        }
        out
    }

    /// Every rule's matches in `view` (the string `s`, or a view of it of the same length)
    /// whose part of `s` passes the rule's check.
    fn scan(&self, view: &str, s: &str, hits: &mut Vec<(usize, usize, usize)>) {
        for (i, rule) in self.rules.iter().enumerate() {
            for caps in rule.regex.captures_iter(view) {
                let Some((g, m)) = secret_group(rule, &caps) else {
                    continue;
                };
                let end = match rule.pairs {
                    Some(p) if p == g => m.start() + before_next_pair(m.as_str()),
                    _ => m.end(),
                };
                // The secret as the string has it (the same bytes, escapes and all).
                let Some(secret) = s.get(m.start()..end) else {
                    continue;
                };
                if !secret.is_empty() && rule.check.accepts(secret) {
                    hits.push((m.start(), end, i));
                }
            }
        }
    }

    /// The rule a string value of a JSON member named `name` fires as a whole: a member named
    /// like a secret's label (`password`, `DB_PASSWORD`, `AWS_SECRET_ACCESS_KEY`) whose value
    /// is not a placeholder.
    fn member_hit(&self, name: &str, value: &str) -> Option<usize> {
        let (rule, names) = self.member.as_ref()?;
        if self.tag_spans(value).first() == Some(&(0, value.len())) {
            // Redacted already.
            return None;
        }
        // Every label ends so (a cheap test before the pattern).
        let tail = name.len().saturating_sub(3);
        let ends = name.get(tail..).is_some_and(|t| {
            ["ord", "swd", "ase", "key", "ret", "ken"]
                .iter()
                .any(|e| t.eq_ignore_ascii_case(e))
        });
        (ends && value.len() >= 4 && names.is_match(name) && self.rules[*rule].check.accepts(value))
            .then_some(*rule)
    }

    /// The tags of this redactor's rules in `s` ([`tag_spans`]).
    fn tag_spans(&self, s: &str) -> Vec<(usize, usize)> {
        if !s.contains("[REDACTED:") && !s.contains("[HASH:") {
            return Vec::new();
        }
        tag_spans(s, |name| self.rules.iter().any(|r| r.name == name))
    }

    fn tag(&self, rule: &str, secret: &str) -> String {
        match self.mode {
            Mode::Replace => format!("[REDACTED:{rule}]"),
            Mode::Hash => {
                let h = blake3::keyed_hash(&self.key, decoded_secret(secret).as_bytes());
                let hex: String = h.as_bytes()[..6]
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect();
                format!("[HASH:{rule}:{hex}]")
            }
        }
    }

    fn replace(&self, s: &str, hits: &[(usize, usize, usize)]) -> String {
        let mut out = String::with_capacity(s.len());
        let mut pos = 0;
        for &(start, end, rule) in hits {
            out.push_str(&s[pos..start]);
            out.push_str(&self.tag(&self.rules[rule].name, &s[start..end]));
            pos = end;
        }
        out.push_str(&s[pos..]);
        out
    }

    /// Redacts one string in place; returns the rules that fired, one per match.
    pub fn redact_string(&self, s: &mut String) -> Vec<String> {
        let hits = self.hits(s);
        if hits.is_empty() {
            return Vec::new();
        }
        let names = hits.iter().map(|h| self.rules[h.2].name.clone()).collect();
        *s = self.replace(s, &hits);
        names
    }

    /// Redacts every string value of `event` and records each match in its `x-redacted`
    /// member (`{"rule","path"}` objects, appended to what is there). Returns the number of
    /// matches (0: the event is unchanged).
    pub fn redact_event(&self, event: &mut Event) -> usize {
        self.redact_event_after(event, Vec::new())
    }

    /// Redacts `event` and records what fired: `fired` (what was replaced before), then this
    /// walk's matches.
    fn redact_event_after(&self, event: &mut Event, mut fired: Vec<(String, String)>) -> usize {
        let mut walk = Walk {
            redactor: self,
            apply: true,
            fired: Vec::new(),
            findings: Vec::new(),
        };
        walk.event(event);
        fired.extend(walk.fired);
        record(&mut event.extra, fired)
    }

    /// The matches in arbitrary bytes (a file of a session's `damaged/` folder: cut records,
    /// salvaged events): each run of UTF-8 in them scanned as a string, `at` the path of each
    /// finding.
    pub fn scan_bytes(&self, bytes: &[u8], at: &str) -> Vec<Finding> {
        let mut out = Vec::new();
        for piece in bytes.utf8_chunks() {
            let text = piece.valid();
            for (start, end, rule) in self.hits(text) {
                out.push(Finding {
                    path: at.to_string(),
                    rule: self.rules[rule].name.clone(),
                    preview: mask(text.get(start..end).unwrap_or_default()),
                });
            }
        }
        out
    }

    /// The matches in `event`, without changing it.
    pub fn scan_event(&self, event: &Event) -> Vec<Finding> {
        // The walk takes `&mut` (one walk for both uses): a scan runs on a copy only when the
        // cheap check says something may match.
        let mut copy = event.clone();
        let mut walk = Walk {
            redactor: self,
            apply: false,
            fired: Vec::new(),
            findings: Vec::new(),
        };
        walk.event(&mut copy);
        walk.findings
    }

    /// Redacts the strings of a session header (title, cwd, unknown members), recording the
    /// matches in its `x-redacted` member. Returns the number of matches.
    pub fn redact_header(&self, h: &mut SessionHeader) -> usize {
        let mut walk = Walk {
            redactor: self,
            apply: true,
            fired: Vec::new(),
            findings: Vec::new(),
        };
        walk.header_parts(&mut h.title, &mut h.cwd, &mut h.extra);
        record(&mut h.extra, walk.fired)
    }

    /// Redacts the strings of a session's metadata that its header holds (title, cwd, unknown
    /// header members) and its agent configuration. Returns the number of matches.
    pub fn redact_meta(&self, m: &mut crate::session::SessionMeta) -> usize {
        let mut walk = Walk {
            redactor: self,
            apply: true,
            fired: Vec::new(),
            findings: Vec::new(),
        };
        walk.header_parts(&mut m.title, &mut m.cwd, &mut m.header_extra);
        if let Some(c) = &mut m.config {
            walk.value(c, &At::root("config"));
        }
        let n = walk.fired.len();
        record(&mut m.header_extra, walk.fired);
        n
    }

    /// The matches in a session's metadata (title, cwd, header members, configuration).
    pub fn scan_meta(&self, m: &crate::session::SessionMeta) -> Vec<Finding> {
        let mut copy = m.clone();
        let mut walk = Walk {
            redactor: self,
            apply: false,
            fired: Vec::new(),
            findings: Vec::new(),
        };
        walk.header_parts(&mut copy.title, &mut copy.cwd, &mut copy.header_extra);
        if let Some(c) = &mut copy.config {
            walk.value(c, &At::root("config"));
        }
        walk.findings
    }
}

/// Finds the secrets of a session's `assistant/chunk` events that are split across chunks (a
/// key's first half in one `text-delta`, the rest in the next; docs/events.md §9). A stream is
/// the text deltas of one step, its reasoning deltas, or the argument deltas of one tool call
/// (a delta naming an `id` starts the next call's), in seq order. Feed it the session's events
/// in order with [`ChunkStreams::push`], then [`ChunkStreams::finish`]. A stream is searched
/// once it is complete (its step's chunks end, or its tool call's do), and its text dropped:
/// memory holds the chunks of one step, whatever the session's length.
#[derive(Debug)]
pub struct ChunkStreams<'r> {
    redactor: &'r Redactor,
    streams: Vec<Stream>,
    /// The stream each `(turn, step, kind)` appends to.
    open: HashMap<(u64, u64, u8), usize>,
    /// The step whose chunks the streams hold.
    step: Option<(u64, u64)>,
    found: SplitSecrets,
}

#[derive(Debug)]
struct Stream {
    /// The chunk member its pieces are in (`text`, `arguments`).
    field: &'static str,
    text: String,
    /// Each piece: the chunk's seq and where its text starts in `text`.
    parts: Vec<(u64, usize)>,
}

impl<'r> ChunkStreams<'r> {
    /// Streams searched with `redactor`'s rules.
    pub fn new(redactor: &'r Redactor) -> ChunkStreams<'r> {
        ChunkStreams {
            redactor,
            streams: Vec::new(),
            open: HashMap::new(),
            step: None,
            found: SplitSecrets::default(),
        }
    }

    /// Adds event `seq` (only `assistant/chunk` deltas are kept; other events are passed over).
    /// A chunk of another step than the last one's completes the streams held.
    pub fn push(&mut self, seq: u64, e: &Event) {
        let EventData::AssistantChunk(d) = &e.data else {
            return;
        };
        if self.step != Some((d.turn, d.step)) {
            self.search_all();
            self.step = Some((d.turn, d.step));
        }
        let (kind, field, text, starts_call) = match &d.chunk {
            Chunk::TextDelta { text, .. } => (0u8, "text", text.as_str(), false),
            Chunk::ReasoningDelta { text, .. } => (1, "text", text.as_str(), false),
            Chunk::ToolCallDelta { id, arguments, .. } => {
                let starts = id.is_present();
                if starts {
                    // The last call's arguments are complete.
                    if let Some(i) = self.open.remove(&(d.turn, d.step, 2)) {
                        self.search(i);
                    }
                }
                match arguments.present() {
                    Some(a) => (2, "arguments", a.as_str(), starts),
                    None => return,
                }
            }
            Chunk::Other(_) => return,
        };
        let key = (d.turn, d.step, kind);
        let i = match self.open.get(&key) {
            Some(&i) if !starts_call => i,
            _ => {
                self.streams.push(Stream {
                    field,
                    text: String::new(),
                    parts: Vec::new(),
                });
                let i = self.streams.len() - 1;
                self.open.insert(key, i);
                i
            }
        };
        if let Some(st) = self.streams.get_mut(i) {
            st.parts.push((seq, st.text.len()));
            st.text.push_str(text);
        }
    }

    /// The secrets found split across chunks, once every event was pushed.
    pub fn finish(mut self) -> SplitSecrets {
        self.search_all();
        self.found
    }

    /// Searches every stream held, and lets go of them.
    fn search_all(&mut self) {
        for i in 0..self.streams.len() {
            self.search(i);
        }
        self.streams.clear();
        self.open.clear();
    }

    /// Searches stream `i` (complete) and drops its text.
    fn search(&mut self, i: usize) {
        if let Some(st) = self.streams.get_mut(i) {
            let st = std::mem::replace(
                st,
                Stream {
                    field: st.field,
                    text: String::new(),
                    parts: Vec::new(),
                },
            );
            self.redactor.split_stream(&st, &mut self.found);
        }
    }
}

/// The secrets [`ChunkStreams`] found split across chunks: for each chunk's seq, the
/// parts of its text that are one.
#[derive(Debug, Default)]
pub struct SplitSecrets {
    parts: BTreeMap<u64, Vec<SplitPart>>,
}

#[derive(Debug)]
struct SplitPart {
    /// The chunk member (`text`, `arguments`).
    field: &'static str,
    start: usize,
    end: usize,
    rule: usize,
    /// The whole secret, on the part it starts in (which takes its tag; the other parts are
    /// removed, so that the streamed text reads as one tag).
    whole: Option<String>,
}

impl SplitSecrets {
    /// Whether none was found.
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }
}

/// The chunk member `field` of an `assistant/chunk` event.
fn chunk_field<'e>(e: &'e mut Event, field: &str) -> Option<&'e mut String> {
    let EventData::AssistantChunk(d) = &mut e.data else {
        return None;
    };
    match (&mut d.chunk, field) {
        (Chunk::TextDelta { text, .. } | Chunk::ReasoningDelta { text, .. }, "text") => Some(text),
        (
            Chunk::ToolCallDelta {
                arguments: Opt::Present(a),
                ..
            },
            "arguments",
        ) => Some(a),
        _ => None,
    }
}

impl Redactor {
    /// The secrets of stream `st` split across two or more of its chunks (one that lies in a
    /// single chunk is found by that event's own scan), added to `out`.
    fn split_stream(&self, st: &Stream, out: &mut SplitSecrets) {
        if st.parts.len() < 2 {
            return;
        }
        // The piece a byte is in: the last one starting at or before it.
        let piece = |at: usize| st.parts.partition_point(|p| p.1 <= at).saturating_sub(1);
        for (start, end, rule) in self.hits(&st.text) {
            let (first, last) = (piece(start), piece(end.saturating_sub(1)));
            if first == last {
                continue;
            }
            for k in first..=last {
                let Some(&(seq, from)) = st.parts.get(k) else {
                    continue;
                };
                let to = st.parts.get(k + 1).map_or(st.text.len(), |p| p.1);
                let (a, b) = (start.max(from), end.min(to));
                if a >= b {
                    continue;
                }
                out.parts.entry(seq).or_default().push(SplitPart {
                    field: st.field,
                    start: a - from,
                    end: b - from,
                    rule,
                    whole: (k == first)
                        .then(|| st.text.get(start..end).unwrap_or_default().to_string()),
                });
            }
        }
    }

    /// Replaces the parts of split secrets in event `seq` (the tag on the part a secret starts
    /// in, nothing on the others); returns `(rule, path)` of each part replaced.
    fn apply_split(&self, e: &mut Event, seq: u64, split: &SplitSecrets) -> Vec<(String, String)> {
        let Some(parts) = split.parts.get(&seq) else {
            return Vec::new();
        };
        let mut fired = Vec::new();
        // From the last part back, so that the offsets of the earlier ones hold.
        let mut order: Vec<&SplitPart> = parts.iter().collect();
        order.sort_by_key(|p| std::cmp::Reverse(p.start));
        for p in order {
            let Some(s) = chunk_field(e, p.field) else {
                continue;
            };
            if p.end > s.len() || !s.is_char_boundary(p.start) || !s.is_char_boundary(p.end) {
                continue;
            }
            let name = &self.rules[p.rule].name;
            let with = p
                .whole
                .as_deref()
                .map_or(String::new(), |w| self.tag(name, w));
            s.replace_range(p.start..p.end, &with);
            fired.push((name.clone(), format!("data.chunk.{}", p.field)));
        }
        fired.reverse();
        fired
    }

    /// [`Redactor::redact_event`] of event `seq`, first replacing the parts of the secrets
    /// `split` found split across chunks.
    pub fn redact_event_split(&self, event: &mut Event, seq: u64, split: &SplitSecrets) -> usize {
        let fired = self.apply_split(event, seq, split);
        self.redact_event_after(event, fired)
    }

    /// [`Redactor::scan_event`] of event `seq`, with the secrets `split` found split across
    /// chunks: each reported once, on the chunk it starts in (path `data.chunk.text`, the
    /// preview of the whole secret).
    pub fn scan_event_split(&self, event: &Event, seq: u64, split: &SplitSecrets) -> Vec<Finding> {
        let Some(parts) = split.parts.get(&seq) else {
            return self.scan_event(event);
        };
        let mut out: Vec<Finding> = parts
            .iter()
            .filter_map(|p| {
                p.whole.as_deref().map(|w| Finding {
                    path: format!("data.chunk.{}", p.field),
                    rule: self.rules[p.rule].name.clone(),
                    preview: mask(w),
                })
            })
            .collect();
        let mut copy = event.clone();
        self.apply_split(&mut copy, seq, split);
        out.extend(self.scan_event(&copy));
        out
    }
}

impl Walk<'_> {
    fn header_parts(&mut self, title: &mut Opt<String>, cwd: &mut Opt<String>, extra: &mut Map) {
        let root = At::root("header");
        self.opt_string(title, &root.name("title"));
        self.opt_string(cwd, &root.name("cwd"));
        for (key, value) in extra.values_mut() {
            if key != REDACTED_MEMBER {
                self.value(value, &root.name(key));
            }
        }
    }
}

/// Appends `fired` to the `x-redacted` array of `extra` (creating it). Returns its length.
fn record(extra: &mut Map, fired: Vec<(String, String)>) -> usize {
    let n = fired.len();
    if n == 0 {
        return 0;
    }
    let items = fired.into_iter().map(|(rule, path)| {
        let mut m = Map::new();
        let _ = m.push("rule", Value::String(rule));
        let _ = m.push("path", Value::String(path));
        Value::Object(m)
    });
    match extra.get_mut(REDACTED_MEMBER) {
        Some(Value::Array(list)) => list.extend(items),
        Some(other) => *other = Value::Array(items.collect()),
        None => {
            let _ = extra.push(REDACTED_MEMBER, Value::Array(items.collect()));
        }
    }
    n
}

/// Reads the store's hash key (`<root>/redact.key`), creating it with 32 random bytes (mode
/// 0600) when it does not exist.
pub fn load_or_create_key(root: &Path) -> Result<[u8; 32]> {
    use std::io::{Read, Write};
    let path = root.join(KEY_FILE);
    match std::fs::read(&path) {
        Ok(bytes) => {
            return bytes.try_into().map_err(|b: Vec<u8>| Error::BadFile {
                path: path.clone(),
                reason: format!(
                    "a redaction key is 32 bytes, this file holds {}: restore it from a backup \
                     (a new key gives every hashed value a new tag)",
                    b.len()
                ),
            })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io("read", &path, e)),
    }
    let mut key = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut key))
        .map_err(|e| Error::io("read", Path::new("/dev/urandom"), e))?;
    let tmp = root.join(format!("{KEY_FILE}.tmp{}", std::process::id()));
    {
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(|e| Error::io("create", &tmp, e))?;
        f.write_all(&key)
            .and_then(|()| f.sync_all())
            .map_err(|e| Error::io("write", &tmp, e))?;
    }
    // Two processes creating it at once: the first one's key wins, the other reads it.
    match std::fs::hard_link(&tmp, &path) {
        Ok(()) => {
            let _ = std::fs::remove_file(&tmp);
            Ok(key)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let _ = std::fs::remove_file(&tmp);
            load_or_create_key(root)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(Error::io("create", &path, e))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn luhn_and_mask() {
        assert!(luhn("4111 1111 1111 1111"));
        assert!(!luhn("4111 1111 1111 1112"));
        assert_eq!(mask("AKIAQ4W7RZ2N5KXJ3LPM"), "AKIA…(20 chars)");
        assert_eq!(mask("hunter22"), "hu…(8 chars)");
    }

    /// `ChunkStreams` held the text of every chunk of a session until the end (a 1 GB session
    /// of streamed text held most of it). A step's streams are now searched and dropped when
    /// the next step's chunks start, and a tool call's when the next call's do; the split
    /// secrets of each are still found.
    #[test]
    fn chunk_streams_hold_one_step_and_still_find_split_secrets() {
        let r = match Redactor::new(&["credentials".into()], &[], Mode::Replace, None) {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        };
        let chunk = |turn: u64, step: u64, chunk: &str| {
            let line = format!(
                r#"{{"type":"assistant/chunk","seq":0,"time":1,"data":{{"turn":{turn},"step":{step},"chunk":{chunk}}}}}"#
            );
            match crate::event::parse_event_line(&line) {
                Ok(e) => e,
                Err(e) => panic!("{line}: {e}"),
            }
        };
        let text = |s: &str| format!(r#"{{"type":"text-delta","text":"{s}"}}"#);
        let call = |id: &str, a: &str| {
            format!(r#"{{"type":"tool-call-delta","id":"{id}","arguments":"{a}"}}"#)
        };
        let events = [
            chunk(1, 1, &text("key AKIAQ4W7")),
            chunk(1, 1, &text("RZ2N5KXJ3LPM here")),
            chunk(1, 1, &call("c1", "ghp_R8mK2pQ7")),
            chunk(
                1,
                1,
                r#"{"type":"tool-call-delta","arguments":"vX4nL9wT3jH6bF1sD5gY0cZ8aE2u"}"#,
            ),
            chunk(1, 1, &call("c2", "x")),
            chunk(1, 2, &text("then AKIAZ9W7")),
            chunk(1, 2, &text("RZ2N5KXJ3LPQ")),
        ];
        let mut streams = ChunkStreams::new(&r);
        for (seq, e) in events.iter().enumerate() {
            streams.push(seq as u64, e);
            if seq == 4 {
                // c1's arguments were searched when c2's started.
                assert!(streams.found.parts.contains_key(&2), "{:?}", streams.found);
            }
            if seq == 5 {
                // Step 1's streams were searched and dropped when step 2's chunk came.
                assert_eq!(streams.streams.len(), 1, "{:?}", streams.streams);
                assert_eq!(streams.streams[0].text, "then AKIAZ9W7");
            }
        }
        let found = streams.finish();
        let starts: Vec<u64> = found
            .parts
            .iter()
            .filter(|(_, parts)| parts.iter().any(|p| p.whole.is_some()))
            .map(|(&seq, _)| seq)
            .collect();
        assert_eq!(starts, [0, 2, 5], "{found:?}");
    }
}
