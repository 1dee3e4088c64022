//! Helpers for the redaction tests: planted secrets of every built-in rule (random, so no test
//! passes on one lucky value), look-alikes that must not match, and a `grep -r` of a store.

use std::path::{Path, PathBuf};

pub use crate::Rng;

pub const UPPER: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
pub const ALNUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
pub const B64: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
pub const B64URL: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
pub const HEX: &str = "0123456789abcdef";

/// A planted secret: the text put in an event, the secret inside it (what must be gone
/// afterwards) and the rule that must find it.
#[derive(Debug, Clone)]
pub struct Planted {
    pub rule: &'static str,
    pub text: String,
    pub secret: String,
}

fn luhn_digit(digits: &[u32]) -> u32 {
    // The check digit making digits + [d] pass.
    let mut sum = 0;
    for (i, &d) in digits.iter().rev().enumerate() {
        let d = if i % 2 == 0 { d * 2 } else { d };
        sum += if d > 9 { d - 9 } else { d };
    }
    (10 - sum % 10) % 10
}

/// Every built-in rule's name.
pub const RULES: &[&str] = &[
    "aws-access-key-id",
    "aws-secret-access-key",
    "anthropic-key",
    "openai-key",
    "github-token",
    "gitlab-token",
    "slack-token",
    "google-api-key",
    "stripe-key",
    "jwt",
    "private-key",
    "url-password",
    "password-assignment",
    "email",
    "card-number",
    "phone",
];

