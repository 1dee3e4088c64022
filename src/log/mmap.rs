//! The one place that maps files into memory (the only `unsafe` of the storage engine).
//!
//! Mapping a file is `unsafe` because another process could change or shrink the file while it is
//! mapped. agentlog's contract makes that safe for its own files: exactly one writer (holding the
//! `LOCK`) changes a log, it never rewrites bytes it has published (records are append-only), it
//! grows files before it writes into the new range, and it never makes a segment or index file
//! shorter (space after the records is given back by punching a hole: the file keeps its length
//! and the tail reads as zeros). Readers only dereference published records, after checking them. A file changed by something else than agentlog is outside this contract; the
//! checksums still make such changes show up as errors, not as wrong events.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::mem::ManuallyDrop;
use std::sync::{Mutex, OnceLock};

use memmap2::{Advice, Mmap, MmapMut, MmapOptions, MmapRaw};

fn map_len(len: u64) -> io::Result<usize> {
    usize::try_from(len).ok().filter(|&l| l > 0).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("cannot map {len} bytes"),
        )
    })
}

/// Maps `len` bytes of `file` read-only. `len` may exceed the file's current size: bytes beyond the
/// end must not be touched until the writer has grown the file over them.
pub(crate) fn map_read(file: &File, len: u64) -> io::Result<Mmap> {
    let len = map_len(len)?;
    // SAFETY: see the module documentation: only published, immutable bytes are read.
    unsafe { MmapOptions::new().len(len).map(file) }
}

/// Maps `len` bytes of `file` for writing (shared with the page cache, so readers in this and
/// other processes see the writes). Used only by the one writer that holds the log's lock.
pub(crate) fn map_write(file: &File, len: u64) -> io::Result<MmapMut> {
    let len = map_len(len)?;
    // SAFETY: the caller holds the log's exclusive lock: no other writer changes this file, and
    // writes go only to the allocated range (checked by the caller before each write).
    unsafe { MmapOptions::new().len(len).map_mut(file) }
}

/// A private, read-only copy of `bytes` in anonymous memory (page-aligned, like a file map): for
/// checking a file that its writer may shrink meanwhile, which a file map cannot survive (a page
/// beyond the end of a file is SIGBUS).
pub(crate) fn copy_to_map(bytes: &[u8]) -> io::Result<Mmap> {
    let mut map = MmapMut::map_anon(map_len(bytes.len() as u64)?)?;
    map.copy_from_slice(bytes);
    map.make_read_only()
}

/// Anonymous memory rebuilt range by range while it is read (the plain bytes of a cold
/// segment, decompressed one block at a time): the ranges are fixed when it is made, each is
/// filled at most once (the first [`get_or_fill`](Self::get_or_fill) of it writes it, straight
/// from the decompressor, no copy), and readers read a range only after its fill returned, the
/// same contract as a segment's writer and its readers (a published range never changes).
pub(crate) struct FillMap<T> {
    /// The memory (from [`POOL`] when a large enough map was there; it may be longer than
    /// `len`, and then holds bytes of an earlier map, each overwritten by its range's fill
    /// before it is read). Taken only by `drop`, which gives it to the pool.
    raw: ManuallyDrop<MmapRaw>,
    /// The bytes in use.
    len: usize,
    /// Each range (start, end), in order, disjoint, inside the map; and what its fill returned.
    ranges: Vec<(usize, usize)>,
    filled: Vec<OnceLock<T>>,
}

impl<T> std::fmt::Debug for FillMap<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FillMap")
            .field("len", &self.len)
            .field("ranges", &self.ranges.len())
            .finish()
    }
}

