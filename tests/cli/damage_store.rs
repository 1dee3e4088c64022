//! Damage to a session's metadata and to the store never passes silently (issue 13, items 4, 9,
//! 11 and part of 12): a broken, flipped or missing `session.json` is named by every command and
//! skipped by the store-wide ones (the other sessions still served, exit 1); `recover` rebuilds
//! it from the write-once `LOGMETA`; `delete` and `gc` work without it; a store that cannot be
//! read says "permission denied"; a failed metadata write leaves no `session.json.tmp`.

use crate::cli_common;

use std::path::Path;

use cli_common::{example, Cli, BIN};

/// The session header line of an example file.
fn header_line(name: &str) -> String {
    std::fs::read_to_string(example(&format!("{name}.jsonl")))
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_string()
}

/// The header `export --header` gives for session `id` (imported from the coding-session
/// example) is the example's, with its id.
#[track_caller]
fn assert_header_is_the_examples(cli: &Cli, id: &str) {
    let export = cli.run(&["export", "--header", id]);
    let first = export.ok().lines().next().unwrap().to_string();
    assert_eq!(
        first,
        header_line("coding-session").replace("\"sess-0001\"", &format!("{id:?}"))
    );
}

/// A store with sessions a, b, c, d imported from the same example.
fn four_sessions() -> Cli {
    let cli = Cli::new();
    for id in ["a", "b", "c", "d"] {
        cli.import_example("coding-session", &["--id", id]);
    }
    cli
}

/// Breaks b's session.json (not JSON), removes c's, flips one bit of d's title.
fn break_three(cli: &Cli) {
    std::fs::write(cli.session_dir("b").join("session.json"), b"{bad").unwrap();
    std::fs::remove_file(cli.session_dir("c").join("session.json")).unwrap();
    let path = cli.session_dir("d").join("session.json");
    let text = std::fs::read_to_string(&path).unwrap();
    // "corpus" -> "corpur": still valid JSON, a different title.
    let at = text.find("corpus").unwrap() + 5;
    let mut bytes = text.into_bytes();
    bytes[at] ^= 0x01;
    std::fs::write(&path, bytes).unwrap();
}

/// Asserts that `stderr` names the session.json of b, c and d.
#[track_caller]
fn names_the_three(cli: &Cli, stderr: &str) {
    for id in ["b", "c", "d"] {
        let path = cli.session_dir(id).join("session.json");
        assert!(
            stderr.contains(&path.display().to_string()),
            "{id} not named:\n{stderr}"
        );
    }
    assert!(stderr.contains("missing"), "{stderr}");
    assert!(stderr.contains("checksum mismatch"), "{stderr}");
}

/// A broken session.json blocked `gc` for the whole store, a missing one made the session vanish
/// from `ls`, and a flipped bit in a title went unnoticed. Now `ls`, `search`, `stats --all`,
/// `verify --all`, `gc` and `archive --idle-days` name each of the three, serve the other
/// sessions and exit 1.
#[test]
fn store_wide_commands_name_broken_metadata_and_serve_the_others() {
    let cli = four_sessions();
    cli.import_example("fix-typo", &["--id", "e"]);
    cli.run(&["delete", "e"]).ok();
    break_three(&cli);

    let ls = cli.run(&["ls", "--json"]);
    names_the_three(&cli, ls.fails(1));
    assert!(ls.stdout.contains("\"id\":\"a\""), "{}", ls.stdout);

    let search = cli.run(&["search", "--type", "turn/start"]);
    names_the_three(&cli, search.fails(1));
    assert!(
        search.stdout.lines().any(|l| l.starts_with("a ")),
        "{}",
        search.stdout
    );

    let stats = cli.run(&["stats", "--all", "--json"]);
    names_the_three(&cli, stats.fails(1));
    assert!(stats.stdout.contains("\"sessions\":1"), "{}", stats.stdout);

    let verify = cli.run(&["verify", "--all"]);
    verify.fails(1);
    names_the_three(&cli, &verify.stdout);
    assert!(verify.stdout.contains("ok a:"), "{}", verify.stdout);

    // gc removes the deleted session and leaves the three as they are.
    let gc = cli.run(&["gc"]);
    names_the_three(&cli, gc.fails(1));
    assert!(gc.stdout.contains("removed e"), "{}", gc.stdout);
    assert!(!cli.session_dir("e").exists());
    for id in ["b", "c", "d"] {
        assert!(cli
            .session_dir(id)
            .join("00000000000000000000.seg")
            .exists());
    }

    // Archiving the idle sessions archives a and names the three.
    let archive = cli.run(&["archive", "--idle-days", "0"]);
    names_the_three(&cli, archive.fails(1));
    assert!(archive.stdout.contains("archived a"), "{}", archive.stdout);

    // A command on one of them names the file and what is wrong.
    let export = cli.run(&["export", "--header", "d"]);
    let err = export.fails(1);
    assert!(
        err.contains("checksum mismatch") && err.contains("recover d"),
        "{err}"
    );
    assert!(export.stdout.is_empty());
}

