//! Damage never passes silently: a full disk after a reopen, damaged and truncated tails, missing,
//! swapped and duplicated segment and index files, stray bytes after the records, symbolic links.
//! Every command either serves the whole session or fails naming the damage; never a silent short
//! answer, never a signal.

use crate::cli_common;

use std::path::{Path, PathBuf};

use cli_common::{segments, Cli, Run};

/// A line of an event without seq and time, about `size` bytes long.
fn event_line(i: usize, size: usize) -> String {
    let text: String = std::iter::repeat_n('a', size.saturating_sub(90)).collect();
    format!(
        r#"{{"type":"system/message","data":{{"role":"system","content":[{{"type":"text","text":"{i} {text}"}}]}}}}"#
    )
}

fn lines(from: usize, n: usize, size: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for i in from..from + n {
        out.extend_from_slice(event_line(i, size).as_bytes());
        out.push(b'\n');
    }
    out
}

/// A store whose sessions roll segments every `segment` bytes.
fn cli_with_segments(segment: &str) -> Cli {
    Cli::with_config(&format!("segment_size = \"{segment}\"\n"))
}

/// A session `s` of `n` events, closed cleanly.
fn session(cli: &Cli, n: usize, size: usize) -> PathBuf {
    cli.run(&["import", "/dev/null", "--id", "s"]).ok();
    cli.run_with(&["append", "s"], &lines(0, n, size)).ok();
    cli.session_dir("s")
}

/// The error of a failed run names the damage: the file and "offset" or what is missing.
#[track_caller]
fn fails_naming(run: &Run, needles: &[&str]) {
    assert_eq!(
        run.code, 1,
        "expected exit 1\nstdout: {}\nstderr: {}",
        run.stdout, run.stderr
    );
    for n in needles {
        assert!(
            run.stderr.contains(n),
            "stderr does not name {n:?}: {}",
            run.stderr
        );
    }
}

/// Every reading command either serves all `n` events or fails naming the damage.
#[track_caller]
fn every_command_fails_naming(cli: &Cli, needles: &[&str]) {
    for args in [
        &["export", "s"][..],
        &["show", "s"],
        &["stats", "s"],
        &["status", "s"],
        &["derive", "s"],
        &["search", "--session", "s"],
        &["verify", "s"],
    ] {
        let run = cli.run(args);
        assert_eq!(
            run.code, 1,
            "{args:?} must fail\nstdout: {}\nstderr: {}",
            run.stdout, run.stderr
        );
        let said = format!("{}{}", run.stdout, run.stderr);
        for n in needles {
            assert!(said.contains(n), "{args:?}: does not name {n:?}: {said}");
        }
    }
}

/// The number of lines `export` prints, when it succeeds.
fn exported(cli: &Cli) -> Option<usize> {
    let run = cli.run(&["export", "s"]);
    (run.code == 0).then(|| run.stdout.lines().count())
}

/// Runs the binary on the store `store` with `input` on stdin.
fn run_in(store: &Path, args: &[&str], input: &[u8]) -> Run {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new(cli_common::BIN)
        .arg("--store")
        .arg(store)
        .args(args)
        .env_remove("AGENTLOG_STORE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    cli_common::finish(out)
}

/// A tmpfs mounted for one test, unmounted when dropped.
struct Tmpfs {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(&self.path)
            .status();
    }
}

fn mount_tmpfs(size: &str) -> Option<Tmpfs> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mnt");
    std::fs::create_dir(&path).unwrap();
    match std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
        .arg(&path)
        .output()
    {
        Ok(o) if o.status.success() => Some(Tmpfs { path, _dir: dir }),
        Ok(o) => {
            eprintln!(
                "skipping: cannot mount a tmpfs here: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            );
            None
        }
        Err(e) => {
            eprintln!("skipping: cannot run mount: {e}");
            None
        }
    }
}

