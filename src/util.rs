//! Small helpers every layer uses, defined once.

use std::path::Path;
use std::sync::{LockResult, Mutex, MutexGuard, PoisonError};

/// The wall-clock time in milliseconds since the Unix epoch (0 for a clock set before it).
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Locks a mutex, ignoring poisoning: the critical sections of the crate are panic-free, so the
/// data a panicking thread leaves behind is consistent.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    unpoisoned(m.lock())
}

/// The guard of a lock, read-write lock or condition-variable wait, ignoring poisoning (as
/// [`lock`]).
pub(crate) fn unpoisoned<G>(r: LockResult<G>) -> G {
    r.unwrap_or_else(PoisonError::into_inner)
}

/// Creates a directory (and its parents) with mode 0700: the crate's directories are private to
/// their owner (docs/design.md).
pub(crate) fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Creates `dir` (its parents as [`create_private_dir`]) with mode 0700, failing with
/// `AlreadyExists` when it is there: of processes creating the same directory at once, exactly
/// one succeeds, which makes it a claim.
pub(crate) fn create_private_dir_new(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        create_private_dir(parent)?;
    }
    std::fs::DirBuilder::new().mode(0o700).create(dir)
}

/// Renames `from` to `to`, failing with `AlreadyExists` when `to` is there (`rename(2)` alone
/// replaces an empty directory, such as one another process just made to claim the name). On a
/// file system without `RENAME_NOREPLACE` it checks first, then renames.
pub(crate) fn rename_noreplace(from: &Path, to: &Path) -> std::io::Result<()> {
    use rustix::fs::{renameat_with, RenameFlags, CWD};
    match renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        Err(e) if e == rustix::io::Errno::INVAL || e == rustix::io::Errno::NOSYS => {
            if std::fs::symlink_metadata(to).is_ok() {
                return Err(std::io::ErrorKind::AlreadyExists.into());
            }
            std::fs::rename(from, to)
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `rename(2)` replaces an empty directory: the folder a `create` just made to claim an
    /// id would be taken over by a fork or import renamed onto it.
    #[test]
    fn rename_noreplace_refuses_an_empty_directory_that_rename_would_replace() {
        let Ok(tmp) = tempfile::tempdir() else {
            panic!("a temporary directory")
        };
        let (built, claimed) = (tmp.path().join("built"), tmp.path().join("claimed"));
        for d in [&built, &claimed] {
            assert!(std::fs::create_dir(d).is_ok());
        }
        assert!(std::fs::write(built.join("session.json"), "{}").is_ok());
        let err = rename_noreplace(&built, &claimed).err().map(|e| e.kind());
        assert_eq!(err, Some(std::io::ErrorKind::AlreadyExists));
        assert!(built.join("session.json").exists() && !claimed.join("session.json").exists());
        // What a plain rename does, and this one where nothing is in the way.
        assert!(std::fs::rename(&built, &claimed).is_ok());
        assert!(rename_noreplace(&claimed, &tmp.path().join("free")).is_ok());
        assert!(tmp.path().join("free").join("session.json").exists());
    }
}
