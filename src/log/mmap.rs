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
use std::sync::OnceLock;

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
    raw: MmapRaw,
    /// Each range (start, end), in order, disjoint, inside the map; and what its fill returned.
    ranges: Vec<(usize, usize)>,
    filled: Vec<OnceLock<T>>,
}

impl<T> std::fmt::Debug for FillMap<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FillMap")
            .field("len", &self.raw.len())
            .field("ranges", &self.ranges.len())
            .finish()
    }
}

impl<T> FillMap<T> {
    /// Maps `len` bytes of zeroed anonymous memory starting with `prefix`, to be filled in
    /// `ranges` (sorted, disjoint, after the prefix, inside `len`; refused otherwise). Only the
    /// pages written take memory.
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
        let mut map = MmapMut::map_anon(n)?;
        map[..prefix.len()].copy_from_slice(prefix);
        let raw = MmapRaw::from(map);
        let filled = ranges.iter().map(|_| OnceLock::new()).collect();
        Ok(FillMap {
            raw,
            ranges,
            filled,
        })
    }

    /// The whole map: a range may be read once its fill returned (before, it reads as zeros, or
    /// as a fill in progress).
    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: the map lives as long as `self`; the only writes are the fills of ranges, each
        // once, before any reader reads that range (see the type's documentation).
        unsafe { std::slice::from_raw_parts(self.raw.as_ptr(), self.raw.len()) }
    }

    /// Tells the kernel that the bytes `start..end` will all be filled soon (a sequential
    /// read): back them with huge pages where the kernel has them (Linux transparent huge pages
    /// in `madvise` or `always` mode), so that filling them costs one page fault and one page
    /// to free per 2 MiB instead of per 4 KiB. Advice only: a failure changes nothing but speed.
    pub(crate) fn advise_sequential(&self, start: usize, end: usize) {
        let end = end.min(self.raw.len());
        if start < end {
            let _ = self.raw.advise_range(Advice::HugePage, start, end - start);
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
            let _ = self
                .raw
                .advise_range(Advice::PopulateWrite, start, end - start);
            // SAFETY: the range is inside the map (checked in `new`), disjoint from every other
            // range, and this closure runs at most once for it (`OnceLock`): no other reference
            // to these bytes is written or read meanwhile.
            let dst = unsafe {
                std::slice::from_raw_parts_mut(self.raw.as_mut_ptr().add(start), end - start)
            };
            fill(dst)
        })
    }
}