/// Fills the file system of `dir` until `leave` bytes are free, with the file `fill`.
fn fill(dir: &Path, fill: &Path, leave: u64) {
    let st = rustix::fs::statvfs(dir).unwrap();
    let free = st.f_bavail * st.f_frsize;
    let n = free.saturating_sub(leave);
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(fill)
        .unwrap();
    let chunk = vec![1u8; 1 << 20];
    let mut left = n;
    let mut f = f;
    while left > 0 {
        let k = left.min(chunk.len() as u64) as usize;
        if std::io::Write::write_all(&mut f, &chunk[..k]).is_err() {
            break;
        }
        left -= k as u64;
    }
}

/// A full disk after a reopen was a SIGBUS (exit 135): opening zeroed the tail after the records
/// by punching a hole (`FALLOC_FL_ZERO_RANGE` is not supported on tmpfs), `fallocate` then failed
/// with ENOSPC, and the append wrote through the map into the hole. Now a full disk is exit 1
/// naming the full disk, the log stays consistent, and appending resumes once space is back.
#[test]
fn a_full_disk_after_a_reopen_is_an_error_not_a_signal() {
    let Some(fs) = mount_tmpfs("64m") else {
        return;
    };
    let store = fs.path.join("store");
    let run = |args: &[&str], input: &[u8]| run_in(&store, args, input);
    run(&["import", "/dev/null", "--id", "s"], b"").ok();
    run(&["append", "s"], &lines(0, 1, 200)).ok();
    // 3 MiB free: less than a preallocation step, more than these events need.
    fill(&fs.path, &fs.path.join("fill"), 3 << 20);
    run(&["append", "s"], &lines(1, 40, 200)).ok();
    // Nothing free: the next append fails cleanly, every time, after every reopen.
    fill(&fs.path, &fs.path.join("fill"), 0);
    let mut appended = 41;
    for round in 0..3 {
        let r = run(&["append", "s"], &lines(appended, 20_000, 200));
        assert_eq!(
            r.code, 1,
            "round {round}: exit {} (-1: a signal, SIGBUS)\nstderr: {}",
            r.code, r.stderr
        );
        assert!(r.stderr.contains("disk is full"), "{}", r.stderr);
        let v = run(&["verify", "s"], b"");
        assert_eq!(v.code, 0, "{}{}", v.stdout, v.stderr);
        let n = run(&["export", "s"], b"").ok().lines().count();
        assert!(n >= appended, "{n} < {appended}");
        appended = n;
    }
    // Space comes back: appending goes on at the right seq.
    std::fs::remove_file(fs.path.join("fill")).unwrap();
    let r = run(&["append", "s", "--ack"], &lines(appended, 3, 200));
    let acks: Vec<u64> = r.ok().lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(
        acks,
        (appended as u64..appended as u64 + 3).collect::<Vec<_>>()
    );
    run(&["verify", "s"], b"").ok();
}

/// What a command said about a damaged session.
fn check_command(cli: &Cli, args: &[&str], n: usize, what: &str) -> bool {
    let run = cli.run(args);
    match run.code {
        0 => {
            let count = match args[0] {
                "export" => Some(run.stdout.lines().count()),
                "show" => Some(run.stdout.lines().filter(|l| !l.trim().is_empty()).count()),
                "stats" | "status" => run
                    .stdout
                    .split("\"events\":")
                    .nth(1)
                    .and_then(|t| t.split(|c: char| !c.is_ascii_digit()).next())
                    .and_then(|d| d.parse().ok()),
                "verify" => run
                    .stdout
                    .split(": ")
                    .nth(1)
                    .and_then(|t| t.split(' ').next())
                    .and_then(|d| d.parse().ok()),
                _ => None,
            };
            if let Some(c) = count {
                assert_eq!(
                    c,
                    n,
                    "{what}: `{}` succeeded with {c} events of {n}: a silent short answer\n{}",
                    args.join(" "),
                    run.stdout
                );
            }
            true
        }
        1 => {
            let said = format!("{}{}", run.stdout, run.stderr);
            assert!(
                said.contains(".seg") || said.contains(".idx"),
                "{what}: `{}` failed without naming the damaged file: {said}",
                args.join(" "),
            );
            false
        }
        code => panic!(
            "{what}: `{}` exited {code}: {}{}",
            args.join(" "),
            run.stdout,
            run.stderr
        ),
    }
}

