//! `agentlog secrets`, `redact` and `purge` (docs/events.md §9): findings and exit codes, the
//! JSON form, retroactive redaction keeping seqs and times (forks sharing segments rewritten
//! too), purged turns as tombstones left out of the history, and `kill -9` at random points of
//! a rewrite leaving the old or the new session whole, after which a rerun leaves no secret.

use crate::cli_common;
use testkit::secrets as secrets_common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use agentlog::event::{parse_json, Value};
use agentlog::redact::{Mode, Redactor};
use agentlog::store::{PurgeRange, Store};
use cli_common::Cli;
use secrets_common::{grep_r, plant, Planted, Rng, RULES};

/// `turns` turns; turn t's user message carries secret t (cycling over `secrets`), the others
/// filler text.
fn session_lines(turns: usize, secrets: &[Planted], filler: usize) -> String {
    let mut out = String::new();
    for t in 1..=turns {
        let secret = &secrets[(t - 1) % secrets.len()];
        let text = Value::String(format!("turn {t}: {}", secret.text));
        out += &format!("{{\"type\":\"turn/start\",\"data\":{{\"turn\":{t}}}}}\n");
        out += &format!(
            "{{\"type\":\"user/message\",\"data\":{{\"role\":\"user\",\"content\":[{{\"type\":\"text\",\"text\":{text}}}]}}}}\n"
        );
        out += &format!("{{\"type\":\"step/start\",\"data\":{{\"turn\":{t},\"step\":1}}}}\n");
        for i in 0..filler {
            out += &format!(
                "{{\"type\":\"assistant/chunk\",\"data\":{{\"turn\":{t},\"step\":1,\"chunk\":{{\"type\":\"text-delta\",\"text\":\"filler {t} {i} lorem ipsum dolor sit amet\"}}}}}}\n"
            );
        }
        out += &format!(
            "{{\"type\":\"assistant/message\",\"data\":{{\"turn\":{t},\"step\":1,\"message\":{{\"role\":\"assistant\",\"content\":[{{\"type\":\"text\",\"text\":\"answer {t}\"}}]}}}}}}\n"
        );
        out += &format!("{{\"type\":\"step/end\",\"data\":{{\"turn\":{t},\"step\":1}}}}\n");
        out += &format!(
            "{{\"type\":\"turn/end\",\"data\":{{\"turn\":{t},\"reason\":{{\"kind\":\"completed\"}}}}}}\n"
        );
    }
    out
}

fn planted(seed: u64) -> Vec<Planted> {
    let mut rng = Rng::new(seed);
    RULES.iter().map(|r| plant(r, &mut rng)).collect()
}

#[track_caller]
fn assert_no_secret(root: &Path, secrets: &[Planted]) {
    for p in secrets {
        let hits = grep_r(root, &p.secret);
        assert!(hits.is_empty(), "{}: {:?} in {hits:?}", p.rule, p.secret);
    }
}

fn setup(turns: usize, filler: usize, config: &str) -> (Cli, Vec<Planted>) {
    let cli = Cli::with_config(config);
    let secrets = planted(turns as u64);
    cli.run(&["create", "--id", "s"]).ok();
    cli.run_with(
        &["append", "s"],
        session_lines(turns, &secrets, filler).as_bytes(),
    )
    .ok();
    (cli, secrets)
}