/// `recover` refused a session whose session.json was broken. Now it rebuilds the file from
/// LOGMETA (written at import and at fork): the header exported as imported, state active, the
/// damaged file kept; `verify` is then clean.
#[test]
fn recover_rebuilds_session_json_from_logmeta() {
    let cli = four_sessions();
    break_three(&cli);
    for id in ["b", "c", "d"] {
        let out = cli.run(&["recover", id]);
        let stdout = out.ok();
        assert!(
            stdout.contains("rebuilt") && stdout.contains("state active"),
            "{stdout}"
        );
        assert_header_is_the_examples(&cli, id);
        cli.run(&["verify", id]).ok();
    }
    assert!(cli.session_dir("b").join("session.json.damaged").exists());
    assert!(cli.session_dir("d").join("session.json.damaged").exists());

    // A fork has its own LOGMETA, with its lineage.
    let fork = cli.run(&["fork", "a", "--at", "10", "--id", "f"]);
    fork.ok();
    std::fs::remove_file(cli.session_dir("f").join("session.json")).unwrap();
    cli.run(&["recover", "f"]).ok();
    let ls = cli.run(&["ls", "--json"]);
    assert!(ls.ok().contains("\"parentSession\":\"a\""), "{}", ls.stdout);
}

/// A damaged `LOGMETA` beside a sound `session.json`: `verify` named it, but `recover` only
/// warned and exited 0, so `verify` failed until the user removed the file by hand. `recover`
/// now writes it again from the sound `session.json` (the damaged file kept as
/// `LOGMETA.damaged`), and the rebuilt one serves a later rebuild of `session.json`.
#[test]
fn recover_rewrites_a_damaged_logmeta_from_a_sound_session_json() {
    let cli = Cli::new();
    cli.import_example("coding-session", &["--id", "a"]);
    let dir = cli.session_dir("a");
    let logmeta = dir.join("LOGMETA");
    let mut bytes = std::fs::read(&logmeta).unwrap();
    bytes[70] ^= 1;
    std::fs::write(&logmeta, &bytes).unwrap();
    cli.run(&["verify", "a"]).fails(1);
    let out = cli.run(&["recover", "a"]);
    let stdout = out.ok();
    assert!(
        stdout.contains("LOGMETA was damaged") && stdout.contains("LOGMETA.damaged"),
        "{stdout}"
    );
    assert_eq!(std::fs::read(dir.join("LOGMETA.damaged")).unwrap(), bytes);
    cli.run(&["verify", "a"]).ok();
    // The rebuilt LOGMETA rebuilds session.json as the original would have.
    std::fs::remove_file(dir.join("session.json")).unwrap();
    cli.run(&["recover", "a"]).ok();
    assert_header_is_the_examples(&cli, "a");
    cli.run(&["verify", "a"]).ok();
}

