//! The writer's exclusive lock on `<log>/LOCK`.

use std::fs::{File, TryLockError};
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::error::{Error, Result};

/// The name of the lock file in a log directory.
pub const LOCK_FILE: &str = "LOCK";

/// Held while a writer has the log open; released when dropped (or when the process dies).
#[derive(Debug)]
pub(crate) struct WriterLock {
    _file: File,
}

impl WriterLock {
    /// Takes the lock without waiting; a second writer (in this or another process) is refused
    /// with [`Error::Locked`] naming the lock file and its holder.
    pub(crate) fn acquire(dir: &Path) -> Result<WriterLock> {
        let path = dir.join(LOCK_FILE);
        // Never through a symbolic link: its target would get "pid N" written over it.
        let file = super::io::open_nofollow(&path, true)
            .map_err(|e| Error::io("open lock file", &path, e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(Error::Locked {
                    holder: read_holder(&file),
                    path,
                });
            }
            Err(TryLockError::Error(e)) => return Err(Error::io("lock", &path, e)),
        }
        // Written in place at a fixed width (never emptied first), so a second writer that
        // reads it while this one starts finds a whole pid or, for a new file, nothing yet.
        let note = format!("pid {:<20}\n", std::process::id());
        let written = file
            .write_all_at(note.as_bytes(), 0)
            .and_then(|()| file.set_len(note.len() as u64));
        written.map_err(|e| Error::io("write lock file", &path, e))?;
        Ok(WriterLock { _file: file })
    }
}

/// Reads what the lock's holder wrote ("pid N"). A holder that has just taken the lock may not
/// have written it yet: read again for a little while before giving up.
fn read_holder(file: &File) -> Option<String> {
    for attempt in 0..50 {
        let mut buf = [0u8; 64];
        let n = file.read_at(&mut buf, 0).unwrap_or(0);
        let text = String::from_utf8_lossy(&buf[..n]);
        let holder = text.trim();
        if !holder.is_empty() {
            return Some(holder.to_string());
        }
        if attempt < 49 {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
    None
}

impl Drop for WriterLock {
    fn drop(&mut self) {
        // Released explicitly, not by closing the file: a child process forked meanwhile holds
        // a copy of the descriptor until it execs, and with it the lock.
        let _ = self._file.unlock();
    }
}

/// The writer's lock on a log directory, taken without opening the log: while it is held no
/// writer can open the log (tools use it to change a log's directory safely). Released on drop.
#[derive(Debug)]
pub(crate) struct DirLock {
    _lock: WriterLock,
}

/// Takes the writer's lock of the log in `dir` without opening the log; fails with
/// [`Error::Locked`] while a writer has it open.
pub(crate) fn lock_dir(dir: &Path) -> Result<DirLock> {
    Ok(DirLock {
        _lock: WriterLock::acquire(dir)?,
    })
}