#[test]
fn secrets_reports_each_finding_and_exits_1() {
    let (cli, secrets) = setup(RULES.len(), 0, "");
    let run = cli.run(&["secrets", "s"]);
    run.fails(1);
    assert_eq!(run.stdout.lines().count(), RULES.len(), "{}", run.stdout);
    for p in &secrets {
        assert!(!run.stdout.contains(&p.secret), "the preview is masked");
    }
    assert!(run.stdout.contains("s  seq 1  data.content[0].text  "));
    let json = cli.run(&["secrets", "--all", "--json"]);
    json.fails(1);
    let mut rules: Vec<String> = Vec::new();
    for line in json.stdout.lines() {
        let v = parse_json(line).unwrap();
        let Value::Object(m) = v else {
            panic!("{line}")
        };
        let keys: Vec<&str> = m.keys().collect();
        assert_eq!(keys, ["session", "seq", "path", "rule", "preview"]);
        assert_eq!(m.get("session").unwrap().as_str(), Some("s"));
        rules.push(m.get("rule").unwrap().as_str().unwrap().to_string());
    }
    rules.sort();
    let mut want: Vec<String> = RULES.iter().map(|r| r.to_string()).collect();
    want.sort();
    assert_eq!(rules, want);
    // --rules narrows; a clean session exits 0.
    let only = cli.run(&["secrets", "s", "--rules", "card-number"]);
    only.fails(1);
    assert_eq!(only.stdout.lines().count(), 1);
    cli.run(&["create", "--id", "clean"]).ok();
    cli.run(&["secrets", "clean"]).ok();
    // A scan that cannot be made is exit 2, never "found" (1) nor "clean" (0).
    let bad = cli.run(&["secrets", "s", "--rules", "nope"]);
    assert!(bad.fails(2).contains("nope"));
    assert!(cli
        .run(&["secrets", "missing"])
        .fails(2)
        .contains("missing"));
    // An empty --rules (`--rules "$UNSET"`) scanned with no rule at all and said 0 findings.
    for empty in ["", ","] {
        assert!(cli
            .run(&["secrets", "s", "--rules", empty])
            .fails(2)
            .contains("--rules names no rule"));
        assert!(cli
            .run(&["redact", "s", "--rules", empty])
            .fails(1)
            .contains("--rules names no rule"));
    }
}

/// `secrets --all` stopped at the first session it could not read, and said so with exit 1,
/// the code of "secrets found": a script could not tell a leak from a damaged session, and
/// the sessions after it were never scanned. Now the damaged one is named and skipped, the
/// others are scanned and reported, and the exit code is 2.
#[test]
fn secrets_names_an_unreadable_session_scans_the_others_and_exits_2() {
    let (cli, secrets) = setup(RULES.len(), 0, "");
    cli.run(&["create", "--id", "a-damaged"]).ok();
    cli.run_with(
        &["append", "a-damaged"],
        session_lines(1, &secrets, 3).as_bytes(),
    )
    .ok();
    let seg = testkit::segments(&cli.session_dir("a-damaged"))[0].clone();
    let mut bytes = std::fs::read(&seg).unwrap();
    // Inside the records (the segment header is 64 bytes): the checksum no longer matches.
    bytes[200] ^= 0x20;
    std::fs::write(&seg, bytes).unwrap();
    let run = cli.run(&["secrets", "--all"]);
    let stderr = run.fails(2);
    assert!(stderr.contains("a-damaged"), "{stderr}");
    assert!(
        stderr.contains("1 session could not be scanned"),
        "{stderr}"
    );
    // "s" comes after the damaged session and is still scanned.
    assert_eq!(run.stdout.lines().count(), RULES.len(), "{}", run.stdout);
    cli.run(&["secrets", "s"]).fails(1);
}

#[test]
fn redact_rewrites_keeping_seqs_and_times_and_forks_sharing_segments() {
    // Small segments, so that the fork hard-links sealed ones.
    let (cli, secrets) = setup(RULES.len(), 30, "segment_size = \"16KiB\"\n");
    let before = cli.run(&["export", "s"]).ok().to_string();
    let fork = cli
        .run(&["fork", "s", "--at", "200"])
        .ok()
        .trim()
        .to_string();
    let run = cli.run(&["redact", "s"]);
    let out = run.ok();
    assert!(out.contains("rewrote s:"), "{out}");
    assert!(out.contains(&format!("rewrote {fork}:")), "{out}");
    assert!(out.contains("rewritten too"), "{out}");
    assert_no_secret(&cli.store(), &secrets);
    cli.run(&["verify", "s"]).ok();
    cli.run(&["verify", &fork]).ok();
    cli.run(&["secrets", "--all"]).ok();
    // Same seqs, same times, same types; only the found strings changed.
    let after = cli.run(&["export", "s"]).ok().to_string();
    assert_eq!(before.lines().count(), after.lines().count());
    for (b, a) in before.lines().zip(after.lines()) {
        let (b, a) = (parse_json(b).unwrap(), parse_json(a).unwrap());
        for k in ["type", "seq", "time"] {
            assert_eq!(b.get(k), a.get(k));
        }
    }
    assert!(cli.session_entries().iter().all(|e| !e.starts_with('.')));
    // Nothing left to do: a second run rewrites nothing.
    let again = cli.run(&["redact", "--all", "--json"]);
    assert_eq!(again.ok(), "");
}