/// Another session's session.json copied over this one's (a backup restored into the wrong
/// folder) passes its own checksum: `verify` said "ok" and `export --header`, `ls` and `show`
/// gave the other session's id, title and creation time. `verify` now names it against LOGMETA
/// (written when the session was created) and `recover` rebuilds it from there.
#[test]
fn another_sessions_session_json_is_named_and_rebuilt() {
    let cli = four_sessions();
    let copied = cli.session_dir("b").join("session.json");
    std::fs::copy(&copied, cli.session_dir("a").join("session.json")).unwrap();
    let verify = cli.run(&["verify", "a"]);
    verify.fails(1);
    let said = &verify.stdout;
    assert!(
        said.contains("another session's") && said.contains("\"b\"") && said.contains("LOGMETA"),
        "{said}"
    );
    let out = cli.run(&["recover", "a"]);
    assert!(out.ok().contains("rebuilt"), "{}", out.stdout);
    assert_header_is_the_examples(&cli, "a");
    cli.run(&["verify", "a"]).ok();
    assert!(cli.session_dir("a").join("session.json.damaged").exists());
}

/// `delete` needed a parsable session.json, and `recover --salvage` refused the session. Now
/// delete works with a broken or missing one (with or without LOGMETA), gc then removes it,
/// and salvage recovers the log.
#[test]
fn delete_gc_and_salvage_work_without_a_readable_session_json() {
    let cli = four_sessions();
    break_three(&cli);
    // c has no LOGMETA either (a session of an older agentlog).
    std::fs::remove_file(cli.session_dir("c").join("LOGMETA")).unwrap();
    let salvage = cli.run(&["recover", "--salvage", "c"]);
    let err = salvage.fails(1);
    assert!(
        err.contains("no LOGMETA") && err.contains("by hand"),
        "{err}"
    );
    assert!(
        salvage.stdout.contains("107 event(s) in the log"),
        "{}",
        salvage.stdout
    );
    cli.run(&["recover", "--salvage", "b"]).ok();

    let del = cli.run(&["delete", "c", "d"]);
    del.ok();
    assert!(del.stdout.contains("deleted c") && del.stdout.contains("deleted d"));
    let ls = cli.run(&["ls"]);
    let listed = ls.ok();
    assert!(
        !listed.contains("\nc ") && !listed.contains("\nd "),
        "{listed}"
    );
    let gc = cli.run(&["gc"]);
    assert!(gc.ok().contains("removed c") && gc.stdout.contains("removed d"));
    assert!(!cli.session_dir("c").exists() && !cli.session_dir("d").exists());
}

/// A session whose session.json and LOGMETA are both lost: `recover` says exactly that and what
/// to write; the line it suggests, written by hand, is accepted, and the next recover adds the
/// checksum and LOGMETA (as it does for any session.json an older agentlog wrote).
#[test]
fn without_logmeta_recover_says_what_to_do_and_upgrades_older_files() {
    let cli = Cli::new();
    cli.import_example("fix-typo", &["--id", "s"]);
    let dir = cli.session_dir("s");
    std::fs::remove_file(dir.join("LOGMETA")).unwrap();
    std::fs::remove_file(dir.join("session.json")).unwrap();
    let out = cli.run(&["recover", "s"]);
    let err = out.fails(1).to_string();
    assert!(err.contains("no LOGMETA"), "{err}");
    let start = err.find("{\"header\"").unwrap();
    let end = err[start..].find(" (a file").unwrap() + start;
    std::fs::write(dir.join("session.json"), format!("{}\n", &err[start..end])).unwrap();

    // Read without a checksum; verify notes both missing pieces.
    cli.run(&["export", "s"]).ok();
    let verify = cli.run(&["verify", "s"]);
    let notes = verify.ok();
    assert!(
        notes.contains("no checksum") && notes.contains("no LOGMETA"),
        "{notes}"
    );
    let rec = cli.run(&["recover", "s"]);
    assert!(rec.ok().contains("written again with one") && rec.stdout.contains("LOGMETA written"));
    let verify = cli.run(&["verify", "s"]);
    assert!(!verify.ok().contains("note:"), "{}", verify.stdout);
    assert!(std::fs::read_to_string(dir.join("session.json"))
        .unwrap()
        .contains("\n{\"crc32\":\""));
}

