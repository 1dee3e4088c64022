//! The I/O seam: every byte the writer puts on disk goes through [`Storage`] and [`StorageFile`].
//!
//! The default, [`OsStorage`], writes into a shared memory map of each file (no system call per
//! append), grows files with `fallocate` ahead of the writer, and syncs with `fdatasync`. Tests put
//! other implementations here to inject faults: a full disk, a failing sync, a power loss that
//! keeps only what was synced.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use memmap2::MmapMut;
use rustix::fs::{FallocateFlags, OFlags};

use super::mmap;

/// Opens files for the writer and changes directories.
///
/// Files are never opened through a symbolic link (`O_NOFOLLOW`): a link where a log file
/// should be is refused with an error, never written through.
pub trait Storage: Send + Sync + 'static {
    /// Creates `path` empty (mode 0600), or empties a leftover file of that name. Only for files
    /// that no reader can have mapped yet (a temporary file, the index of a segment not yet
    /// created): every other file only grows. The file may grow up to `capacity` bytes.
    fn create(&self, path: &Path, capacity: u64) -> io::Result<Box<dyn StorageFile>>;
    /// Opens the existing file `path` for writing. No range of it is reserved by the new handle
    /// yet (see [`StorageFile::reserve`]). The file may grow up to `capacity` bytes.
    fn open(&self, path: &Path, capacity: u64) -> io::Result<Box<dyn StorageFile>>;
    /// Makes the directory's entries (created, renamed, removed files) durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Renames a file (atomically replacing `to`).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
}

/// A file the writer appends to.
///
/// Two rules make memory-mapped writes safe on a full disk and for readers in other processes:
///
/// - **A write only touches reserved blocks.** A write through a memory map into a range whose
///   disk blocks do not exist (a hole: never allocated, or given back by [`punch`]) must
///   allocate them when the page is written back, and on a full disk the kernel can only answer
///   with `SIGBUS`, which kills the process. So [`write_at`] accepts only ranges this handle has
///   [`reserve`]d (blocks allocated with `fallocate`, where a full disk is a plain `ENOSPC`
///   error); anything else is refused (and is a debug assertion: a bug of the caller).
///   Reservations belong to the handle: a reopened file starts with none, because a hole may
///   lie anywhere in it.
/// - **A file published to readers never shrinks.** A reader in another process that maps a
///   page beyond the end of a file gets `SIGBUS`. There is no call that makes a file shorter:
///   space is given back with [`punch`] (the bytes read as zeros, the size stays). Only
///   [`Storage::create`] empties a file, and only files no reader has seen.
///
/// [`punch`]: StorageFile::punch
/// [`reserve`]: StorageFile::reserve
/// [`write_at`]: StorageFile::write_at
pub trait StorageFile: Send + Sync {
    /// The file's current size.
    fn len(&self) -> u64;
    /// True when the file is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Allocates the disk blocks of `offset..offset + len` (growing the file, with zeros, when
    /// the range passes its end; never shrinking it) and marks the range as writable by this
    /// handle. A full disk fails here, with `ENOSPC`, before anything is written.
    fn reserve(&mut self, offset: u64, len: u64) -> io::Result<()>;
    /// Grows the file to `len` bytes with the new blocks reserved ([`StorageFile::reserve`]).
    /// Never shrinks it: a smaller `len` does nothing.
    fn extend_to(&mut self, len: u64) -> io::Result<()> {
        let now = self.len();
        if len > now {
            self.reserve(now, len - now)
        } else {
            Ok(())
        }
    }
    /// True when this handle has reserved every byte of `offset..offset + len`.
    fn is_reserved(&self, offset: u64, len: u64) -> bool;
    /// Writes `data` at `offset`. The range must be reserved by this handle: a write elsewhere
    /// is refused with `InvalidInput` (and fails a debug assertion).
    fn write_at(&mut self, offset: u64, data: &[u8]) -> io::Result<()>;
    /// Makes bytes `offset..offset + len` read as zeros and gives their disk space back where the
    /// file system can (`FALLOC_FL_PUNCH_HOLE`); the file keeps its size. A range given back is
    /// no longer reserved: it must be reserved again before it is written. A file system that
    /// cannot punch holes gets zeros written (with `pwrite`, never through the map); the range
    /// then stays as reserved as it was.
    fn punch(&mut self, offset: u64, len: u64) -> io::Result<()>;
    /// A handle that makes the written data durable; usable while the file is being written.
    fn syncer(&self) -> Arc<dyn Syncer>;
    /// Makes everything written so far visible to readers of the file (a storage that buffers
    /// its writes gives them to the kernel here). The writer calls it before it publishes
    /// records; a sync implies it. Default: nothing to do (writes are visible at once).
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
    /// The writer will not write into this file again (a segment being sealed or closed): drop
    /// whatever write access is cached. With memory-mapped writes this unmaps the file, so that
    /// syncing it does not have to write-protect pages the writer still maps (a TLB shootdown
    /// per page, which interrupts the appending thread). Writes after this fail.
    fn release_writes(&mut self) {}
}