/// Runs every reading command on session `s` of `n` events: each serves all of them or fails
/// naming the damage; then a plain `recover` either keeps every event or refuses, and never
/// removes a file (the evidence).
fn serves_all_or_names_damage(cli: &Cli, n: usize, what: &str) {
    let mut served = Vec::new();
    for args in [
        &["export", "s"][..],
        &["show", "s"],
        &["stats", "s", "--json"],
        &["status", "s", "--json"],
        &["derive", "s"],
        &["search", "--session", "s"],
        &["verify", "s"],
    ] {
        served.push(check_command(cli, args, n, what));
    }
    let dir = cli.session_dir("s");
    let files_before = count_files(&dir);
    let run = cli.run(&["recover", "s"]);
    if run.code == 0 {
        assert_eq!(
            exported(cli),
            Some(n),
            "{what}: plain recover lost events: {}{}",
            run.stdout,
            run.stderr
        );
    } else {
        assert_eq!(run.code, 1, "{what}: {}", run.stderr);
        assert!(
            run.stderr.contains(".seg") || run.stderr.contains(".idx"),
            "{what}: recover refused without naming the damage: {}",
            run.stderr
        );
        assert!(
            count_files(&dir) >= files_before,
            "{what}: a refused recover removed files"
        );
    }
}

/// Files in a session directory and its damaged/ folder (LOCK and temporary files aside).
fn count_files(dir: &Path) -> usize {
    let mut n = 0;
    for sub in [dir.to_path_buf(), dir.join("damaged")] {
        if let Ok(rd) = std::fs::read_dir(&sub) {
            n += rd
                .flatten()
                .filter(|e| {
                    let name = e.file_name();
                    let name = name.to_string_lossy();
                    e.file_type().is_ok_and(|t| t.is_file())
                        && (name.contains(".seg") || name.contains(".idx"))
                })
                .count();
        }
    }
    n
}

fn indexes(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "idx"))
        .collect();
    v.sort();
    v
}

