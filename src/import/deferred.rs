//! The storage of a session being built by an import: plain buffered writes, syncs deferred.
//!
//! A new session's log is written in a hidden folder of the store (`sessions/.import~…`) that
//! nobody can open until it is renamed into place. So its files need neither the memory-mapped
//! appends of [`crate::log::OsStorage`] (which allocate each segment's blocks ahead with
//! `fallocate`, write zeros ahead of the map to bring the pages into the cache, fault them in,
//! and punch the preallocated tail out again at the end) nor a sync per file and per directory
//! change. [`ImportStorage`] writes with `pwrite` of up to [`FLUSH_AT`] bytes from a buffer,
//! grows a file with `ftruncate` (a hole, no blocks allocated: the tail a closed segment keeps
//! reads as zeros, exactly as after the punch of a mapped one), and leaves every sync to
//! [`sync_built`], which makes the folder durable once before it is renamed. The files are the
//! same bytes an [`crate::log::OsStorage`] writer leaves (docs/format.md): readers and recovery
//! see ordinary segments.
//!
//! Nothing written is hidden from a reader of the log being built (the session reads its own
//! log back: the calls of closed turns, the checkpoint's tail): the writer calls
//! [`StorageFile::flush`] before it publishes records, and every sync point (a segment's
//! header, a seal, the close) flushes. A write that fails at a flush (a full disk: `ENOSPC`
//! from `pwrite`, never a `SIGBUS`, as nothing is mapped writable) keeps its bytes buffered and
//! fails every later flush and sync too, so the import fails and its hidden folder is removed.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::{Arc, Mutex};

use rustix::fs::{FallocateFlags, OFlags};

use crate::error::{Error, Result};
use crate::log::{Storage, StorageFile, Syncer};
use crate::util::lock;

/// A buffer is written out once it holds this much and a write goes past its end.
const FLUSH_AT: usize = 1 << 20;

/// A write this far past the buffer's end, over bytes the file never held, is joined to the
/// buffer with zeros in between (the 16-byte header a record writes after its payload).
const GAP: u64 = 4 << 10;

/// Plain buffered writes, syncs left to [`sync_built`]. Only for a session folder that no
/// other process can see yet.
pub(crate) struct ImportStorage;

impl Storage for ImportStorage {
    fn create(&self, path: &Path, _capacity: u64) -> io::Result<Box<dyn StorageFile>> {
        if path
            .file_name()
            .is_some_and(|n| n == crate::log::LASTSEG_TMP_FILE)
        {
            // The last-segment hint is a cache (docs/format.md, `LASTSEG`): a session built here
            // has one segment or a few, and its readers list the folder. Not written, it costs
            // no file (an inode and a rename) per session; the session's next writer writes it.
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "no last-segment hint in a session being imported",
            ));
        }
        let file = open_nofollow(path, true)?;
        file.set_len(0)?;
        Ok(Box::new(BufferedFile::new(file, 0)))
    }

    fn open(&self, path: &Path, _capacity: u64) -> io::Result<Box<dyn StorageFile>> {
        let file = open_nofollow(path, false)?;
        let len = file.metadata()?.len();
        Ok(Box::new(BufferedFile::new(file, len)))
    }

    fn sync_dir(&self, _dir: &Path) -> io::Result<()> {
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }
}

/// Opens `path` for reading and writing (mode 0600), never through a symbolic link.
fn open_nofollow(path: &Path, create: bool) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .truncate(false)
        .mode(0o600)
        .custom_flags(OFlags::NOFOLLOW.bits() as i32)
        .open(path)
}

struct BufferedFile {
    inner: Arc<Mutex<Buffer>>,
    /// The file's size (kept here too: `len` takes no lock).
    len: u64,
}

impl BufferedFile {
    fn new(file: File, len: u64) -> Self {
        BufferedFile {
            inner: Arc::new(Mutex::new(Buffer {
                file,
                len,
                written: len,
                at: 0,
                buf: Vec::new(),
            })),
            len,
        }
    }
}

