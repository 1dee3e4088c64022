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