/// Makes a file's data durable (fdatasync).
pub trait Syncer: Send + Sync {
    /// Waits until everything written so far is on stable storage.
    fn sync_data(&self) -> io::Result<()>;
}

/// The operating system: memory-mapped writes, `fallocate`, `fdatasync`.
#[derive(Debug, Default, Clone, Copy)]
pub struct OsStorage;

/// Opens `path` for reading and writing, never through a symbolic link.
pub(crate) fn open_nofollow(path: &Path, create: bool) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .truncate(false)
        .mode(0o600)
        .custom_flags(OFlags::NOFOLLOW.bits() as i32)
        .open(path)
        .map_err(|e| symlink_refused(path, e))
}

/// Refuses a symbolic link where the log expects a directory (or a file) of its own: agentlog
/// never writes through one. A path that does not exist is fine.
pub fn refuse_symlink(path: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} is a symbolic link; agentlog never writes through one (remove the link)",
                path.display()
            ),
        )),
        _ => Ok(()),
    }
}

/// `ELOOP` from an `O_NOFOLLOW` open means the last component is a symbolic link: say so.
pub(crate) fn symlink_refused(path: &Path, e: io::Error) -> io::Error {
    if e.raw_os_error() == Some(libc_codes::ELOOP) {
        io::Error::new(
            e.kind(),
            format!(
                "{} is a symbolic link; agentlog never writes through one (remove the link)",
                path.display()
            ),
        )
    } else {
        e
    }
}

impl OsStorage {
    fn open_file(path: &Path, create: bool, capacity: u64) -> io::Result<Box<dyn StorageFile>> {
        let file = open_nofollow(path, create)?;
        if create {
            file.set_len(0)?;
        }
        let len = file.metadata()?.len();
        let map = mmap::map_write(&file, capacity.max(len))?;
        Ok(Box::new(OsFile::new(file, map, len)))
    }
}

impl Storage for OsStorage {
    fn create(&self, path: &Path, capacity: u64) -> io::Result<Box<dyn StorageFile>> {
        OsStorage::open_file(path, true, capacity)
    }

    fn open(&self, path: &Path, capacity: u64) -> io::Result<Box<dyn StorageFile>> {
        OsStorage::open_file(path, false, capacity)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }
}

/// How far ahead of a write [`OsFile`] brings new pages into the page cache.
const READY_AHEAD: u64 = 64 << 10;

/// The size of the zero writes that ready pages of a file synced often ([`ready_writes`]): a
/// page.
const READY_SMALL: u64 = 4 << 10;

/// Fdatasyncs since the last readying from which [`OsFile::make_ready`] readies the pages past
/// a write one at a time.
const SYNCED_OFTEN: u64 = 2;

/// Zeros for [`OsFile::make_ready`] (static: no allocation; reading it touches only the shared
/// zero page).
static ZEROS: [u8; READY_AHEAD as usize] = [0; READY_AHEAD as usize];