#[test]
fn purge_turn_and_seqs_leave_tombstones_out_of_the_history() {
    let (cli, secrets) = setup(4, 2, "");
    let before: Vec<String> = cli
        .run(&["export", "s"])
        .ok()
        .lines()
        .map(String::from)
        .collect();
    // Turn 2 is seqs 8..=15 (8 events a turn with two chunks).
    let run = cli.run(&["purge", "s", "--turn", "2", "--json"]);
    let line = run.ok().lines().next().unwrap().to_string();
    let v = parse_json(&line).unwrap();
    // The user message, two chunks and the answer: the turn and step events have no content.
    assert_eq!(v.get("purged").unwrap().as_u64(), Some(4));
    assert_eq!(v.get("matches"), v.get("purged"), "the name redact uses");
    let after: Vec<String> = cli
        .run(&["export", "s"])
        .ok()
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(after.len(), before.len() + 1, "one audit event");
    for seq in 8..16 {
        let (b, a) = (
            parse_json(&before[seq]).unwrap(),
            parse_json(&after[seq]).unwrap(),
        );
        assert_eq!(b.get("seq"), a.get("seq"));
        assert_eq!(b.get("time"), a.get("time"));
        let ty = b.get("type").unwrap().as_str().unwrap();
        let data = a.get("data").unwrap();
        if ty.starts_with("turn/") || ty.starts_with("step/") {
            assert_eq!(a.get("type"), b.get("type"));
            assert_eq!(data.get("turn").unwrap().as_u64(), Some(2));
        } else {
            assert_eq!(
                a.get("type").unwrap().as_str(),
                Some("purged"),
                "{}",
                after[seq]
            );
            assert_eq!(data.get("type").unwrap().as_str(), Some(ty));
            assert_eq!(data.get("turn").unwrap().as_u64(), Some(2));
            if ty != "user/message" {
                assert_eq!(
                    data.get("step").unwrap().as_u64(),
                    Some(1),
                    "{}",
                    after[seq]
                );
            }
        }
    }
    assert_eq!(&before[..8], &after[..8]);
    assert_eq!(&before[16..], &after[16..after.len() - 1]);
    let audit = parse_json(after.last().unwrap()).unwrap();
    assert_eq!(audit.get("type").unwrap().as_str(), Some("audit/purge"));
    assert_eq!(
        audit.get("data").unwrap().to_string(),
        r#"{"startSeq":8,"endSeq":15,"events":4,"turn":2}"#
    );
    // The history leaves the turn out; verify passes; nothing of turn 2 is on disk.
    let history = cli.run(&["derive", "s"]).ok().to_string();
    assert!(
        !history.contains("turn 2:") && !history.contains("answer 2"),
        "{history}"
    );
    assert!(history.contains("turn 1:") && history.contains("answer 3"));
    cli.run(&["verify", "s"]).ok();
    assert!(grep_r(&cli.store(), &secrets[1].secret).is_empty());
    assert!(grep_r(&cli.store(), "answer 2").is_empty());
    assert!(
        !grep_r(&cli.store(), &secrets[0].secret).is_empty(),
        "turn 1 kept"
    );
    // A seq range: turn 3's user message alone.
    cli.run(&["purge", "s", "--seq", "17..17"]).ok();
    cli.run(&["verify", "s"]).ok();
    assert!(grep_r(&cli.store(), &secrets[2].secret).is_empty());
    // A turn/start alone keeps its type and turn (it has no content): nothing to purge.
    let exported = cli.run(&["export", "s"]).ok().to_string();
    let run = cli.run(&["purge", "s", "--seq", "0..0"]);
    run.ok();
    assert!(run.stderr.contains("nothing to purge"), "{}", run.stderr);
    assert_eq!(cli.run(&["export", "s"]).ok(), exported);
    cli.run(&["verify", "s"]).ok();
    // A range past the end is refused.
    let bad = cli.run(&["purge", "s", "--seq", "5..99999"]);
    assert!(bad.fails(1).contains("cannot purge"));
}

/// Copies a store (files and folders).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let p = entry.path();
        let t = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&p, &t);
        } else {
            std::fs::copy(&p, &t).unwrap();
        }
    }
}

