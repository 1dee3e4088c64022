//! The writer's exclusive lock on `<log>/LOCK`.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
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
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(|e| Error::io("open lock file", &path, e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = holder.trim();
                return Err(Error::Locked {
                    path,
                    holder: (!holder.is_empty()).then(|| holder.to_string()),
                });
            }
            Err(TryLockError::Error(e)) => return Err(Error::io("lock", &path, e)),
        }
        let note = format!("pid {}", std::process::id());
        let written = file
            .set_len(0)
            .and_then(|()| file.seek(SeekFrom::Start(0)))
            .and_then(|_| file.write_all(note.as_bytes()));
        written.map_err(|e| Error::io("write lock file", &path, e))?;
        Ok(WriterLock { _file: file })
    }
}

/// The writer's lock on a log directory, taken without opening the log: while it is held no
/// writer can open the log (tools use it to change a log's directory safely). Released on drop.
#[derive(Debug)]
pub struct DirLock {
    _lock: WriterLock,
}

/// Takes the writer's lock of the log in `dir` without opening the log; fails with
/// [`Error::Locked`] while a writer has it open.
pub fn lock_dir(dir: &Path) -> Result<DirLock> {
    Ok(DirLock {
        _lock: WriterLock::acquire(dir)?,
    })
}