struct OsFile {
    file: Arc<File>,
    /// `None` once writes are released.
    map: Option<MmapMut>,
    len: u64,
    /// Bytes below this are in the page cache and mapped writable, or held data when the file
    /// was opened; bytes from here to `len` were allocated by this handle and never written.
    ready: u64,
    /// The ranges this handle reserved (blocks allocated), sorted, disjoint, not touching.
    reserved: Vec<(u64, u64)>,
    /// Fdatasyncs of the file so far (its [`FileSyncer`]s count them).
    syncs: Arc<AtomicU64>,
    /// `syncs` at the last [`OsFile::make_ready`].
    syncs_seen: u64,
}

impl fmt::Debug for OsFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OsFile")
            .field("len", &self.len)
            .field("reserved", &self.reserved)
            .finish()
    }
}

fn unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc_codes::EOPNOTSUPP) | Some(libc_codes::ENOSYS) | Some(libc_codes::EINVAL)
    )
}

mod libc_codes {
    pub const EOPNOTSUPP: i32 = 95;
    pub const ENOSYS: i32 = 38;
    pub const EINVAL: i32 = 22;
    pub const ELOOP: i32 = 40;
}

/// The zero writes (offset, length) that ready `from..to`: one per [`READY_AHEAD`] bytes, and
/// one per page ([`READY_SMALL`]) from the page that holds `pages_from` on.
///
/// A write puts its bytes in page-cache folios as large as the write (ext4 with large folios,
/// as on Linux 6.18), and an fdatasync writes whole dirty folios. Records appended into a 64 KiB
/// folio make every fdatasync write the 64 KiB; in folios of a page, an fdatasync writes the
/// 4 KiB (or 8) the records since the last one dirtied. So a file synced often
/// ([`OsFile::synced_often`]) has the pages past the write that readies them written a page at
/// a time: less time per `sync` append at 1 and 4 threads (`session_sync`; README, "Issue 14
/// targets", ³). The pages the write itself fills are dirty anyway and stay in large writes
/// (a large event costs no more writes than before), as does every page of a file that is not
/// synced often (sixteen writes per 64 KiB cost its appends about 20% per event).
fn ready_writes(from: u64, to: u64, pages_from: u64) -> impl Iterator<Item = (u64, usize)> {
    let pages_from = pages_from & !(READY_SMALL - 1);
    let mut at = from;
    std::iter::from_fn(move || {
        if at >= to {
            return None;
        }
        let n = if at >= pages_from {
            (READY_SMALL - at % READY_SMALL).min(to - at)
        } else {
            READY_AHEAD.min(to - at).min(pages_from - at)
        };
        let write = (at, n as usize);
        at += n;
        Some(write)
    })
}

/// Adds `start..end` to a sorted list of disjoint ranges, merging what touches it.
fn add_range(ranges: &mut Vec<(u64, u64)>, start: u64, end: u64) {
    if start >= end {
        return;
    }
    let first = ranges.partition_point(|&(_, e)| e < start);
    let last = ranges.partition_point(|&(s, _)| s <= end);
    if first < last {
        let s = start.min(ranges[first].0);
        let e = end.max(ranges[last - 1].1);
        ranges.drain(first..last);
        ranges.insert(first, (s, e));
    } else {
        ranges.insert(first, (start, end));
    }
}

/// Removes `start..end` from a sorted list of disjoint ranges.
fn remove_range(ranges: &mut Vec<(u64, u64)>, start: u64, end: u64) {
    if start >= end {
        return;
    }
    let mut out = Vec::with_capacity(ranges.len() + 1);
    for &(s, e) in ranges.iter() {
        if e <= start || s >= end {
            out.push((s, e));
            continue;
        }
        if s < start {
            out.push((s, start));
        }
        if e > end {
            out.push((end, e));
        }
    }
    *ranges = out;
}

/// True when `start..end` lies inside one of the ranges.
fn covers(ranges: &[(u64, u64)], start: u64, end: u64) -> bool {
    if start >= end {
        return true;
    }
    let i = ranges.partition_point(|&(_, e)| e < end);
    ranges.get(i).is_some_and(|&(s, e)| s <= start && end <= e)
}