/// One random planted secret of `rule`, in a sentence.
pub fn plant(rule: &'static str, r: &mut Rng) -> Planted {
    let (text, secret) = match rule {
        "aws-access-key-id" => {
            let s = format!(
                "AKIA{}",
                r.string_from("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)
            );
            (format!("export AWS_ACCESS_KEY_ID={s}"), s)
        }
        "aws-secret-access-key" => {
            let s = r.string_from(B64, 40);
            (
                format!("aws_secret_access_key = {s}\nregion = eu-west-1"),
                s,
            )
        }
        "anthropic-key" => {
            let s = format!("sk-ant-api03-{}", r.string_from(B64URL, 93));
            (format!("ANTHROPIC_API_KEY={s}"), s)
        }
        "openai-key" => {
            let s = format!("sk-proj-{}", r.string_from(ALNUM, 48));
            (format!("client = OpenAI(api_key=\"{s}\")"), s)
        }
        "github-token" => {
            let s = format!("ghp_{}", r.string_from(ALNUM, 36));
            (
                format!("git clone https://x-access-token:{s}@github.com/o/r"),
                s,
            )
        }
        "gitlab-token" => {
            let s = format!("glpat-{}", r.string_from(ALNUM, 20));
            (format!("GITLAB_TOKEN {s} set"), s)
        }
        "slack-token" => {
            let s = format!(
                "xoxb-{}-{}-{}",
                r.string_from("0123456789", 12),
                r.string_from("0123456789", 13),
                r.string_from(ALNUM, 24)
            );
            (format!("slack token: {s}"), s)
        }
        "google-api-key" => {
            let s = format!("AIza{}", r.string_from(B64URL, 35));
            (format!("maps?key={s}&q=x"), s)
        }
        "stripe-key" => {
            let s = format!("sk_live_{}", r.string_from(ALNUM, 24));
            (format!("Stripe.api_key = '{s}'"), s)
        }
        "jwt" => {
            let s = format!(
                "eyJ{}.eyJ{}.{}",
                r.string_from(B64URL, 30),
                r.string_from(B64URL, 60),
                r.string_from(B64URL, 43)
            );
            (format!("Authorization: Bearer {s}"), s)
        }
        "private-key" => {
            let body: Vec<String> = (0..4).map(|_| r.string_from(B64, 64)).collect();
            let s = format!(
                "-----BEGIN RSA PRIVATE KEY-----\n{}\n-----END RSA PRIVATE KEY-----",
                body.join("\n")
            );
            (format!("cat id_rsa\n{s}\n$ "), body.join("\n"))
        }
        "url-password" => {
            let s = r.string_from(ALNUM, 14);
            (
                format!("DATABASE_URL=postgres://app:{s}@db.internal:5432/main"),
                s,
            )
        }
        "password-assignment" => {
            let s = format!("{}{}", r.string_from(ALNUM, 12), r.string_from("!#%^+", 2));
            (format!("mysql -u root --password={s} db"), s)
        }
        "email" => {
            let s = format!(
                "{}.{}@{}.com",
                r.string_from("abcdefghij", 6),
                r.string_from("klmnopqrst", 7),
                r.string_from("uvwxyzabc", 8)
            );
            (format!("Signed-off-by: Someone <{s}>"), s)
        }
        "card-number" => {
            let mut d: Vec<u32> = vec![4];
            d.extend((0..14).map(|_| r.below(10) as u32));
            d.push(luhn_digit(&d));
            let s: String = d
                .iter()
                .map(|x| char::from_digit(*x, 10).unwrap())
                .collect();
            let s = format!("{} {} {} {}", &s[0..4], &s[4..8], &s[8..12], &s[12..16]);
            (format!("card: {s}, exp 12/29"), s)
        }
        "phone" => {
            let s = format!(
                "+1 {} {} {}",
                r.string_from("23456789", 3),
                r.string_from("0123456789", 3),
                r.string_from("0123456789", 4)
            );
            (format!("call me at {s} tomorrow"), s)
        }
        other => panic!("no generator for {other}"),
    };
    Planted { rule, text, secret }
}

/// Text that looks like secrets and is not: UUIDs, hashes, base64 data, documentation's
/// example keys, placeholders, timestamps, non-Luhn card-like numbers.
pub fn look_alikes(r: &mut Rng) -> Vec<String> {
    let uuid = format!(
        "{}-{}-4{}-a{}-{}",
        r.string_from(HEX, 8),
        r.string_from(HEX, 4),
        r.string_from(HEX, 3),
        r.string_from(HEX, 3),
        r.string_from(HEX, 12)
    );
    let mut card: Vec<u32> = vec![4];
    card.extend((0..14).map(|_| r.below(10) as u32));
    let bad = (luhn_digit(&card) + 1) % 10;
    card.push(bad);
    let card: String = card
        .iter()
        .map(|x| char::from_digit(*x, 10).unwrap())
        .collect();
    vec![
        format!("request id {uuid}"),
        format!("commit {}", r.string_from(HEX, 40)),
        format!("sha256:{}", r.string_from(HEX, 64)),
        format!("data:image/png;base64,{}==", r.string_from(B64, 300)),
        format!("{{\"blob\":\"{}\"}}", r.string_from(B64URL, 120)),
        "AWS docs: AKIAIOSFODNN7EXAMPLE".to_string(),
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".to_string(),
        "OPENAI_API_KEY=sk-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx".to_string(),
        "export GITHUB_TOKEN=ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx".to_string(),
        "password=${DB_PASSWORD}".to_string(),
        "password: <your-password>".to_string(),
        "api_key = \"YOUR_API_KEY\"".to_string(),
        "postgres://user:password@localhost/db".to_string(),
        "the password field is a string: `password: string`".to_string(),
        format!("time {}", 1_755_000_000_000u64 + r.below(1_000_000_000)),
        format!("order {card}"),
        "version 1.24.3, build 2024-01-15, 192.168.10.254:8080".to_string(),
        "let sk = key_schedule(k); // sk-128 table".to_string(),
        format!(
            "eyJ{} (one base64 JSON part, no token)",
            r.string_from(B64URL, 40)
        ),
    ]
}

/// Every file under `root` (recursively) that contains `needle`, as a `grep -r` would list.
pub fn grep_r(root: &Path, needle: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in rd.flatten() {
            let p = entry.path();
            let t = entry.file_type().unwrap();
            if t.is_dir() {
                stack.push(p);
            } else if t.is_file() {
                let bytes = std::fs::read(&p).unwrap_or_default();
                if bytes.windows(needle.len()).any(|w| w == needle.as_bytes()) {
                    out.push(p);
                }
            }
        }
    }
    out
}