/// The acceptance matrix: segment and index files of a multi-segment session deleted,
/// truncated, swapped and duplicated. Before, a deleted last segment verified "ok" with fewer
/// events, `recover` deleted the orphaned index (losing the evidence), a deleted first segment
/// gave "seq 330 is out of range", and a truncated segment of a cleanly closed session passed
/// for a torn tail.
#[test]
fn segment_and_index_files_deleted_truncated_swapped_or_duplicated() {
    let n = 600;
    type Damage = fn(&Path);
    let cases: Vec<(&str, Damage)> = vec![
        ("delete the last segment", |d| {
            std::fs::remove_file(segments(d).pop().unwrap()).unwrap()
        }),
        ("delete the last segment and its index", |d| {
            std::fs::remove_file(segments(d).pop().unwrap()).unwrap();
            std::fs::remove_file(indexes(d).pop().unwrap()).unwrap();
        }),
        ("delete the first segment", |d| {
            std::fs::remove_file(&segments(d)[0]).unwrap()
        }),
        ("delete the first segment and its index", |d| {
            std::fs::remove_file(&segments(d)[0]).unwrap();
            std::fs::remove_file(&indexes(d)[0]).unwrap();
        }),
        ("delete a middle segment", |d| {
            std::fs::remove_file(&segments(d)[1]).unwrap()
        }),
        ("delete a middle segment and its index", |d| {
            std::fs::remove_file(&segments(d)[1]).unwrap();
            std::fs::remove_file(&indexes(d)[1]).unwrap();
        }),
        ("delete every index", |d| {
            for i in indexes(d) {
                std::fs::remove_file(i).unwrap();
            }
        }),
        ("truncate the last segment", |d| {
            let s = segments(d).pop().unwrap();
            let f = std::fs::OpenOptions::new().write(true).open(s).unwrap();
            f.set_len(20_000).unwrap();
        }),
        ("truncate a middle segment", |d| {
            let s = &segments(d)[1];
            let f = std::fs::OpenOptions::new().write(true).open(s).unwrap();
            f.set_len(20_000).unwrap();
        }),
        ("swap two segments", |d| {
            let s = segments(d);
            let tmp = d.join("swap.tmp");
            std::fs::rename(&s[0], &tmp).unwrap();
            std::fs::rename(&s[1], &s[0]).unwrap();
            std::fs::rename(&tmp, &s[1]).unwrap();
        }),
        ("swap two indexes", |d| {
            let s = indexes(d);
            let tmp = d.join("swap.tmp");
            std::fs::rename(&s[0], &tmp).unwrap();
            std::fs::rename(&s[1], &s[0]).unwrap();
            std::fs::rename(&tmp, &s[1]).unwrap();
        }),
        ("copy a segment over the next", |d| {
            let s = segments(d);
            std::fs::copy(&s[0], &s[1]).unwrap();
        }),
        ("copy the last segment under the next base", |d| {
            let s = segments(d).pop().unwrap();
            std::fs::copy(&s, d.join("00000000000000000600.seg")).unwrap();
        }),
        ("copy the first segment under a later base", |d| {
            let s = &segments(d)[0];
            std::fs::copy(s, d.join("00000000000000099999.seg")).unwrap();
        }),
    ];
    // The only segment of a one-segment session, with or without its index.
    for (what, with_index) in [("delete the only segment", false), ("and its index", true)] {
        let cli = Cli::new();
        let dir = session(&cli, 50, 100);
        std::fs::remove_file(segments(&dir).pop().unwrap()).unwrap();
        if with_index {
            std::fs::remove_file(indexes(&dir).pop().unwrap()).unwrap();
        }
        serves_all_or_names_damage(&cli, 50, what);
        assert!(exported(&cli).is_none(), "{what}");
        fails_naming(
            &cli.run_with(&["append", "s"], &lines(0, 1, 100)),
            &[".seg"],
        );
    }
    for (what, damage) in cases {
        let cli = cli_with_segments("64KiB");
        let dir = session(&cli, n, 300);
        assert!(segments(&dir).len() >= 3, "{what}: {:?}", segments(&dir));
        damage(&dir);
        serves_all_or_names_damage(&cli, n, what);
    }
}

/// The last index file's header: (state, count, end).
fn index_header(idx: &Path) -> (u32, u64, u64) {
    let b = std::fs::read(idx).unwrap();
    (
        u32::from_le_bytes(b[12..16].try_into().unwrap()),
        u64::from_le_bytes(b[40..48].try_into().unwrap()),
        u64::from_le_bytes(b[48..56].try_into().unwrap()),
    )
}

/// The offset and payload length of record `i` of a segment, from its index.
fn record_at(seg: &Path, idx: &Path, i: u64) -> (u64, u64) {
    let ib = std::fs::read(idx).unwrap();
    let at = 64 + 4 * i as usize;
    let off = u64::from(u32::from_le_bytes(ib[at..at + 4].try_into().unwrap()));
    let sb = std::fs::read(seg).unwrap();
    let len = u64::from(u32::from_le_bytes(
        sb[off as usize..off as usize + 4].try_into().unwrap(),
    ));
    (off, len)
}

