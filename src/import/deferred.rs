//! A storage whose syncs are deferred: the log of a session being built by an import, in a
//! hidden folder of the store, is written without one fdatasync per file and per directory
//! change (a new session's log otherwise makes six); [`sync_built`] then makes the folder
//! durable once, before it is renamed into place. Until that rename nobody can open the session,
//! so nothing ever sees it half-synced; a crash before it leaves a hidden folder that the next
//! import (or `gc`) removes.

use std::io;
use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::log::{Storage, StorageFile, Syncer};

/// Wraps a storage: writes go through, syncs are left to [`sync_built`].
pub(crate) struct DeferredSync(pub(crate) Arc<dyn Storage>);

struct DeferredFile(Box<dyn StorageFile>);

struct NoSync;

impl Syncer for NoSync {
    fn sync_data(&self) -> io::Result<()> {
        Ok(())
    }
}

impl Storage for DeferredSync {
    fn create(&self, path: &Path, capacity: u64) -> io::Result<Box<dyn StorageFile>> {
        Ok(Box::new(DeferredFile(self.0.create(path, capacity)?)))
    }

    fn open(&self, path: &Path, capacity: u64) -> io::Result<Box<dyn StorageFile>> {
        Ok(Box::new(DeferredFile(self.0.open(path, capacity)?)))
    }

    fn sync_dir(&self, _dir: &Path) -> io::Result<()> {
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.0.rename(from, to)
    }
}

impl StorageFile for DeferredFile {
    fn len(&self) -> u64 {
        self.0.len()
    }

    fn reserve(&mut self, offset: u64, len: u64) -> io::Result<()> {
        self.0.reserve(offset, len)
    }

    fn extend_to(&mut self, len: u64) -> io::Result<()> {
        self.0.extend_to(len)
    }

    fn is_reserved(&self, offset: u64, len: u64) -> bool {
        self.0.is_reserved(offset, len)
    }

    fn write_at(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.0.write_at(offset, data)
    }

    fn punch(&mut self, offset: u64, len: u64) -> io::Result<()> {
        self.0.punch(offset, len)
    }

    fn syncer(&self) -> Arc<dyn Syncer> {
        Arc::new(NoSync)
    }

    fn release_writes(&mut self) {
        self.0.release_writes();
    }
}

/// Makes a session folder built with [`DeferredSync`] (and closed) durable: every file of the
/// log (`session.json` and `LOGMETA` sync themselves when written) and the folder's entries.
pub(crate) fn sync_built(dir: &Path) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io("read directory", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("read directory", dir, e))?;
        let path = entry.path();
        let is_log_file = path.extension().is_some_and(|x| x == "seg" || x == "idx");
        if is_log_file && entry.file_type().is_ok_and(|t| t.is_file()) {
            std::fs::File::open(&path)
                .and_then(|f| f.sync_data())
                .map_err(|e| Error::io("fdatasync", &path, e))?;
        }
    }
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io("sync directory", dir, e))
}