/// Runs the binary as the unprivileged user 65534 (tests run as root, whom permissions do not
/// stop); `None` when that cannot be done here.
fn as_nobody(store: &Path, args: &[&str]) -> Option<(i32, String, String)> {
    let is_root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .ok()
        .is_some_and(|o| o.stdout.starts_with(b"0\n"));
    if !is_root {
        return None;
    }
    let out = std::process::Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            BIN,
            "--store",
        ])
        .arg(store)
        .args(args)
        .env_remove("AGENTLOG_STORE")
        .output()
        .ok()?;
    Some((
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// A store the user cannot read: `ls` printed an empty table with exit 0, `export s` said "no
/// session", `gc` said "no store". Now each says "permission denied" with the path, exit 1.
#[test]
fn permission_errors_are_never_emptiness() {
    use std::os::unix::fs::PermissionsExt;
    let cli = Cli::new();
    cli.import_example("fix-typo", &["--id", "s"]);
    // The temporary directory is traversable; the store (mode 0700, root's) is not.
    std::fs::set_permissions(cli.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let store = cli.store();
    if as_nobody(&store, &["--version"]).is_none_or(|(code, _, _)| code != 0) {
        println!("skipped: cannot run the binary as uid 65534 here (not root, or no setpriv)");
        return;
    }
    let sessions = store.join("sessions").display().to_string();
    for args in [
        &["ls"][..],
        &["export", "s"],
        &["gc"],
        &["stats", "--all"],
        &["search", "--text", "a"],
        &["verify", "--all"],
        &["delete", "s"],
    ] {
        let Some((code, stdout, stderr)) = as_nobody(&store, args) else {
            panic!("{args:?} did not run");
        };
        assert_eq!(code, 1, "{args:?}\n{stdout}\n{stderr}");
        assert!(
            stderr.contains("permission denied") && stderr.contains(&sessions),
            "{args:?}: {stderr}"
        );
        assert!(!stdout.contains("ID"), "{args:?}: {stdout}");
    }
    // A readable store, one session that is not: named, the others listed.
    cli.import_example("fix-typo", &["--id", "t"]);
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(
        store.join("sessions"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let t = cli.session_dir("t");
    std::fs::set_permissions(&t, std::fs::Permissions::from_mode(0o755)).unwrap();
    for f in std::fs::read_dir(&t).unwrap().flatten() {
        std::fs::set_permissions(f.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let (code, stdout, stderr) = as_nobody(&store, &["ls"]).unwrap();
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(stderr.contains("permission denied"), "{stderr}");
    assert!(
        stderr.contains(&cli.session_dir("s").display().to_string()),
        "{stderr}"
    );
    assert!(stdout.lines().any(|l| l.starts_with("t ")), "{stdout}");
}

/// A metadata write that failed for lack of space left an empty `session.json.tmp`. Here the
/// write fails on the file size limit (`ulimit -f`, SIGXFSZ ignored: the write returns EFBIG,
/// the same path as ENOSPC): the command fails naming the file, session.json is unchanged and
/// no temporary file is left. A stale one (a killed writer's) is removed by gc and by the next
/// writer.
#[test]
fn a_failed_metadata_write_leaves_no_temporary_file() {
    let cli = Cli::new();
    let title = "t".repeat(8000);
    cli.import_example("fix-typo", &["--id", "s", "--title", &title]);
    let dir = cli.session_dir("s");
    let before = std::fs::read(dir.join("session.json")).unwrap();
    assert!(before.len() > 4096);
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg("trap '' XFSZ; ulimit -f 4; exec \"$0\" \"$@\"")
        .arg(BIN)
        .arg("--store")
        .arg(cli.store())
        .args(["archive", "s"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("session.json.tmp"), "{stderr}");
    assert!(!dir.join("session.json.tmp").exists(), "left behind");
    assert_eq!(std::fs::read(dir.join("session.json")).unwrap(), before);

    // Stale temporary files (of session.json and of LOGMETA): gc removes them, and so does the
    // next writer.
    for tmp in ["session.json.tmp", "LOGMETA.tmp"] {
        std::fs::write(dir.join(tmp), b"").unwrap();
        cli.run(&["gc"]).ok();
        assert!(!dir.join(tmp).exists(), "{tmp} after gc");
        std::fs::write(dir.join(tmp), b"").unwrap();
        cli.run_with(&["append", "s"], b"").ok();
        assert!(!dir.join(tmp).exists(), "{tmp} after append");
    }
}