impl OsFile {
    /// A handle on `file`, `len` bytes long, mapped by `map`; no range reserved yet.
    fn new(file: File, map: MmapMut, len: u64) -> OsFile {
        OsFile {
            file: Arc::new(file),
            map: Some(map),
            len,
            ready: len,
            reserved: Vec::new(),
            syncs: Arc::new(AtomicU64::new(0)),
            syncs_seen: 0,
        }
    }

    /// The writable bytes `offset..offset + len`, inside the file and the map.
    fn slice_mut(&mut self, offset: u64, len: usize) -> io::Result<&mut [u8]> {
        let Some(map) = self.map.as_mut() else {
            return Err(io::Error::other("the file was released for writing"));
        };
        let end = offset
            .checked_add(len as u64)
            .filter(|&e| e <= self.len && usize::try_from(e).is_ok_and(|e| e <= map.len()));
        match end {
            Some(end) => Ok(&mut map[offset as usize..end as usize]),
            None => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "write of {len} bytes at offset {offset} outside the file ({} bytes)",
                    self.len
                ),
            )),
        }
    }

    /// The end of the reserved range that holds `at`, if any.
    fn reserved_end(&self, at: u64) -> Option<u64> {
        let i = self.reserved.partition_point(|&(_, e)| e <= at);
        self.reserved
            .get(i)
            .filter(|&&(s, _)| s <= at)
            .map(|&(_, e)| e)
    }

    /// Whether the file was synced [`SYNCED_OFTEN`] times since the last time this was asked
    /// (at each [`OsFile::make_ready`]): then the pages past a write are readied one at a time
    /// ([`ready_writes`]).
    fn synced_often(&mut self) -> bool {
        let syncs = self.syncs.load(Ordering::Relaxed);
        let often = syncs.wrapping_sub(self.syncs_seen) >= SYNCED_OFTEN;
        self.syncs_seen = syncs;
        often
    }

    /// Brings the reserved, never written pages from `ready` up to `end` (and a little more) into
    /// the page cache, mapped writable, before a write there. Letting the write fault them in one
    /// at a time costs about 3.4 µs per 4 KiB page on ext4 (the read path of an unwritten
    /// extent: readahead, zeroing, then `page_mkwrite`), `MADV_POPULATE_WRITE` alone about 2.6 µs;
    /// writing zeros there with `pwrite` first (one per 64 KiB, or per page: [`ready_writes`])
    /// puts the pages in the cache through the write path, and then mapping them costs about
    /// 1.1 µs per page in all. Done a little at a time
    /// ([`READY_AHEAD`]), not for the whole preallocated range: the zeros are dirty pages, and
    /// an fdatasync writes every dirty page of the file. Only inside the reserved range that
    /// holds `ready` (its blocks exist, so nothing is allocated here). Best effort: if this
    /// fails the write faults the pages in itself.
    fn make_ready(&mut self, end: u64) {
        let Some(map_len) = self.map.as_ref().map(|m| m.len() as u64) else {
            return;
        };
        let from = self.ready;
        let Some(limit) = self.reserved_end(from) else {
            return;
        };
        let to = end
            .max(from.saturating_add(READY_AHEAD))
            .min(limit)
            .min(self.len)
            .min(map_len);
        if to <= from {
            return;
        }
        self.ready = to;
        let pages_from = if self.synced_often() { end } else { u64::MAX };
        for (at, n) in ready_writes(from, to, pages_from) {
            if self.file.write_all_at(&ZEROS[..n], at).is_err() {
                return;
            }
        }
        if let Some(map) = &self.map {
            let _ = map.advise_range(
                memmap2::Advice::PopulateWrite,
                from as usize,
                (to - from) as usize,
            );
        }
    }
}

impl StorageFile for OsFile {
    fn len(&self) -> u64 {
        self.len
    }