impl<T> FillMap<T> {
    /// Maps `len` bytes of anonymous memory starting with `prefix`, to be filled in `ranges`
    /// (sorted, disjoint, after the prefix, inside `len`; refused otherwise): a map kept from a
    /// dropped one when the pool has one of the right size (its bytes outside the prefix are
    /// an earlier map's until filled), else a new zeroed map, where only the pages written
    /// take memory.
    pub(crate) fn new(
        len: u64,
        prefix: &[u8],
        ranges: Vec<(usize, usize)>,
    ) -> io::Result<FillMap<T>> {
        let n = map_len(len)?;
        let mut at = prefix.len();
        for &(start, end) in &ranges {
            if start < at || end < start || end > n {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("fill range {start}..{end} overlaps or leaves the map ({n} bytes)"),
                ));
            }
            at = end;
        }
        if at > n {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a prefix of {at} bytes in a map of {n}"),
            ));
        }
        let raw = match pool_take(n) {
            Some(raw) => raw,
            None => MmapRaw::from(MmapMut::map_anon(n)?),
        };
        // SAFETY: the map is at least `n` bytes (taken for that length, or made of it) and no
        // other reference to it exists yet.
        unsafe {
            std::slice::from_raw_parts_mut(raw.as_mut_ptr(), prefix.len()).copy_from_slice(prefix)
        };
        let filled = ranges.iter().map(|_| OnceLock::new()).collect();
        Ok(FillMap {
            raw: ManuallyDrop::new(raw),
            len: n,
            ranges,
            filled,
        })
    }

    fn raw(&self) -> &MmapRaw {
        &self.raw
    }

    /// The whole map: a range may be read once its fill returned (before, it reads as zeros or
    /// as bytes of an earlier map, or as a fill in progress).
    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: the map lives as long as `self` and holds at least `len` bytes; the only
        // writes are the fills of ranges, each once, before any reader reads that range (see
        // the type's documentation).
        unsafe { std::slice::from_raw_parts(self.raw().as_ptr(), self.len) }
    }

    /// Tells the kernel that the bytes `start..end` will all be filled soon (a sequential
    /// read): back them with huge pages where the kernel has them (Linux transparent huge pages
    /// in `madvise` or `always` mode), so that filling them costs one page fault and one page
    /// to free per 2 MiB instead of per 4 KiB. Advice only: a failure changes nothing but speed.
    pub(crate) fn advise_sequential(&self, start: usize, end: usize) {
        let end = end.min(self.len);
        if start < end {
            let _ = self
                .raw()
                .advise_range(Advice::HugePage, start, end - start);
        }
    }

    /// True when range `k` has been filled (its fill returned).
    pub(crate) fn is_filled(&self, k: usize) -> bool {
        self.filled.get(k).is_some_and(|f| f.get().is_some())
    }

    /// Fills range `k` with `fill` unless it was filled before (by this or another thread,
    /// which this call then waits for); returns what the fill returned.
    pub(crate) fn get_or_fill(&self, k: usize, fill: impl FnOnce(&mut [u8]) -> T) -> &T {
        self.filled[k].get_or_init(|| {
            let (start, end) = self.ranges[k];
            // Bring the range's pages in with one call instead of a page fault each (Linux 5.14
            // and later; elsewhere the writes fault them in).
            let raw = self.raw();
            let _ = raw.advise_range(Advice::PopulateWrite, start, end - start);
            // SAFETY: the range is inside the map (checked in `new`), disjoint from every other
            // range, and this closure runs at most once for it (`OnceLock`): no other reference
            // to these bytes is written or read meanwhile.
            let dst =
                unsafe { std::slice::from_raw_parts_mut(raw.as_mut_ptr().add(start), end - start) };
            fill(dst)
        })
    }
}

impl<T> Drop for FillMap<T> {
    fn drop(&mut self) {
        // SAFETY: `raw` is not used again: this is the map's drop.
        pool_give(unsafe { ManuallyDrop::take(&mut self.raw) });
    }
}

/// At most this many bytes of freed [`FillMap`] memory are kept for the next maps.
const POOL_MAX_BYTES: usize = 128 << 20;
/// At most this many freed maps are kept.
const POOL_MAX_MAPS: usize = 8;

/// Memory of dropped [`FillMap`]s, newest last, for the next ones: a process that reads cold
/// segments again (another reader of the same or another archived session) fills pages it
/// already has instead of having the kernel allocate and zero new ones, and free them again at
/// the end (for a 64 MiB segment, that was about as much time as its decompression). At most
/// [`POOL_MAX_BYTES`] are kept (the oldest map is unmapped first). (`MADV_FREE` on a kept map,
/// to let the kernel take it back under memory pressure, was tried: the pages were zeroed again
/// on reuse, which is what the pool avoids.)
static POOL: Mutex<Vec<MmapRaw>> = Mutex::new(Vec::new());

/// A kept map of at least `len` bytes (and not more than twice that), if any.
fn pool_take(len: usize) -> Option<MmapRaw> {
    let mut pool = POOL.lock().ok()?;
    let k = pool
        .iter()
        .enumerate()
        .filter(|(_, m)| m.len() >= len && m.len() / 2 <= len)
        .min_by_key(|(_, m)| m.len())
        .map(|(k, _)| k)?;
    Some(pool.swap_remove(k))
}

/// Keeps the memory of a dropped map for the next one (or unmaps it, past the pool's limits).
fn pool_give(raw: MmapRaw) {
    if raw.len() > POOL_MAX_BYTES {
        return;
    }
    let Ok(mut pool) = POOL.lock() else { return };
    pool.push(raw);
    let mut total: usize = pool.iter().map(|m| m.len()).sum();
    while total > POOL_MAX_BYTES || pool.len() > POOL_MAX_MAPS {
        let oldest = pool.remove(0);
        total -= oldest.len();
    }
}