/// Runs `args` on a copy of the template store killed after `delay`.
fn killed(cli: &Cli, args: &[&str], delay: Duration) {
    let mut child = cli
        .command(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(delay);
    let _ = child.kill();
    let _ = child.wait();
}

/// Session `s` of the store at `root`, checked whole (every record and index, every lifecycle
/// rule), exported (the audit event's clock time left out).
fn whole_export(root: &Path) -> String {
    let dir = root.join("sessions").join("s");
    let report = agentlog::log::verify(&dir).unwrap();
    assert!(report.is_clean(), "{report:?}");
    let store = Store::open(root).unwrap();
    let r = store.open_reader("s").unwrap();
    let (_, violations) = r.lifecycle_at(r.len()).unwrap();
    assert!(violations.is_empty(), "{violations:?}");
    let mut out = Vec::new();
    r.export(&mut out, agentlog::session::HeaderLine::Omit, |_| {})
        .unwrap();
    normalized(&String::from_utf8(out).unwrap())
}

/// An export with the time of the purge's audit event left out (it is the clock's).
fn normalized(export: &str) -> String {
    export
        .lines()
        .map(|l| {
            if l.contains(r#""type":"audit/purge""#) {
                parse_json(l).unwrap().get("data").unwrap().to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `args` killed at `runs` random points (uniform over 1.2 times an uninterrupted run); after
/// each, the session is checked whole (old or new), then `finish` (given the store and whether
/// the session was the new one) completes the job, and the store is checked: the new session,
/// no secret in any file, nothing left behind.
fn crash_loop(args: &[&str], runs: usize, gone: &[&str], finish: impl Fn(&Store, bool)) {
    let template = Cli::with_config("segment_size = \"4KiB\"\n");
    let secrets = planted(8);
    template.run(&["create", "--id", "s"]).ok();
    template
        .run_with(&["append", "s"], session_lines(8, &secrets, 6).as_bytes())
        .ok();
    let old = whole_export(&template.store());
    // The new session, from an uninterrupted run on a copy, and how long a run takes.
    let whole = Cli::new();
    copy_tree(&template.store(), &whole.store());
    let start = Instant::now();
    whole.run(args).ok();
    let took = start.elapsed();
    let new = whole_export(&whole.store());
    assert_ne!(old, new);
    let mut outcomes = [0usize; 2];
    let mut rng = Rng::new(runs as u64);
    for i in 0..runs {
        let cli = Cli::new();
        copy_tree(&template.store(), &cli.store());
        let delay = took.mul_f64(rng.below(1200) as f64 / 1000.0);
        killed(&cli, args, delay);
        let now = whole_export(&cli.store());
        let is_new = if now == old {
            false
        } else {
            assert!(
                now == new,
                "run {i} (killed after {delay:?}): neither old nor new"
            );
            true
        };
        outcomes[usize::from(is_new)] += 1;
        finish(&Store::open(cli.store()).unwrap(), is_new);
        assert_eq!(whole_export(&cli.store()), new, "run {i}: the result");
        for g in gone {
            let hits = grep_r(&cli.store(), g);
            assert!(hits.is_empty(), "run {i}: {g:?} in {hits:?}");
        }
        assert!(
            cli.session_entries().iter().all(|e| !e.starts_with('.')),
            "{:?}",
            cli.session_entries()
        );
    }
    eprintln!(
        "{args:?}: {runs} kills over {took:?}: {} left the old session, {} the new",
        outcomes[0], outcomes[1]
    );
}

#[test]
fn redact_killed_at_random_points_leaves_a_whole_session() {
    let secrets = planted(8);
    let gone: Vec<&str> = secrets[..8].iter().map(|p| p.secret.as_str()).collect();
    // Redacting again: it sweeps what the killed run left, and redacts if need be.
    crash_loop(&["redact", "s"], 50, &gone, |store, _| {
        let r = Redactor::new(
            &["credentials".into(), "pii".into()],
            &[],
            Mode::Replace,
            None,
        )
        .unwrap();
        store.redact("s", &r).unwrap();
    });
}

/// Purging a range again overwrote each tombstone's record of the type it was (`"data":
/// {"type":"user/message"}` became `{"type":"purged"}`), counted the tombstones as purged and
/// appended a second `audit/purge`; a `--seq` range could make an earlier purge's audit event a
/// tombstone. Tombstones and audit events are now left alone, and a range with nothing left to
/// purge rewrites nothing.
#[test]
fn purging_again_keeps_the_tombstones_and_the_audit_record() {
    let (cli, _) = setup(3, 1, "");
    cli.run(&["purge", "s", "--turn", "2"]).ok();
    let once = cli.run(&["export", "s"]).ok().to_string();
    assert!(
        once.contains(r#""data":{"type":"user/message","turn":2}"#),
        "{once}"
    );
    let run = cli.run(&["purge", "s", "--turn", "2"]);
    run.ok();
    assert!(run.stderr.contains("nothing to purge"), "{}", run.stderr);
    assert_eq!(cli.run(&["export", "s"]).ok(), once);
    // A range over turn 2 (purged), turn 3 and the audit event: only turn 3's content changes.
    let last = once.lines().count() - 1;
    let run = cli.run(&["purge", "s", "--seq", &format!("7..{last}"), "--json"]);
    let v = parse_json(run.ok().lines().next().unwrap()).unwrap();
    assert_eq!(
        v.get("matches").unwrap().as_u64(),
        Some(3),
        "{}",
        run.stdout
    );
    let twice = cli.run(&["export", "s"]).ok().to_string();
    let (lines, before): (Vec<&str>, Vec<&str>) = (twice.lines().collect(), once.lines().collect());
    // Turns 1 and 2 (seqs 0..=13) and the first audit event are as they were.
    assert_eq!(&lines[..14], &before[..14]);
    assert_eq!(lines[last], before[last]);
    assert!(
        lines[last].contains(r#""type":"audit/purge""#),
        "{}",
        lines[last]
    );
    assert_eq!(lines.len(), last + 2, "one audit event more: {twice}");
    cli.run(&["verify", "s"]).ok();
}

/// Purging a fork also purged its parent while the two shared a hard-linked segment (and left
/// it alone once they did not): the parent's history changed behind the user's back. A purge
/// now changes the session and its forks, never the session it was forked from.
#[test]
fn purging_a_fork_leaves_its_parent_and_purging_a_parent_reaches_its_forks() {
    // Small segments, so that the fork hard-links sealed ones.
    let (cli, _) = setup(6, 30, "segment_size = \"16KiB\"\n");
    let fork = cli
        .run(&["fork", "s", "--at", "200"])
        .ok()
        .trim()
        .to_string();
    let linked = std::fs::read_dir(cli.session_dir(&fork))
        .unwrap()
        .filter_map(Result::ok)
        .any(|e| {
            use std::os::unix::fs::MetadataExt;
            e.metadata().unwrap().nlink() > 1
        });
    assert!(linked, "the fork shares a segment with its parent");
    let parent = cli.run(&["export", "s"]).ok().to_string();
    let run = cli.run(&["purge", &fork, "--turn", "1", "--json"]);
    assert_eq!(run.ok().lines().count(), 1, "{}", run.stdout);
    assert_eq!(
        cli.run(&["export", "s"]).ok(),
        parent,
        "the parent is unchanged"
    );
    assert!(cli
        .run(&["export", &fork])
        .ok()
        .contains(r#""type":"purged""#));
    cli.run(&["verify", "s"]).ok();
    cli.run(&["verify", &fork]).ok();
    // The parent's purge reaches the fork, whose first events are copies of the parent's.
    let run = cli.run(&["purge", "s", "--turn", "2", "--json"]);
    let out = run.ok();
    assert_eq!(out.lines().count(), 2, "{out}");
    assert!(out.contains(r#""sharedWith":"s""#), "{out}");
    let forked = cli.run(&["export", &fork]).ok().to_string();
    assert!(
        forked.contains(r#""data":{"type":"user/message","turn":2}"#),
        "{forked}"
    );
}

/// Purging (or redacting) an archived session left `ls` saying archived but its segments
/// plain: the rewrite built them as an active session's. They are compressed again.
#[test]
fn purging_an_archived_session_keeps_it_compressed() {
    let (cli, _) = setup(4, 30, "segment_size = \"16KiB\"\n");
    cli.run(&["archive", "s"]).ok();
    let cold = |cli: &Cli| {
        let segs = testkit::segments(&cli.session_dir("s"));
        assert!(segs.len() > 1, "{segs:?}");
        segs.iter().all(|s| testkit::is_cold(s))
    };
    assert!(cold(&cli));
    let exported = cli.run(&["export", "s"]).ok().to_string();
    cli.run(&["purge", "s", "--turn", "1"]).ok();
    assert!(cold(&cli), "every segment compressed after the purge");
    assert!(cli.run(&["ls"]).ok().contains("archived"));
    assert_ne!(cli.run(&["export", "s"]).ok(), exported);
    cli.run(&["verify", "s"]).ok();
    let line = r#"{"type":"system/message","data":{"role":"system","content":[]}}"#;
    cli.run_with(&["append", "s"], line.as_bytes()).fails(1);
}

#[test]
fn purge_killed_at_random_points_leaves_a_whole_session() {
    // After a kill: the purge again when the session is still the old one; else a gc, which
    // sweeps what the killed run left (purging twice would add a second audit event).
    crash_loop(
        &["purge", "s", "--turn", "1"],
        50,
        &["filler 1 0 lorem", "answer 1\""],
        |store, is_new| {
            if is_new {
                store.gc().unwrap();
            } else {
                store.purge("s", PurgeRange::Turn(1)).unwrap();
            }
        },
    );
}

/// An API key streamed in two `assistant/chunk` text deltas (its first part in one, the rest in
/// the next) matched in neither alone: `secrets` missed it and `redact` left both parts on
/// disk. The chunks of a step are now scanned as one text: reported once, on the chunk it
/// starts in; redacted as a tag there and nothing in the next.
#[test]
fn a_key_split_across_streamed_chunks_is_found_and_redacted() {
    let cli = Cli::new();
    cli.run(&["create", "--id", "s"]).ok();
    let chunk = |text: &str| {
        format!(
            "{{\"type\":\"assistant/chunk\",\"data\":{{\"turn\":1,\"step\":1,\"chunk\":{{\"type\":\"text-delta\",\"text\":{}}}}}}}\n",
            Value::String(text.into())
        )
    };
    let lines = [
        "{\"type\":\"turn/start\",\"data\":{\"turn\":1}}\n".to_string(),
        "{\"type\":\"user/message\",\"data\":{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"make me a key\"}]}}\n".to_string(),
        "{\"type\":\"step/start\",\"data\":{\"turn\":1,\"step\":1}}\n".to_string(),
        chunk("Your key is sk-proj-R8mK"),
        chunk("2pQ7vX4nL9wT3jH6bF1sD5gY0cZ8 - keep it safe."),
        "{\"type\":\"step/end\",\"data\":{\"turn\":1,\"step\":1}}\n".to_string(),
        "{\"type\":\"turn/end\",\"data\":{\"turn\":1,\"reason\":{\"kind\":\"completed\"}}}\n".to_string(),
    ]
    .concat();
    cli.run_with(&["append", "s"], lines.as_bytes()).ok();
    let run = cli.run(&["secrets", "s", "--json"]);
    run.fails(1);
    let found: Vec<Value> = run.stdout.lines().map(|l| parse_json(l).unwrap()).collect();
    assert_eq!(found.len(), 1, "{}", run.stdout);
    let f = &found[0];
    assert_eq!(
        f.get("seq")
            .and_then(|v| v.as_number())
            .and_then(|n| n.as_u64()),
        Some(3)
    );
    assert_eq!(
        f.get("path").and_then(|v| v.as_str()),
        Some("data.chunk.text")
    );
    assert_eq!(f.get("rule").and_then(|v| v.as_str()), Some("openai-key"));

    cli.run(&["redact", "s"]).ok();
    for part in ["sk-proj-R8mK", "2pQ7vX4nL9wT3jH6bF1sD5gY0cZ8"] {
        assert!(grep_r(&cli.store(), part).is_empty(), "{part} kept");
    }
    let out = cli.run(&["export", "s"]);
    let text = out.ok();
    assert!(
        text.contains(r#""text":"Your key is [REDACTED:openai-key]""#),
        "{text}"
    );
    assert!(text.contains(r#""text":" - keep it safe.""#), "{text}");
    cli.run(&["secrets", "s"]).ok();
}

/// A salvage moves what it cut into the session's `damaged/` folder: `secrets` never looked
/// there, so a store said clean held a key in it. Its files are now scanned (as bytes: each
/// run of UTF-8), each finding named with the file, and the way to remove them said (`redact`
/// does not rewrite salvaged bytes; deleting the folder does).
#[test]
fn secrets_scans_the_damaged_folder() {
    let cli = Cli::new();
    cli.run(&["create", "--id", "s"]).ok();
    cli.run(&["secrets", "s"]).ok();
    let damaged = cli.session_dir("s").join("damaged");
    std::fs::create_dir(&damaged).unwrap();
    let mut cut = b"\x00\x07\xffrecord ".to_vec();
    cut.extend_from_slice(b"key AKIAQ4W7RZ2N5KXJ3LPM\x00\xfe");
    std::fs::write(damaged.join("00000000000000000000.seg.1765000000000"), &cut).unwrap();
    std::fs::write(
        damaged.join("00000000000000000000.seg.1765000000000.after.jsonl"),
        "{\"type\":\"user/message\",\"seq\":9,\"time\":1,\"data\":{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"ghp_R8mK2pQ7vX4nL9wT3jH6bF1sD5gY0cZ8aE2u\"}]}}\n",
    )
    .unwrap();

    let run = cli.run(&["secrets", "s"]);
    run.fails(1);
    assert_eq!(run.stdout.lines().count(), 2, "{}", run.stdout);
    assert!(run.stdout.contains("aws-access-key-id"), "{}", run.stdout);
    assert!(run.stdout.contains("github-token"), "{}", run.stdout);
    assert!(
        run.stdout.contains(
            &damaged
                .join("00000000000000000000.seg.1765000000000")
                .display()
                .to_string()
        ),
        "{}",
        run.stdout
    );
    assert!(
        !run.stdout.contains("Q4W7RZ2N5KXJ3LPM"),
        "masked: {}",
        run.stdout
    );
    assert!(run.stderr.contains("rm -r"), "{}", run.stderr);

    let run = cli.run(&["secrets", "s", "--json"]);
    run.fails(1);
    let first = parse_json(run.stdout.lines().next().unwrap()).unwrap();
    assert_eq!(
        first.get("path").and_then(|v| v.as_str()),
        Some("damaged/00000000000000000000.seg.1765000000000")
    );
    assert!(
        first.get("file").and_then(|v| v.as_str()).is_some(),
        "{first:?}"
    );
    assert!(first.get("seq").is_some_and(|v| matches!(v, Value::Null)));

    // What the note says removes them.
    std::fs::remove_dir_all(&damaged).unwrap();
    cli.run(&["secrets", "s"]).ok();
}

/// A salvage of an archived (compressed) session moves the cold segments after the damage into
/// `damaged/` as they are: `secrets` scanned their raw bytes, zstd frames in which a secret
/// whose words came before (`--password=` the second time) shows without them, and called the
/// session clean. A cold file there is now scanned as the records it holds.
#[test]
fn secrets_finds_the_keys_in_a_compressed_segment_in_the_damaged_folder() {
    // Thirty passwords, each after words the segment held before.
    let mut rng = Rng::new(7);
    let secrets: Vec<Planted> = (0..30)
        .map(|_| plant("password-assignment", &mut rng))
        .collect();
    let cli = Cli::new();
    cli.run(&["create", "--id", "s"]).ok();
    cli.run_with(
        &["append", "s"],
        session_lines(secrets.len(), &secrets, 20).as_bytes(),
    )
    .ok();
    let live = cli.run(&["secrets", "s"]);
    live.fails(1);
    assert_eq!(
        live.stdout.lines().count(),
        secrets.len(),
        "{}",
        live.stdout
    );
    cli.run(&["archive", "s"]).ok();
    let segment = std::fs::read_dir(cli.session_dir("s"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "seg"))
        .unwrap();
    let bytes = std::fs::read(&segment).unwrap();
    assert_eq!(&bytes[..8], b"AGLOGCSG", "archive compressed the segment");

    cli.run(&["create", "--id", "t"]).ok();
    let damaged = cli.session_dir("t").join("damaged");
    std::fs::create_dir(&damaged).unwrap();
    let name = format!(
        "{}.1765000000000",
        segment.file_name().unwrap().to_string_lossy()
    );
    std::fs::write(damaged.join(&name), &bytes).unwrap();
    let run = cli.run(&["secrets", "t", "--json"]);
    run.fails(1);
    let found: Vec<Value> = run.stdout.lines().map(|l| parse_json(l).unwrap()).collect();
    assert_eq!(found.len(), secrets.len(), "{}", run.stdout);
    for f in &found {
        assert_eq!(
            f.get("path").and_then(|p| p.as_str()),
            Some(format!("damaged/{name}").as_str())
        );
        assert_eq!(
            f.get("rule").and_then(|p| p.as_str()),
            Some("password-assignment")
        );
    }

    // A cold file whose header is damaged is scanned as its bytes, without an error.
    let mut broken = bytes.clone();
    broken[20] ^= 0xff;
    std::fs::write(damaged.join(&name), &broken).unwrap();
    let run = cli.run(&["secrets", "t"]);
    assert!(run.code == 0 || run.code == 1, "{}", run.stderr);
}