    fn reserve(&mut self, offset: u64, len: u64) -> io::Result<()> {
        let end = offset.checked_add(len).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "range past the largest offset")
        })?;
        if len == 0 || covers(&self.reserved, offset, end) {
            return Ok(());
        }
        // Mode 0 allocates the blocks of the holes in the range, keeps the bytes that are there,
        // and grows the file when the range passes its end.
        match rustix::fs::fallocate(&*self.file, FallocateFlags::empty(), offset, len) {
            Ok(()) => {}
            Err(e) => {
                let e = io::Error::from(e);
                if !unsupported(&e) {
                    return Err(e);
                }
                // No fallocate on this file system: write zeros where nothing is yet (past the
                // end), and rewrite the bytes that are there (holes get blocks), with pwrite:
                // a full disk is an error here, never a SIGBUS later.
                let mut buf = vec![0u8; 1 << 16];
                let mut at = offset;
                while at < end {
                    let n = (end - at).min(buf.len() as u64) as usize;
                    let chunk = &mut buf[..n];
                    chunk.fill(0);
                    if at < self.len {
                        let have = ((self.len - at) as usize).min(n);
                        self.file.read_exact_at(&mut chunk[..have], at)?;
                    }
                    self.file.write_all_at(chunk, at)?;
                    at += n as u64;
                }
            }
        }
        self.len = self.len.max(end);
        add_range(&mut self.reserved, offset, end);
        Ok(())
    }

    fn is_reserved(&self, offset: u64, len: u64) -> bool {
        offset
            .checked_add(len)
            .is_some_and(|end| covers(&self.reserved, offset, end))
    }

    fn write_at(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
        let end = offset.saturating_add(data.len() as u64);
        if !covers(&self.reserved, offset, end) {
            debug_assert!(
                false,
                "a mapped write of {} bytes at offset {offset} outside the reserved ranges {:?}",
                data.len(),
                self.reserved
            );
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "write of {} bytes at offset {offset} outside the blocks reserved for it",
                    data.len()
                ),
            ));
        }
        if end > self.ready {
            self.make_ready(end);
        }
        self.slice_mut(offset, data.len())?.copy_from_slice(data);
        Ok(())
    }

    fn punch(&mut self, offset: u64, len: u64) -> io::Result<()> {
        let end = offset.saturating_add(len).min(self.len);
        if end <= offset {
            return Ok(());
        }
        let len = end - offset;
        match rustix::fs::fallocate(
            &*self.file,
            FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE,
            offset,
            len,
        ) {
            Ok(()) => remove_range(&mut self.reserved, offset, end),
            Err(e) => {
                let e = io::Error::from(e);
                if !unsupported(&e) {
                    return Err(e);
                }
                // No hole punching: zeros written with pwrite (never through the map: a hole
                // here would be a SIGBUS on a full disk).
                let mut at = offset;
                while at < end {
                    let n = (end - at).min(READY_AHEAD) as usize;
                    self.file.write_all_at(&ZEROS[..n], at)?;
                    at += n as u64;
                }
            }
        }
        // A range zeroed up to (or past) `ready` holds nothing but zeros from `offset` on: the
        // pages there may be readied with zeros like newly reserved ones.
        if offset < self.ready && end >= self.ready {
            self.ready = offset;
        }
        Ok(())
    }

    fn syncer(&self) -> Arc<dyn Syncer> {
        Arc::new(FileSyncer {
            file: Arc::clone(&self.file),
            syncs: Arc::clone(&self.syncs),
        })
    }

    fn release_writes(&mut self) {
        self.map = None;
    }
}

struct FileSyncer {
    file: Arc<File>,
    /// The file's count of fdatasyncs ([`OsFile::make_ready`] reads it).
    syncs: Arc<AtomicU64>,
}

