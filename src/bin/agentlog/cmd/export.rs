//! `agentlog export SESSION [--header] [-o FILE]`: canonical JSONL.

use std::fs::OpenOptions;
use std::io::BufWriter;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, Result};

use agentlog::session::HeaderLine;

use crate::progress::Progress;
use crate::target::Ctx;

/// Write a session as canonical JSONL
///
/// The canonical JSONL of docs/events.md §4, to stdout or a file. A canonical file imported and
/// exported again is the same, byte for byte (with --header when it started with a session header).
/// With -o the file is written atomically: to a temporary file beside it, then renamed, so a
/// failure leaves nothing half-written.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The session: an id in the store, or a session directory
    session: String,
    /// Write the session header line first
    #[arg(long)]
    header: bool,
    /// Write to FILE (created with mode 0600, replaced atomically) instead of stdout ("-":
    /// stdout)
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Write the source file an imported session came from, byte for byte (codex or
    /// claude-code: the format it was imported from)
    #[arg(
        long,
        value_name = "codex|claude-code",
        value_parser = ["codex", "claude-code"],
        conflicts_with = "header"
    )]
    to: Option<String>,
}

pub fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    let target = ctx.resolve(&args.session)?;
    let reader = target.reader()?;
    if let Some(to) = &args.to {
        let want = agentlog::import::Format::from_name(to)
            .ok_or_else(|| anyhow!("--to {to}: expected codex or claude-code"))?;
        match agentlog::import::source_format(reader.meta()) {
            Some(f) if f == want => {}
            Some(f) => {
                return Err(anyhow!(
                    "session {} was imported from {}, not {to}",
                    args.session,
                    f.as_str()
                ))
            }
            None => {
                return Err(anyhow!(
                    "session {} was not imported from a Codex or Claude Code file",
                    args.session
                ))
            }
        }
        let output = args.output.as_ref().filter(|p| p.as_os_str() != "-");
        match output {
            None => {
                let mut out = BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
                agentlog::import::export_source(&reader, &mut out).map_err(|e| target.error(e))?;
            }
            Some(path) => write_atomically(path, |out| {
                agentlog::import::export_source(&reader, out)
                    .map(|_| ())
                    .map_err(|e| target.error(e))
            })?,
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut progress = Progress::events(reader.len(), "exporting");
    // `-o -` is standard output, as `import -` reads standard input.
    let output = args.output.as_ref().filter(|p| p.as_os_str() != "-");
    if let Some(path) = output.filter(|p| p.is_dir()) {
        return Err(anyhow!(
            "cannot write to {}: it is a directory; give a file name",
            path.display()
        ));
    }
    let header = if args.header {
        HeaderLine::Include
    } else {
        HeaderLine::Omit
    };
    match output {
        None => {
            let out = BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
            reader
                .export(out, header, |n| progress.set(n))
                .map_err(|e| target.error(e))?;
        }
        Some(path) => {
            write_atomically(path, |out| {
                reader
                    .export(out, header, |n| progress.set(n))
                    .map(|_| ())
                    .map_err(|e| target.error(e))
            })?;
        }
    }
    progress.finish();
    Ok(ExitCode::SUCCESS)
}

/// True when `path` is written in place rather than replaced: it exists and is not a regular
/// file (`/dev/null`, a named pipe), or it is a link into `/proc` or `/dev` (`/dev/stdout` is
/// `/proc/self/fd/1`: with standard output redirected to a file it leads to a regular file, and
/// a rename would replace the link `/dev/stdout` itself).
pub(crate) fn in_place(path: &Path) -> bool {
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir()) {
        return true;
    }
    let special = |p: &Path| p.starts_with("/proc") || p.starts_with("/dev");
    special(path)
        || std::fs::read_link(path).is_ok_and(|target| special(&path.with_file_name(target)))
}