/// Bytes written to a file but not yet given to the kernel: `buf` goes at `at`.
struct Buffer {
    file: File,
    /// The file's size; it only grows (`ftruncate` up).
    len: u64,
    /// Every byte from here on reads as zeros in the file: nothing was written there (or it was
    /// punched). What the buffer holds is not counted.
    written: u64,
    at: u64,
    buf: Vec<u8>,
}

impl Buffer {
    fn end(&self) -> u64 {
        self.at + self.buf.len() as u64
    }

    /// Gives the buffered bytes to the kernel. On failure they stay buffered (every later
    /// flush fails again).
    fn flush(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        self.file.write_all_at(&self.buf, self.at)?;
        self.written = self.written.max(self.end());
        self.buf.clear();
        Ok(())
    }

    fn write(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
        let end = offset
            .checked_add(data.len() as u64)
            .filter(|&e| e <= self.len)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "write of {} bytes at offset {offset} outside the file ({} bytes)",
                        data.len(),
                        self.len
                    ),
                )
            })?;
        if data.is_empty() {
            return Ok(());
        }
        if self.buf.is_empty() {
            self.at = offset;
            self.buf.extend_from_slice(data);
            return Ok(());
        }
        let buf_end = self.end();
        if offset >= self.at && end <= buf_end {
            // Inside the buffer: a record's header after its payload.
            let from = (offset - self.at) as usize;
            self.buf[from..from + data.len()].copy_from_slice(data);
            return Ok(());
        }
        if end <= self.at {
            // Before the buffer, not touching it: straight to the file.
            self.file.write_all_at(data, offset)?;
            self.written = self.written.max(end);
            return Ok(());
        }
        let joins = offset >= self.at
            && offset <= buf_end.saturating_add(GAP)
            && (offset <= buf_end || buf_end >= self.written);
        if joins && self.buf.len() < FLUSH_AT {
            // From inside the buffer on past its end, or a little past it over zeros.
            let from = (offset - self.at) as usize;
            let to = from + data.len();
            if self.buf.len() < to {
                self.buf.resize(to, 0);
            }
            self.buf[from..to].copy_from_slice(data);
            return Ok(());
        }
        self.flush()?;
        self.at = offset;
        self.buf.extend_from_slice(data);
        Ok(())
    }

    fn grow_to(&mut self, len: u64) -> io::Result<()> {
        if len > self.len {
            self.file.set_len(len)?;
            self.len = len;
        }
        Ok(())
    }

    fn punch(&mut self, offset: u64, len: u64) -> io::Result<()> {
        self.flush()?;
        let end = offset.saturating_add(len).min(self.len);
        // Past `written` the file holds zeros already (holes).
        let end = end.min(self.written);
        if end <= offset {
            return Ok(());
        }
        match rustix::fs::fallocate(
            &self.file,
            FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE,
            offset,
            end - offset,
        ) {
            Ok(()) => {}
            Err(_) => {
                // No hole punching here: zeros written.
                let zeros = vec![0u8; (end - offset).min(1 << 16) as usize];
                let mut at = offset;
                while at < end {
                    let n = ((end - at) as usize).min(zeros.len());
                    self.file.write_all_at(&zeros[..n], at)?;
                    at += n as u64;
                }
            }
        }
        if end >= self.written {
            self.written = offset;
        }
        Ok(())
    }
}

impl StorageFile for BufferedFile {
    fn len(&self) -> u64 {
        self.len
    }

    /// Grows the file with a hole: nothing is mapped writable, so a block that cannot be
    /// allocated later is an `ENOSPC` from `pwrite`, never a `SIGBUS`.
    fn reserve(&mut self, offset: u64, len: u64) -> io::Result<()> {
        let end = offset.checked_add(len).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "range past the largest offset")
        })?;
        lock(&self.inner).grow_to(end)?;
        self.len = self.len.max(end);
        Ok(())
    }

    fn is_reserved(&self, offset: u64, len: u64) -> bool {
        offset.checked_add(len).is_some_and(|end| end <= self.len)
    }

    fn write_at(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
        lock(&self.inner).write(offset, data)
    }

    fn punch(&mut self, offset: u64, len: u64) -> io::Result<()> {
        lock(&self.inner).punch(offset, len)
    }

    fn syncer(&self) -> Arc<dyn Syncer> {
        Arc::new(Flusher(Arc::clone(&self.inner)))
    }

    fn flush(&mut self) -> io::Result<()> {
        lock(&self.inner).flush()
    }

    fn release_writes(&mut self) {
        // An error stays: the sync after this (a seal, the close) reports it.
        let _ = lock(&self.inner).flush();
    }
}