/// Zeroing the last 3 bytes of the last record of a cleanly closed session: `verify` named it,
/// but `export`, `show`, `stats`, `status` and `search` exited 0 with one event fewer. Every
/// reader now fails like verify, naming the file, the offset and the seq.
#[test]
fn a_damaged_last_record_of_a_closed_session_fails_every_reader() {
    let cli = Cli::new();
    let dir = session(&cli, 107, 200);
    let seg = segments(&dir).pop().unwrap();
    let idx = indexes(&dir).pop().unwrap();
    let (state, count, _) = index_header(&idx);
    assert_eq!(state, 2, "closed cleanly");
    let (off, len) = record_at(&seg, &idx, count - 1);
    let mut b = std::fs::read(&seg).unwrap();
    // The last 3 bytes of the record that are not zero already.
    let start = (off + 16) as usize;
    let mut end = (off + 16 + len) as usize;
    while b[end - 1] == 0 && end > start + 3 {
        end -= 1;
    }
    b[end - 3..end].fill(0);
    std::fs::write(&seg, b).unwrap();
    let name = seg.file_name().unwrap().to_str().unwrap().to_string();
    every_command_fails_naming(
        &cli,
        &[&name, &format!("offset {off}"), "seq 106", "checksum"],
    );
    // Plain recover refuses (a clean close vouches for the record) and changes nothing.
    fails_naming(&cli.run(&["recover", "s"]), &[&name, "seq 106"]);
    assert_eq!(exported(&cli), None);
    // Salvage keeps the 106 events before it.
    cli.run(&["recover", "s", "--salvage"]).ok();
    assert_eq!(exported(&cli), Some(106));
}

/// `truncate -s 100000` on the segment of a cleanly closed 600-event session: `verify` printed
/// "ok: 278 events" (a note, exit 0) though the index records 600, `export` gave 278 lines, and
/// plain `recover` cut 322 events as "a torn tail of 0 bytes". Events a clean close vouches for
/// are never a torn tail.
#[test]
fn a_truncated_segment_of_a_closed_session_is_not_a_torn_tail() {
    let cli = Cli::new();
    let dir = session(&cli, 600, 300);
    let seg = segments(&dir).pop().unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(&seg).unwrap();
    f.set_len(100_000).unwrap();
    drop(f);
    let name = seg.file_name().unwrap().to_str().unwrap().to_string();
    every_command_fails_naming(&cli, &[&name, "offset"]);
    fails_naming(&cli.run(&["recover", "s"]), &[&name]);
    assert_eq!(segments(&dir), vec![seg.clone()]);
    let run = cli.run(&["recover", "s", "--salvage"]);
    run.ok();
    let kept = exported(&cli).unwrap();
    assert!(kept > 100 && kept < 600, "{kept}");
}

/// Rewrites an index header's state (1 open, 2 closed, 3 sealed), fixing its checksum.
fn set_index_state(idx: &Path, state: u32) {
    let mut b = std::fs::read(idx).unwrap();
    b[12..16].copy_from_slice(&state.to_le_bytes());
    let crc = crc32fast::hash(&b[..60]);
    b[60..64].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(idx, b).unwrap();
}

/// A writer killed before a segment finished sealing (its index still says open, the next
/// segment exists), and one flipped bit in the zeros after that segment's records: `verify`
/// exited 0 reporting fewer events while `export` showed all, and `recover` moved the valid,
/// checksummed events of the next segment to damaged/. Non-zero bytes after the complete
/// records never cost a valid record.
#[test]
fn a_stray_bit_after_the_records_of_an_unsealed_segment_costs_nothing() {
    let n = 300;
    for (what, flip_at) in [
        ("in the zeros", 40u64),
        ("a record header", 0),
        ("far", 9000),
    ] {
        let cli = cli_with_segments("64KiB");
        let dir = session(&cli, n, 300);
        let segs = segments(&dir);
        assert!(segs.len() >= 2);
        let idx = indexes(&dir)[0].clone();
        let (_, _, end) = index_header(&idx);
        set_index_state(&idx, 1);
        let mut b = std::fs::read(&segs[0]).unwrap();
        let at = (end + flip_at) as usize;
        if at >= b.len() {
            b.resize(at + 1, 0);
        }
        b[at] ^= 0x04;
        std::fs::write(&segs[0], b).unwrap();
        serves_all_or_names_damage(&cli, n, what);
        let v = cli.run(&["verify", "s"]);
        assert!(
            v.stdout.contains(&format!("{n} event")),
            "{what}: {}",
            v.stdout
        );
        assert_eq!(exported(&cli), Some(n), "{what}");
        assert!(!dir.join("damaged").exists(), "{what}: something was moved");
    }
}