/// Writes `path` through a temporary file in the same directory, synced and renamed over it; the
/// temporary file is removed when anything fails (also `view`'s page). A device, a named pipe or
/// a link into `/proc` or `/dev` (`/dev/stdout`) is written in place ([`in_place`]); another
/// symbolic link is followed (its target is replaced, not the link).
pub(crate) fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<std::fs::File>) -> Result<()>,
) -> Result<()> {
    if in_place(path) {
        let regular = std::fs::metadata(path).is_ok_and(|m| m.is_file());
        let file = OpenOptions::new()
            .write(true)
            .truncate(regular)
            .open(path)
            .map_err(|e| anyhow!("cannot open {}: {e}", path.display()))?;
        let mut out = BufWriter::with_capacity(1 << 16, file);
        write(&mut out)?;
        out.into_inner()
            .map_err(|e| anyhow!("cannot write {}: {}", path.display(), e.error()))?;
        return Ok(());
    }
    let resolved;
    let path = if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        // A link to a file not there yet: its target, one link deep.
        resolved = std::fs::canonicalize(path)
            .or_else(|_| std::fs::read_link(path).map(|t| path.with_file_name(t)))
            .unwrap_or_else(|_| path.to_path_buf());
        resolved.as_path()
    } else {
        path
    };
    let name = path
        .file_name()
        .ok_or_else(|| anyhow!("cannot write {}: not a file name", path.display()))?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let prefix = format!(".{}.tmp-", name.to_string_lossy());
    remove_dead_temps(&dir, &prefix);
    let temp = dir.join(format!("{prefix}{}", std::process::id()));
    let result = (|| -> Result<()> {
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)
            .map_err(|e| anyhow!("cannot create {}: {e}", temp.display()))?;
        let mut out = BufWriter::with_capacity(1 << 16, file);
        write(&mut out)?;
        let file = out
            .into_inner()
            .map_err(|e| anyhow!("cannot write {}: {}", temp.display(), e.error()))?;
        file.sync_all()
            .map_err(|e| anyhow!("cannot sync {}: {e}", temp.display()))?;
        std::fs::rename(&temp, path).map_err(|e| {
            anyhow!(
                "cannot rename {} to {}: {e}",
                temp.display(),
                path.display()
            )
        })?;
        // The rename is durable once the directory is synced.
        if let Ok(d) = std::fs::File::open(&dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result.map_err(|e| e.context(format!("nothing was written to {}", path.display())))
}

/// Removes the temporary files `<prefix><pid>` in `dir` of exports whose process is gone (a
/// `kill -9` in the middle leaves one, as large as what it had written, holding session
/// content). Those of live processes (this one, another export running) are left alone.
fn remove_dead_temps(dir: &Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(prefix))
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        let gone = rustix::process::Pid::from_raw(pid).is_some_and(|pid| {
            rustix::process::test_kill_process(pid) == Err(rustix::io::Errno::SRCH)
        });
        if gone {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_failed_write_leaves_nothing() {
        let dir = std::env::temp_dir().join(format!("agentlog-export-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("out.jsonl");
        std::fs::write(&path, b"old\n").unwrap();
        let err = write_atomically(&path, |out| {
            out.write_all(b"half")?;
            Err(anyhow!("boom"))
        })
        .unwrap_err();
        assert!(format!("{err:#}").contains("boom"));
        assert_eq!(std::fs::read(&path).unwrap(), b"old\n");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        write_atomically(&path, |out| Ok(out.write_all(b"new\n")?)).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new\n");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A `kill -9` of `export -o FILE` left `.FILE.tmp-<pid>` behind for good (the QA pass of
    /// 2026-12-08 found four, of 3.8 to 20 MB). The next export to FILE removes those of
    /// processes that are gone, and leaves a live one's alone.
    #[test]
    fn an_export_removes_the_temporary_files_of_killed_exports() {
        let dir = std::env::temp_dir().join(format!("agentlog-export-dead-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("out.jsonl");
        // A pid no process has (above the kernel's maximum), and this live process's.
        let dead = dir.join(format!(".out.jsonl.tmp-{}", i32::MAX));
        let live = dir.join(".out.jsonl.tmp-1");
        std::fs::write(&dead, b"half of a session").unwrap();
        std::fs::write(&live, b"another export at work").unwrap();
        write_atomically(&path, |out| Ok(out.write_all(b"new\n")?)).unwrap();
        assert!(!dead.exists());
        assert!(live.exists(), "pid 1 lives");
        assert_eq!(std::fs::read(&path).unwrap(), b"new\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