impl Syncer for FileSyncer {
    fn sync_data(&self) -> io::Result<()> {
        self.syncs.fetch_add(1, Ordering::Relaxed);
        self.file.sync_data()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pages are brought into the cache ahead of writes, only over ranges this handle allocated:
    /// what the file held when it was opened is never overwritten, and what it writes stays.
    #[test]
    fn readying_pages_never_overwrites_data() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut f = OsStorage.create(&path, 1 << 20).unwrap();
        f.extend_to(200 << 10).unwrap();
        f.write_at(0, b"head").unwrap();
        f.write_at(100_000, &[7u8; 5000]).unwrap(); // past what was readied: the gap is zeros
        f.write_at(10, b"early").unwrap();
        drop(f);

        let mut f = OsStorage.open(&path, 1 << 20).unwrap();
        assert_eq!(f.len(), 200 << 10);
        f.extend_to(400 << 10).unwrap();
        f.reserve(150_000, 10).unwrap();
        f.write_at(300_000, b"late").unwrap();
        f.write_at(150_000, b"middle").unwrap();
        drop(f);

        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), 400 << 10);
        assert_eq!(&bytes[..4], b"head");
        assert_eq!(&bytes[10..15], b"early");
        assert!(bytes[15..100_000].iter().all(|&b| b == 0));
        assert!(bytes[100_000..105_000].iter().all(|&b| b == 7));
        assert_eq!(&bytes[150_000..150_006], b"middle");
        assert_eq!(&bytes[300_000..300_004], b"late");
        let written = [
            (0, 4),
            (10, 15),
            (100_000, 105_000),
            (150_000, 150_006),
            (300_000, 300_004),
        ];
        for (i, &b) in bytes.iter().enumerate() {
            if !written.iter().any(|&(s, e)| (s..e).contains(&i)) {
                assert_eq!(b, 0, "byte {i}");
            }
        }
    }

    /// After a tail is zeroed (a reopened segment), writes go on into it, and what lies before
    /// the zeroed range is never touched by the readying of pages.
    #[test]
    fn writes_after_a_zeroed_tail_keep_the_data_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut f = OsStorage.create(&path, 1 << 20).unwrap();
        f.extend_to(256 << 10).unwrap();
        f.write_at(0, &[1u8; 1000]).unwrap();
        f.write_at(1000, &[2u8; 1000]).unwrap();
        drop(f);
        let mut f = OsStorage.open(&path, 1 << 20).unwrap();
        f.punch(1500, (256 << 10) - 1500).unwrap();
        f.reserve(1500, (256 << 10) - 1500).unwrap();
        f.write_at(1500, &[3u8; 100]).unwrap();
        f.write_at(200_000, &[4u8; 10]).unwrap();
        drop(f);
        let b = std::fs::read(&path).unwrap();
        assert!(b[..1000].iter().all(|&x| x == 1));
        assert!(b[1000..1500].iter().all(|&x| x == 2));
        assert!(b[1500..1600].iter().all(|&x| x == 3));
        assert!(b[1600..200_000].iter().all(|&x| x == 0));
        assert!(b[200_000..200_010].iter().all(|&x| x == 4));
    }

    /// A reopened file has no reserved range: a write anywhere is refused until the range is
    /// reserved (a hole written through the map is a SIGBUS on a full disk), and a punched
    /// range must be reserved again.
    #[test]
    fn writes_only_into_reserved_ranges() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut f = OsStorage.create(&path, 1 << 20).unwrap();
        f.extend_to(64 << 10).unwrap();
        f.write_at(0, b"x").unwrap();
        drop(f);
        let mut f = OsStorage.open(&path, 1 << 20).unwrap();
        assert!(!f.is_reserved(0, 1));
        let refused = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            f.write_at(100, b"y").is_err()
        }));
        // A debug build asserts; a release build refuses with an error.
        assert!(refused.unwrap_or(true));
        f.reserve(100, 10).unwrap();
        f.write_at(100, b"y").unwrap();
        f.punch(96, 32).unwrap();
        assert!(!f.is_reserved(100, 1));
        f.reserve(96, 32).unwrap();
        f.write_at(100, b"z").unwrap();
        // Growing never shrinks, and a range past the end grows the file.
        f.extend_to(10).unwrap();
        assert_eq!(f.len(), 64 << 10);
        f.reserve(70 << 10, 16).unwrap();
        assert_eq!(f.len(), (70 << 10) + 16);
        drop(f);
        let b = std::fs::read(&path).unwrap();
        assert_eq!(b[0], b'x');
        assert_eq!(b[100], b'z');
    }

    /// A file synced often has the pages past a write readied one at a time, one that is not
    /// in one write per 64 KiB; the file's syncer counts the fdatasyncs that decide it.
    #[test]
    fn a_file_synced_often_readies_a_page_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let file = open_nofollow(&path, true).unwrap();
        let map = mmap::map_write(&file, 1 << 20).unwrap();
        let mut f = OsFile::new(file, map, 0);
        let syncer = f.syncer();
        assert!(!f.synced_often());
        syncer.sync_data().unwrap();
        assert!(!f.synced_often(), "one fdatasync is not often");
        syncer.sync_data().unwrap();
        syncer.sync_data().unwrap();
        assert!(f.synced_often());
        assert!(!f.synced_often(), "no fdatasync since the last");
    }

    /// The zero writes cover the range exactly, in 64 KiB up to the page that holds
    /// `pages_from` and a page each from there: a large write readied when synced often takes
    /// no more writes than before, plus the pages past it.
    #[test]
    fn ready_writes_cover_the_range_in_large_then_page_writes() {
        let covers = |from: u64, to: u64, pages_from: u64| {
            let w: Vec<_> = ready_writes(from, to, pages_from).collect();
            let mut at = from;
            for &(o, n) in &w {
                assert_eq!(o, at, "contiguous");
                assert!(n > 0);
                at += n as u64;
            }
            assert_eq!(at, to.max(from), "the whole range");
            w
        };
        // Not synced often: one write per 64 KiB.
        assert_eq!(covers(0, (200 << 10) + 100, u64::MAX).len(), 4);
        // Synced often, a small record: every page past it its own write.
        let w = covers(4096 + 100, 4096 + 100 + READY_AHEAD, 4096 + 300);
        assert_eq!(w[0], (4196, 4096 - 100));
        assert!(w[1..].iter().all(|&(o, n)| o % 4096 == 0 && n <= 4096));
        assert_eq!(w.len(), 17);
        // Synced often, a 1 MiB record: 16 large writes for it, then pages.
        let w = covers(0, (1 << 20) + READY_AHEAD, 1 << 20);
        assert_eq!(
            w.iter().filter(|&&(_, n)| n as u64 == READY_AHEAD).count(),
            16
        );
        assert_eq!(w.len(), 16 + 16);
        assert!(covers(10, 10, 0).is_empty());
    }

    /// Writes between fdatasyncs, readied a page at a time once syncs come often, read back as
    /// written, with zeros between them, across the change of readying size.
    #[test]
    fn writes_between_frequent_syncs_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut f = OsStorage.create(&path, 1 << 20).unwrap();
        f.extend_to(512 << 10).unwrap();
        let syncer = f.syncer();
        let mut model = vec![0u8; 512 << 10];
        let mut at = 0usize;
        for i in 0..2000usize {
            let len = 37 + (i * 53) % 300;
            let bytes: Vec<u8> = (0..len).map(|j| (i + j) as u8 | 1).collect();
            f.write_at(at as u64, &bytes).unwrap();
            model[at..at + len].copy_from_slice(&bytes);
            at += len + i % 7;
            if i % 3 == 0 {
                syncer.sync_data().unwrap();
            }
        }
        drop(f);
        assert_eq!(std::fs::read(&path).unwrap(), model);
    }

    #[test]
    fn range_lists_merge_and_split() {
        let mut r = Vec::new();
        add_range(&mut r, 10, 20);
        add_range(&mut r, 30, 40);
        add_range(&mut r, 20, 30);
        assert_eq!(r, vec![(10, 40)]);
        remove_range(&mut r, 15, 25);
        assert_eq!(r, vec![(10, 15), (25, 40)]);
        assert!(covers(&r, 25, 40));
        assert!(!covers(&r, 14, 26));
        add_range(&mut r, 0, 5);
        assert_eq!(r, vec![(0, 5), (10, 15), (25, 40)]);
        assert!(covers(&r, 3, 3));
    }

    /// A symbolic link where a log file should be is refused, and its target is untouched.
    #[test]
    fn never_opens_through_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::write(&target, b"precious").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = OsStorage.open(&link, 1 << 20).err().unwrap();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        let e = OsStorage.create(&link, 1 << 20).err().unwrap();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read(&target).unwrap(), b"precious");
    }
}