/// A `LOCK` that was a symbolic link got its target overwritten with "pid N"; symlinked segment
/// files were written through; a symlinked session folder was followed by `append` and `delete`
/// (a session of another store was appended to and marked deleted). Each is refused now, naming
/// the link, and the target is untouched.
#[test]
fn symbolic_links_are_never_written_through() {
    let cli = Cli::new();
    let dir = session(&cli, 5, 100);
    let outside = cli.dir.path().join("precious");
    std::fs::write(&outside, b"keep me").unwrap();

    // LOCK as a link.
    std::fs::remove_file(dir.join("LOCK")).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("LOCK")).unwrap();
    let run = cli.run_with(&["append", "s"], &lines(5, 1, 100));
    fails_naming(&run, &["LOCK", "symbolic link"]);
    assert_eq!(std::fs::read(&outside).unwrap(), b"keep me");
    std::fs::remove_file(dir.join("LOCK")).unwrap();

    // A segment file as a link to a copy of itself elsewhere.
    let seg = segments(&dir).pop().unwrap();
    let moved = cli.dir.path().join("moved.seg");
    std::fs::rename(&seg, &moved).unwrap();
    std::os::unix::fs::symlink(&moved, &seg).unwrap();
    let before = std::fs::read(&moved).unwrap();
    let run = cli.run_with(&["append", "s"], &lines(5, 1, 100));
    fails_naming(&run, &["symbolic link"]);
    assert_eq!(std::fs::read(&moved).unwrap(), before);
    std::fs::remove_file(&seg).unwrap();
    std::fs::rename(&moved, &seg).unwrap();
    cli.run_with(&["append", "s"], &lines(5, 1, 100)).ok();

    // A session folder that links to another store's session.
    let other = Cli::new();
    let target = session(&other, 3, 100);
    std::os::unix::fs::symlink(&target, cli.session_dir("t")).unwrap();
    let meta = std::fs::read(target.join("session.json")).unwrap();
    let files = count_files(&target);
    fails_naming(
        &cli.run_with(&["append", "t"], &lines(0, 1, 100)),
        &["symbolic link"],
    );
    fails_naming(&cli.run(&["delete", "t"]), &["symbolic link"]);
    fails_naming(&cli.run(&["archive", "t"]), &["symbolic link"]);
    assert_eq!(std::fs::read(target.join("session.json")).unwrap(), meta);
    assert_eq!(count_files(&target), files);
    assert_eq!(exported_from(&other), Some(3));
}

fn exported_from(cli: &Cli) -> Option<usize> {
    exported(cli)
}

