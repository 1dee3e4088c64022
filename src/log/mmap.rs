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

use memmap2::{Mmap, MmapMut, MmapOptions};

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