impl Drop for BufferedFile {
    fn drop(&mut self) {
        // Every file of the log is synced (flushed) before it is dropped; this is for the ones
        // that are not (a hint written without a sync).
        let _ = lock(&self.inner).flush();
    }
}

/// The "sync" of a file of [`ImportStorage`]: its buffered bytes given to the kernel (the
/// fdatasync is [`sync_built`]'s).
struct Flusher(Arc<Mutex<Buffer>>);

impl Syncer for Flusher {
    fn sync_data(&self) -> io::Result<()> {
        lock(&self.0).flush()
    }
}

/// Makes a session folder built with [`ImportStorage`] (and closed) durable: every file of the
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes in the writer's order (a record's payload, then its header before it; index
    /// entries; a header rewritten at 0; a punched tail; a later record past a gap), with flushes
    /// in between and buffers over [`FLUSH_AT`]: the file holds exactly what a plain model of
    /// the writes holds, and its size is the reserved size.
    #[test]
    fn the_file_holds_exactly_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut f = ImportStorage.create(&path, 64 << 20).unwrap();
        let mut model = vec![0u8; 0];
        let write = |f: &mut Box<dyn StorageFile>, model: &mut Vec<u8>, at: u64, d: &[u8]| {
            f.write_at(at, d).unwrap();
            model[at as usize..at as usize + d.len()].copy_from_slice(d);
        };
        f.extend_to(4 << 20).unwrap();
        model.resize(4 << 20, 0);
        write(&mut f, &mut model, 0, &[9u8; 64]);
        f.syncer().sync_data().unwrap();
        let mut at = 64u64;
        for i in 0..400u64 {
            let len = 100 + (i * 7919) % 9000;
            let payload: Vec<u8> = (0..len).map(|k| (k + i) as u8 | 1).collect();
            write(&mut f, &mut model, at + 16, &payload);
            write(&mut f, &mut model, at, &[(i as u8) | 0x80; 16]);
            at += 16 + len.div_ceil(16) * 16;
            if i % 97 == 0 {
                f.flush().unwrap();
            }
        }
        // A write far past the buffer (not joined), then back before it.
        write(&mut f, &mut model, 3 << 20, b"far");
        write(&mut f, &mut model, at, b"back");
        write(&mut f, &mut model, 0, &[5u8; 64]);
        f.punch(at + 4, (3 << 20) - at - 4).unwrap();
        model[(at + 4) as usize..3 << 20].fill(0);
        // Refused outside the file.
        assert!(f.write_at((4 << 20) - 1, b"xy").is_err());
        f.release_writes();
        drop(f);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), model.len());
        assert!(bytes == model, "the file differs from the writes");
    }

    /// What a flush gave the kernel is visible to a reader of the file at once; a sync flushes.
    #[test]
    fn a_flush_makes_the_writes_visible() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut f = ImportStorage.create(&path, 1 << 20).unwrap();
        f.extend_to(1 << 16).unwrap();
        f.write_at(100, b"hello").unwrap();
        f.flush().unwrap();
        assert_eq!(&std::fs::read(&path).unwrap()[100..105], b"hello");
        f.write_at(105, b" world").unwrap();
        f.syncer().sync_data().unwrap();
        assert_eq!(&std::fs::read(&path).unwrap()[100..111], b"hello world");
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 1 << 16);
    }

    /// The hint is not written in a session being imported.
    #[test]
    fn no_hint_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(crate::log::LASTSEG_TMP_FILE);
        assert!(ImportStorage.create(&path, 64).is_err());
        assert!(!path.exists());
    }
}