/// Two writers started together: the refusal of the second omitted the holder's pid 17 times in
/// 20 (the holder emptied the lock file before writing its pid). It always names it now.
#[test]
fn the_second_writer_always_learns_the_holders_pid() {
    use agentlog::log::{Error, Log, Options};
    for round in 0..40 {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("log");
        // A lock taken and released before must not linger (in a child that another test of
        // this process forks meanwhile): the writer unlocks explicitly.
        Log::open(&dir, Options::default())
            .unwrap()
            .close()
            .unwrap();
        let barrier = std::sync::Barrier::new(2);
        let results: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(|| {
                        barrier.wait();
                        let r = Log::open(&dir, Options::default());
                        // Hold the lock a moment, so the other open meets it.
                        std::thread::sleep(std::time::Duration::from_millis(20));
                        r.map(|_| ())
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let refused: Vec<_> = results.iter().filter_map(|r| r.as_ref().err()).collect();
        assert_eq!(refused.len(), 1, "round {round}: {results:?}");
        match refused[0] {
            Error::Locked { holder, .. } => {
                let h = holder.as_deref().unwrap_or("");
                assert!(
                    h.starts_with("pid ") && h[4..].parse::<u32>().is_ok(),
                    "round {round}: holder {holder:?}"
                );
                assert!(refused[0].to_string().contains(h), "{}", refused[0]);
            }
            other => panic!("round {round}: {other}"),
        }
    }
}

/// The peak resident memory (VmHWM, bytes) of the command, read while it runs.
fn peak_memory(cli: &Cli, args: &[&str]) -> (Run, u64) {
    let child = cli.command(args).spawn().unwrap();
    let pid = child.id();
    let mut peak = 0u64;
    let done = std::sync::atomic::AtomicBool::new(false);
    let out = std::thread::scope(|s| {
        let poll = s.spawn(|| {
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                if let Ok(st) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
                    for line in st.lines() {
                        if let Some(v) = line.strip_prefix("VmHWM:") {
                            let kb: u64 =
                                v.trim().trim_end_matches(" kB").trim().parse().unwrap_or(0);
                            peak = peak.max(kb * 1024);
                        }
                    }
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            peak
        });
        let out = child.wait_with_output().unwrap();
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        (out, poll.join().unwrap())
    });
    let (out, peak) = out;
    (cli_common::finish(out), peak)
}

/// `verify` read each sealed segment's whole preallocated file (its given-back tail keeps the
/// file's length): 185 segments of 1 KiB took 2.7 s and 778 MB. It reads only the data now
/// (holes are skipped), and maps sealed segments instead of copying them.
#[test]
fn verify_does_not_read_the_holes_of_sealed_segments() {
    let cli = cli_with_segments("1KiB");
    // Events of 600 bytes: one record per 1 KiB segment (format version 2's archives of 300-byte
    // events are small enough for two).
    session(&cli, 200, 600);
    assert!(segments(&cli.session_dir("s")).len() >= 190);
    let (run, peak) = peak_memory(&cli, &["verify", "s"]);
    run.ok();
    // 200 segments of 4 MiB each: reading them whole takes 800 MB.
    assert!(peak < 200 << 20, "verify peaked at {} MiB", peak >> 20);
}

/// `archive` of a session whose middle segment is gone compressed the segments around the gap
/// (dropping their indexes, the evidence `recover` reads) and marked it archived; and the
/// damage was named as the segment before the gap ending early. `archive` now refuses a
/// damaged log, changing nothing, and every command names the missing segment.
#[test]
fn archive_refuses_a_session_with_a_missing_segment() {
    let cli = cli_with_segments("64KiB");
    let dir = session(&cli, 600, 300);
    let segs = segments(&dir);
    assert!(segs.len() >= 3, "{segs:?}");
    std::fs::remove_file(&segs[1]).unwrap();
    let before: Vec<PathBuf> = {
        let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        v.sort();
        v
    };
    let run = cli.run(&["archive", "s"]);
    let said = run.fails(1).to_string();
    let missing = segs[1].file_name().unwrap().to_str().unwrap().to_string();
    assert!(
        said.contains(&missing) && said.contains("missing"),
        "{said}"
    );
    let mut after: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    after.sort();
    assert_eq!(before, after, "archive changed files");
    assert!(segments(&dir).iter().all(|s| !testkit::is_cold(s)));
    let ls = cli.run(&["ls"]);
    assert!(ls.ok().contains("active"), "{}", ls.stdout);
    let verify = cli.run(&["verify", "s"]);
    verify.fails(1);
    assert!(verify.stdout.contains(&missing), "{}", verify.stdout);
}

/// The bytes of each of `files`.
fn contents(files: &[PathBuf]) -> Vec<Vec<u8>> {
    files.iter().map(|f| std::fs::read(f).unwrap()).collect()
}

/// Flips one bit in the payload of the second record of `seg` (its records are `size`-byte
/// events: the byte 200 is inside the second one's text for the sizes used here).
fn flip_in_second_record(seg: &Path) {
    let mut bytes = std::fs::read(seg).unwrap();
    bytes[200] ^= 0x40;
    std::fs::write(seg, bytes).unwrap();
}

/// A bit flipped inside a record of a sealed segment of a cleanly closed session: `recover`
/// (without `--salvage`) said "nothing was cut" and exited 0, because a writer's open after a
/// clean close reads only headers and index tails; every full read kept failing. It now checks
/// every record first and refuses, naming the damage and `--salvage`, changing nothing.
#[test]
fn recover_refuses_damage_inside_a_sealed_segment() {
    let cli = cli_with_segments("4KiB");
    let dir = session(&cli, 60, 160);
    let segs = segments(&dir);
    assert!(segs.len() >= 3, "{segs:?}");
    flip_in_second_record(&segs[1]);
    let before = contents(&segs);
    let seg_name = segs[1].file_name().unwrap().to_str().unwrap();
    let run = cli.run(&["recover", "s"]);
    fails_naming(&run, &[seg_name, "offset", "--salvage"]);
    let after = contents(&segs);
    assert!(before == after, "recover changed a segment");
    assert!(!dir.join("damaged").exists());
    // The salvage it names keeps the events before the damage, and the session is sound.
    cli.run(&["recover", "s", "--salvage"]).ok();
    cli.run(&["verify", "s"]).ok();
}

/// The same damage, then `archive`: it exited 1 but had already marked the session archived
/// (appends refused) and compressed the segments before the damage, dropping their indexes.
/// It now refuses before changing anything.
#[test]
fn archive_refuses_damage_inside_a_sealed_segment_and_changes_nothing() {
    let cli = cli_with_segments("4KiB");
    let dir = session(&cli, 60, 160);
    let segs = segments(&dir);
    assert!(segs.len() >= 3, "{segs:?}");
    flip_in_second_record(&segs[1]);
    let seg_name = segs[1].file_name().unwrap().to_str().unwrap();
    let meta = std::fs::read(dir.join("session.json")).unwrap();
    let before = contents(&segs);
    fails_naming(&cli.run(&["archive", "s"]), &[seg_name, "offset"]);
    assert_eq!(std::fs::read(dir.join("session.json")).unwrap(), meta);
    let after = contents(&segs);
    assert!(before == after, "archive changed a segment");
    for s in &segs {
        assert!(
            s.with_extension("idx").exists(),
            "{} lost its index",
            s.display()
        );
    }
    cli.run_with(&["append", "s"], &lines(60, 1, 160)).ok();
}

/// One byte of a user's message damaged in a session whose checkpoint covers it: `derive`
/// printed a made-up system message in its place ("agentlog: the message of the event at seq 1
/// cannot be read: …") and exited 0; with `--format anthropic` the user's message became the
/// system prompt. It now fails naming the damage, as `export` and `derive --at` do.
#[test]
fn derive_names_a_damaged_message_instead_of_standing_in_for_it() {
    let cli = Cli::new();
    cli.run_with(
        &["append", "--create", "s"],
        br#"{"type":"turn/start","data":{"turn":1}}
{"type":"user/message","data":{"role":"user","content":[{"type":"text","text":"please delete nothing"}]}}
{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}
"#,
    )
    .ok();
    let dir = cli.session_dir("s");
    assert!(dir.join("CHECKPOINT").exists());
    let seg = &segments(&dir)[0];
    let mut bytes = std::fs::read(seg).unwrap();
    let at = bytes.windows(6).position(|w| w == b"please").unwrap();
    bytes[at] = b'P';
    std::fs::write(seg, bytes).unwrap();
    let name = seg.file_name().unwrap().to_str().unwrap();
    for format in ["neutral", "openai", "anthropic"] {
        let run = cli.run(&["derive", "s", "--format", format]);
        fails_naming(&run, &[name, "offset", "seq 1"]);
        assert!(run.stdout.is_empty(), "{format}: {}", run.stdout);
    }
}
