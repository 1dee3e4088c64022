//! Secrets that reached disk, and ordinary content that was destroyed, found by a sweep of the
//! redaction rules (docs/events.md §9). Each test names what broke.

use agentlog::event::parse_event_line;
use agentlog::redact::{Mode, Redactor};

use crate::secrets_corpus::{all, all_hashed};

fn redacted(r: &Redactor, text: &str) -> String {
    let mut s = text.to_owned();
    r.redact_string(&mut s);
    s
}

/// A token at the start of a line inside JSON text (a raw source line the importers keep in
/// `x-source`, a Codex tool output that is JSON) follows the escape `\n`: its `n` is a word
/// character, so no rule's word boundary was found and the token stayed on disk.
#[test]
fn a_token_after_an_escaped_newline_is_found() {
    let r = all();
    let tokens = [
        ("ghp_R8mK2pQ7vX4nL9wT3jH6bF1sD5gY0cZ8aE2u", "github-token"),
        ("AKIAQ4W7RZ2N5KXJ3LPM", "aws-access-key-id"),
        ("glpat-cavXiOqkVCJTBJahe84S", "gitlab-token"),
        ("xoxb-2048-R8mK2pQ7vX4nL9", "slack-token"),
    ];
    for (token, rule) in tokens {
        for text in [
            format!(r#"{{"output":"line one\n{token}\nline three"}}"#),
            format!(r#"{{"raw":"{{\"text\":\"a\\n{token}\"}}"}}"#),
            format!("cat token.txt\\t{token}"),
        ] {
            let out = redacted(&r, &text);
            assert!(!out.contains(token), "{rule} kept in {out}");
            assert!(out.contains(&format!("[REDACTED:{rule}]")), "{out}");
        }
    }
    // The escapes themselves stay as they were.
    let out = redacted(&r, r#"a\nghp_R8mK2pQ7vX4nL9wT3jH6bF1sD5gY0cZ8aE2u\tb"#);
    assert_eq!(out, r#"a\n[REDACTED:github-token]\tb"#);
}

/// A secret held as the value of a JSON member named like its label (a tool input
/// `{"password":"…"}`, an environment map) was never redacted: each string was scanned alone.
#[test]
fn a_json_member_named_like_a_secret_is_redacted_whole() {
    let r = all();
    let line = r#"{"type":"tool/call","seq":3,"time":4,"data":{"turn":1,"step":1,"callId":"c1","name":"login","arguments":"{}"},"meta":{"input":{"user":"ann","password":"Tr0ub4dor-5jIc1x"},"env":{"AWS_SECRET_ACCESS_KEY":"wJalrXUtnFEMIK7MDENGbPxRfiCYzQ4W7RZ2N5KX","DB_PASSWORD":"correct horse battery","HOME":"/home/ann","api_key":"${OPENAI_API_KEY}","password":"string"}}}"#;
    let mut e = parse_event_line(line).unwrap();
    let n = r.redact_event(&mut e);
    let out = e.to_canonical_string();
    for secret in [
        "Tr0ub4dor-5jIc1x",
        "wJalrXUtnFEMIK7MDENGbPxRfiCYzQ4W7RZ2N5KX",
        "correct horse battery",
    ] {
        assert!(!out.contains(secret), "{secret} kept: {out}");
    }
    assert_eq!(n, 3, "{out}");
    // Placeholders and ordinary members stay.
    for kept in [
        r#""user":"ann""#,
        r#""HOME":"/home/ann""#,
        r#""api_key":"${OPENAI_API_KEY}""#,
        r#""password":"string""#,
    ] {
        assert!(out.contains(kept), "{kept} changed: {out}");
    }
    assert!(
        out.contains(r#"{"rule":"password-assignment","path":"meta.input.password"}"#),
        "{out}"
    );
}

/// A password that merely started with a placeholder word (`str`, `env`, `true`, `null`,
/// `secret`, `password`) was taken for one and kept.
#[test]
fn a_password_starting_with_a_placeholder_word_is_redacted() {
    let r = all();
    for value in [
        "Password2024!",
        "Str0ngPassw0rd!",
        "secretsauce42",
        "truelove1987",
        "NoneShallPass9",
        "nullpointer-7781",
        "Envoy-Bravo-81",
    ] {
        let out = redacted(&r, &format!("password={value}"));
        assert_eq!(out, "password=[REDACTED:password-assignment]", "{value}");
    }
    for placeholder in [
        "password=string",
        "password=your_password_here",
        "api_key=process.env.OPENAI_API_KEY",
        "password=null",
        "password: <your-password>",
    ] {
        assert_eq!(redacted(&r, placeholder), placeholder);
    }
}

/// Code was destroyed: `OpenAI(api_key=api_key)`, `form.password.data`, `getpass.getpass`,
/// `os.environ[…]` and the CSS class `.sk-loading-spinner-container` were redacted.
#[test]
fn references_in_code_and_css_classes_are_left_alone() {
    let r = all();
    for code in [
        "client = OpenAI(api_key=api_key)",
        "password = form.password.data",
        "password = getpass.getpass()",
        "api_key = os.environ['OPENAI_API_KEY']",
        "<div class=\"sk-loading-spinner-container\">",
        "passwd: self.passwd",
    ] {
        assert_eq!(redacted(&r, code), code);
    }
    // Real keys in the same places still go.
    let out = redacted(
        &r,
        "client = OpenAI(api_key=\"sk-proj-R8mK2pQ7vX4nL9wT3jH6bF1s\")",
    );
    assert!(!out.contains("R8mK2pQ7"), "{out}");
}

/// A custom rule never saw a string shorter than 6 bytes, and one with a group redacted only
/// the group (the built-in rules' convention), leaving the rest of what it was written to find.
/// A custom rule now redacts its whole match, or its group named `secret`.
#[test]
fn custom_rules_see_short_strings_and_redact_their_whole_match() {
    let custom = vec![
        ("code".to_string(), "E[0-9]{4}".to_string()),
        ("dsn".to_string(), "(postgres|mysql)://[^ ]+".to_string()),
        ("pin".to_string(), "pin (?P<secret>[0-9]{4})".to_string()),
    ];
    let r = Redactor::new(&[], &custom, Mode::Replace, None).unwrap();
    assert_eq!(redacted(&r, "E1234"), "[REDACTED:code]");
    assert_eq!(
        redacted(&r, "db at postgres://root:rootpw@10.0.0.5/app now"),
        "db at [REDACTED:dsn] now"
    );
    assert_eq!(redacted(&r, "my pin 4821"), "my pin [REDACTED:pin]");
}

/// A URL password holding `@` was missed (the match stopped at its first `@`, and the short
/// rest was taken for a placeholder); a Git remote `git@github.com:owner/repo.git` was
/// redacted as an e-mail address.
#[test]
fn url_passwords_with_at_and_git_remotes() {
    let r = all();
    assert_eq!(
        redacted(&r, "postgres://admin:p@ssw0rd!2024@db.internal:5432/app"),
        "postgres://admin:[REDACTED:url-password]@db.internal:5432/app"
    );
    let remote = "origin  git@github.com:acme/widgets.git (fetch)";
    assert_eq!(redacted(&r, remote), remote);
    assert_eq!(
        redacted(&r, "mail ann.lee@example.org"),
        "mail [REDACTED:email]"
    );
}

/// Three space-separated numbers (`sizes 250 300 1200`, a column of figures) were taken for a
/// North American phone number and destroyed. A number without `+` or parentheses is now one
/// only with the same `-` or `.` between its groups and a valid exchange (2–9 first).
#[test]
fn runs_of_numbers_are_not_phone_numbers() {
    let r = all();
    for text in [
        "widths 250 300 1200 px",
        "retry after 250 300 1200 ms",
        "ids 415-155-2671 and 415-555.2671",
    ] {
        assert_eq!(redacted(&r, text), text);
    }
    for (text, want) in [
        ("call 415-555-2671 now", "call [REDACTED:phone] now"),
        ("call 415.555.2671 now", "call [REDACTED:phone] now"),
        ("call (415) 555-2671 now", "call [REDACTED:phone] now"),
        ("call +1 415 555 2671 now", "call [REDACTED:phone] now"),
        ("call +44 20 7946 0958 now", "call [REDACTED:phone] now"),
    ] {
        assert_eq!(redacted(&r, text), want);
    }
}

/// The AWS CLI's JSON output (`aws sts get-session-token`, `aws iam create-access-key`) pasted
/// or printed as text: `"SecretAccessKey": "…"` and `"SessionToken": "…"` have no `aws_` in
/// their label, so they stayed (only the `AccessKeyId`, by its `ASIA` prefix, went).
#[test]
fn aws_cli_json_output_in_text_is_redacted() {
    let r = all();
    let key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ4W7RZ2N5";
    let token = "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQD6R8mK2pQ7vX4nL9wT3jH6bF1s";
    let id = "ASIAQ4W7RZ2N5KXJ3LPM";
    let pretty = format!(
        "$ aws sts get-session-token\n{{\n    \"Credentials\": {{\n        \"AccessKeyId\": \"{id}\",\n        \"SecretAccessKey\": \"{key}\",\n        \"SessionToken\": \"{token}\",\n        \"Expiration\": \"2026-12-07T12:00:00+00:00\"\n    }}\n}}"
    );
    // The same inside JSON text (a tool output that is a JSON string).
    let escaped = pretty.replace('"', "\\\"").replace('\n', "\\n");
    for text in [pretty, escaped] {
        let out = redacted(&r, &text);
        for secret in [key, token, id] {
            assert!(!out.contains(secret), "{secret} kept: {out}");
        }
        assert!(out.contains("[REDACTED:aws-secret-access-key]"), "{out}");
        assert!(out.contains("Expiration"), "{out}");
        assert!(out.contains("2026-12-07T12:00:00+00:00"), "{out}");
    }
}

/// A password holding `;` or `&` kept everything after it: `password=abc;def&x` lost only
/// `abc`, a connection string's `Password=p@ss;w0rd;` only `p@ss`. A value now runs on over
/// `;` and `&` unless what follows is the next `name=` pair (or a space, or the end); a quoted
/// value runs to its closing quote.
#[test]
fn a_password_holding_semicolons_or_ampersands_is_redacted_whole() {
    let r = all();
    let p = "[REDACTED:password-assignment]";
    for (text, want) in [
        ("password=abc;def&x", format!("password={p}")),
        (
            "Server=db;Database=app;User Id=sa;Password=p@ss;w0rd;",
            format!("Server=db;Database=app;User Id=sa;Password={p};"),
        ),
        (
            "Password=p@ss;w0rd;Encrypt=true;",
            format!("Password={p};Encrypt=true;"),
        ),
        (
            "https://x.test/login?user=ann&password=hunter2x&next=/home",
            format!("https://x.test/login?user=ann&password={p}&next=/home"),
        ),
        (
            r#"password="s3cr;et&v,al" next"#,
            format!(r#"password="{p}" next"#),
        ),
        (
            r#"{\"password\":\"s3cr;et&v,al\"}"#,
            format!(r#"{{\"password\":\"{p}\"}}"#),
        ),
        (
            "export PASSWORD=hunter22; echo ok",
            format!("export PASSWORD={p}; echo ok"),
        ),
        ("PASSWORD=hunter22&&make", format!("PASSWORD={p}&&make")),
    ] {
        assert_eq!(redacted(&r, text), want, "{text}");
    }
    // Placeholders stay, quoted or not.
    for text in [
        r#"password="${DB_PASSWORD}";"#,
        "password=<password>;user=ann",
        r#"print("password: " + pw + "!")"#,
    ] {
        assert_eq!(redacted(&r, text), text);
    }
}

/// A secret written with JSON `\u` escapes inside JSON text (an importer's raw source line,
/// `sk-\u0061bc…`, `\u0041KIA…`) was missed: the rules saw the escape, not the letter.
#[test]
fn secrets_written_with_unicode_escapes_are_found() {
    let r = all();
    for (text, rule) in [
        (
            r#"{"text":"key sk-\u0061bcR8mK2pQ7vX4nL9wT3jH6bF1s now"}"#,
            "openai-key",
        ),
        (
            r#"{"text":"id \u0041KIAQ4W7RZ2N5KXJ3LPM"}"#,
            "aws-access-key-id",
        ),
        (
            r#"{"text":"a\u000aghp_R8mK2pQ7vX4nL9wT3jH6bF1sD5gY0cZ8aE2u"}"#,
            "github-token",
        ),
    ] {
        let out = redacted(&r, text);
        assert!(out.contains(&format!("[REDACTED:{rule}]")), "{out}");
        assert!(
            !out.contains("R8mK2pQ7") && !out.contains("Q4W7RZ2N5"),
            "{out}"
        );
    }
    let out = redacted(
        &r,
        r#"{"text":"key sk-\u0061bcR8mK2pQ7vX4nL9wT3jH6bF1s now"}"#,
    );
    assert_eq!(out, r#"{"text":"key [REDACTED:openai-key] now"}"#);
    // Escapes of ordinary text stay as they were.
    let plain = r#"{"text":"caf\u00e9 \u0041BC \ud83d\ude00"}"#;
    assert_eq!(redacted(&r, plain), plain);
}

/// An imported line that is not UTF-8 is kept as `rawHex` in `x-source`: its secrets were
/// never seen. It is decoded, scanned, and the redacted bytes encoded again (the bytes that
/// are not UTF-8 kept as they were).
#[test]
fn secrets_in_raw_hex_source_lines_are_redacted() {
    let r = all();
    let mut source = b"{\"text\":\"key AKIAQ4W7RZ2N5KXJ3LPM \xff\xfe end\"}".to_vec();
    source.extend_from_slice(b" password=hunter2x");
    let hex: String = source.iter().map(|b| format!("{b:02x}")).collect();
    let line = format!(
        r#"{{"type":"user/message","seq":1,"time":2,"data":{{"role":"user","content":[{{"type":"text","text":"hi"}}]}},"x-source":[{{"line":1,"rawHex":"{hex}"}}]}}"#
    );
    let e = parse_event_line(&line).unwrap();
    let found = r.scan_event(&e);
    let rules: Vec<&str> = found.iter().map(|f| f.rule.as_str()).collect();
    assert_eq!(
        rules,
        ["aws-access-key-id", "password-assignment"],
        "{found:?}"
    );
    assert!(
        found.iter().all(|f| f.path == "x-source[0].rawHex"),
        "{found:?}"
    );
    let mut e = e;
    assert_eq!(r.redact_event(&mut e), 2);
    let out = e.to_canonical_string();
    let v = agentlog::event::parse_json(&out).unwrap();
    let hex = v
        .get("x-source")
        .and_then(|s| s.as_array())
        .and_then(|a| a.first())
        .and_then(|x| x.get("rawHex"))
        .and_then(|h| h.as_str())
        .unwrap()
        .to_string();
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    assert_eq!(
        bytes,
        b"{\"text\":\"key [REDACTED:aws-access-key-id] \xff\xfe end\"} password=[REDACTED:password-assignment]"
            .to_vec()
    );
    assert!(
        out.contains(r#"{"rule":"aws-access-key-id","path":"x-source[0].rawHex"}"#),
        "{out}"
    );
}

/// A secret streamed across chunks (docs/events.md §9): tool-call argument deltas are one
/// stream per call, a key whole in one chunk is reported once (not again as a split one), and
/// the parts of a split one become one tag.
#[test]
fn split_secrets_in_argument_deltas_and_whole_ones_reported_once() {
    use agentlog::redact::ChunkStreams;
    let r = all();
    let lines = [
        r#"{"type":"assistant/chunk","seq":3,"time":1,"data":{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","id":"c1","name":"sh","arguments":"{\"cmd\":\"export TOKEN=ghp_R8mK2pQ7"}}}"#,
        r#"{"type":"assistant/chunk","seq":4,"time":1,"data":{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","arguments":"vX4nL9wT3jH6bF1sD5gY0cZ8aE2u\"}"}}}"#,
        r#"{"type":"assistant/chunk","seq":5,"time":1,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","text":"key AKIAQ4W7RZ2N5KXJ3LPM is "}}}"#,
        r#"{"type":"assistant/chunk","seq":6,"time":1,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","text":"in the file"}}}"#,
    ];
    let events: Vec<_> = lines.iter().map(|l| parse_event_line(l).unwrap()).collect();
    let mut streams = ChunkStreams::new(&r);
    for (i, e) in events.iter().enumerate() {
        streams.push(3 + i as u64, e);
    }
    let split = streams.finish();
    let found: Vec<(u64, String, String)> = events
        .iter()
        .enumerate()
        .flat_map(|(i, e)| {
            r.scan_event_split(e, 3 + i as u64, &split)
                .into_iter()
                .map(move |f| (3 + i as u64, f.path, f.rule))
        })
        .collect();
    assert_eq!(
        found,
        [
            (3, "data.chunk.arguments".into(), "github-token".into()),
            (5, "data.chunk.text".into(), "aws-access-key-id".into()),
        ]
    );
    let mut out = Vec::new();
    for (i, mut e) in events.into_iter().enumerate() {
        r.redact_event_split(&mut e, 3 + i as u64, &split);
        out.push(e.to_canonical_string());
    }
    let all_out = out.concat();
    for part in ["ghp_R8mK2pQ7", "vX4nL9wT3jH6bF1s", "AKIAQ4W7RZ2N5KXJ3LPM"] {
        assert!(!all_out.contains(part), "{part} kept: {all_out}");
    }
    assert!(
        out[0].contains(r#"TOKEN=[REDACTED:github-token]"#),
        "{}",
        out[0]
    );
    assert!(out[1].contains(r#""arguments":"\"}""#), "{}", out[1]);
    assert!(
        out[1].contains(r#"{"rule":"github-token","path":"data.chunk.arguments"}"#),
        "{}",
        out[1]
    );
}

/// A private key without its END line (`head -5 key.pem`, a paste cut short) was redacted to
/// the end of the string: the rest of a tool's output, an answer's text after it, all gone.
/// Such a key is now redacted through the lines of its body only.
#[test]
fn a_private_key_cut_short_is_redacted_through_its_body_only() {
    let r = all();
    let body = [
        "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun",
        "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK",
        "LxoS2tFczGkPLPgizskuemMghRniWaoLcyehkd3qqGElvW/VDL5AaWTg0nLVkjRo",
        "9z+40RQzuVaE8AkAFmxZzow3x+VJYKdjykkJ0iT9wCS0DRTXu269V264Vf/3jvre",
        "8Q==",
    ];
    let key = |sep: &str| format!("-----BEGIN RSA PRIVATE KEY-----{sep}{}", body.join(sep));
    for (text, after) in [
        (
            format!("$ head -5 id_rsa\n{}\n$ echo done\ndone", key("\n")),
            "\n$ echo done\ndone",
        ),
        (
            format!(r#"{{"output":"{}\n\nThe file is cut here."}}"#, key("\\n")),
            r#"\n\nThe file is cut here."}"#,
        ),
        (
            format!("{} and that is all I have.", key(" ")),
            " and that is all I have.",
        ),
        (
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,3F17F5316E2BAC89\n\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\nwhat follows is prose".to_string(),
            "\nwhat follows is prose",
        ),
    ] {
        let out = redacted(&r, &text);
        for line in body {
            assert!(!out.contains(line), "{line} kept in {out}");
        }
        assert!(!out.contains("3F17F5316E2BAC89"), "{out}");
        assert!(out.contains("[REDACTED:private-key]"), "{out}");
        assert!(out.ends_with(after), "the text after the key kept: {out:?}");
    }
    // With its END line the key is redacted through it, whatever the lines hold.
    let whole = format!(
        "{}\n-----END RSA PRIVATE KEY-----\nafter",
        key("\n").replace("8Q==", "8Q== a line with spaces")
    );
    assert_eq!(redacted(&r, &whole), "[REDACTED:private-key]\nafter");
}

/// Hash mode tags a URL's password `[HASH:url-password:HEX]`, which reads as a password
/// assignment (`password:` and a value): a second `secrets --redact --hash` hashed its own tags
/// again, and `secrets` reported a redacted session as holding secrets. Text that only looks
/// like a tag (a rule name that is none of the redactor's, a secret in the hex's place) is
/// still scanned.
#[test]
fn a_hash_tag_is_not_found_again() {
    let hash = all_hashed([7u8; 32]);
    let once = redacted(
        &hash,
        "DATABASE_URL=postgres://app:g0mlxJiS47kCJ8@db.internal:5432/main",
    );
    assert!(once.contains("[HASH:url-password:"), "{once}");
    let mut twice = once.clone();
    assert_eq!(hash.redact_string(&mut twice), Vec::<String>::new());
    assert_eq!(twice, once);
    // Not a tag: the secret in brackets is still found.
    let key = "sk_live_4eC39HqLyjWDarjtT1zdp7dc";
    for wrapped in [
        format!("[REDACTED:{key}]"),
        format!("[HASH:stripe-key:{key}]"),
        format!("[HASH:no-such-rule:{key}]"),
    ] {
        assert!(!redacted(&hash, &wrapped).contains(key), "{wrapped}");
        assert!(!redacted(&all(), &wrapped).contains(key), "{wrapped}");
    }
}

/// A rule's matches do not overlap: here a JWT with no separator after it swallowed the start
/// of `api_key = …`, and the assignment label `YOUR_API_KEY": ` it left behind matched only in
/// a second scan of the redacted text. Redaction now adds what a scan of its own output finds,
/// so redacting twice changes nothing the first time did not.
#[test]
fn a_match_a_longer_token_hid_is_found_in_the_first_redaction() {
    let text = "Authorization: Bearer eyJ5pEo0xgWaU8oAhLameskOVC2tJ2e3z.eyJT_emoDwNGc5UaZHAUsZfTGaXKHrHSAmXDXKwrv6jrcyOqef502-IAms03QwM.XQ5797WtwfYsFOG_RNOU75qYqxTrQmyrRI8MLxWlglsapi_key = \"YOUR_API_KEY\": DATABASE_URL=postgres://app:g0mlxJiS47kCJ8@db.internal:5432/main";
    let r = all();
    let once = redacted(&r, text);
    assert!(!once.contains("g0mlxJiS47kCJ8"), "{once}");
    let mut twice = once.clone();
    assert_eq!(r.redact_string(&mut twice), Vec::<String>::new(), "{once}");
    assert_eq!(twice, once);
}
