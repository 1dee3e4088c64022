//! Opening a reader by reading its last record with `pread` (issue 14: open + read the last
//! event as cheaply as a JSONL tail).
//!
//! [`LogReader::open`](super::LogReader::open) tries this first: the `LASTSEG` hint names the
//! last segment; its header is read (one `pread`), then, with the tail a clean close leaves in
//! the hint, the last record and the 16 bytes after it (one `pread`); without it, its index's
//! header and the entries at its end (one `pread`, two when the index is large) and the last
//! record (one `pread`). They are read into memory, and the record is checked as a map read checks it (checksum, seq, the end
//! the index names). No file is mapped, no directory listed, no other segment touched: the
//! reader keeps that record (an owned, 16-byte aligned copy) and maps a segment only when a
//! read needs any other record.
//!
//! A fast path, never a second truth: it answers only when its answer is the one the mapping
//! path would give, and otherwise returns `None` and the caller opens the log as before
//! (which names any damage as before). It gives up on a missing or unsound hint, a cold
//! (compressed) or sealed segment (a sealed one has a successor), a missing or mismatched index,
//! an index whose last entries are not where the header says, a last record that does not check
//! or does not end where the index says, and a segment after the last one (a writer that kept no
//! hint rolled since).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use rkyv::util::AlignedVec;

use super::cold;
use super::format::{
    self, IndexHeader, IndexState, SegmentHeader, HEADER_SIZE, INDEX_ENTRY_SIZE, RECORD_HEADER_SIZE,
};
use super::hint::{self, HintTail};
use super::segment::{check_record, RecordCheck};

/// The bytes of an index read at once: its header and the first entries (1,008 of them), the
/// whole index of a segment of up to about a thousand records.
const INDEX_HEAD: usize = 4096;
/// Entries read at once past the ones the header names, while a writer has the segment open
/// (its header's count lags behind the entries it has written since its last sync).
const ENTRY_CHUNK: usize = 1024;
/// Chunks of entries read before giving up (the mapping path then counts them).
const MAX_CHUNKS: usize = 4;
/// A record read with one `pread` when the index does not say where it ends (an open segment):
/// larger ones take a second.
const RECORD_GUESS: usize = 4096;

/// The last record of a log, read with `pread`: an owned copy, 16-byte aligned like a map.
#[derive(Debug)]
pub(crate) struct TailRecord {
    pub seq: u64,
    /// The record: its 16-byte header, then its payload (at offset 16: aligned).
    bytes: AlignedVec,
    payload_len: usize,
}

impl TailRecord {
    /// The record's payload.
    pub fn payload(&self) -> &[u8] {
        &self.bytes[RECORD_HEADER_SIZE..RECORD_HEADER_SIZE + self.payload_len]
    }
}

/// What the fast path found: the last segment and the log's last record.
#[derive(Debug)]
pub(crate) struct Tail {
    pub header: SegmentHeader,
    /// Records in the last segment.
    pub count: u64,
    /// The last record, when the segment has one.
    pub last: Option<TailRecord>,
}

/// Reads exactly `buf.len()` bytes at `offset` (fewer only at the end of the file): the count.
fn pread(file: &File, buf: &mut [u8], offset: u64) -> Option<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    Some(got)
}

/// Entry `i` of an index, from `bytes`, which hold the index from byte `from`: `Some(0)` for
/// an entry past the end of the file (`eof`: `bytes` end where the file does), as the map path
/// reads it; `None` when `bytes` do not reach it.
fn entry(bytes: &[u8], from: u64, i: u64, eof: bool) -> Option<u32> {
    let at = format::index_entry_offset(i).checked_sub(from)?;
    let at = usize::try_from(at).ok()?;
    match bytes.get(at..at + INDEX_ENTRY_SIZE) {
        Some(b) => Some(format::u32_at(b, 0)),
        None if eof && at >= bytes.len() => Some(0),
        None => None,
    }
}

/// The log in `dir` opened from its hint with `pread`s, or `None`: see the module documentation.
pub(crate) fn read_tail(dir: &Path) -> Option<Tail> {
    let file = hint::read_hint_file(dir)?;
    let hint = file.hint;
    let base = hint.last_base;
    let mut path = PathBuf::from(dir);
    path.push(format::segment_file_name(base));
    if let Some(tail) = from_copy(file, &mut path) {
        return Some(tail);
    }
    path.set_file_name(format::segment_file_name(base));
    let seg = File::open(&path).ok()?;
    // The segment's header, always: it says the format version (a segment of another version
    // is refused by the map path, never read) and whether the segment is compressed.
    let mut head = [0u8; HEADER_SIZE];
    if pread(&seg, &mut head, 0)? != HEADER_SIZE || cold::is_cold(&head) {
        return None;
    }
    let header = SegmentHeader::decode(&head).ok()?;
    if header.base_seq != base || header.log_id != hint.log_id {
        return None;
    }
    if let Some(t) = hint.tail {
        if let Some(tail) = from_hint_tail(&seg, header, t, &mut path) {
            return Some(tail);
        }
        path.set_file_name(format::segment_file_name(base));
    }
    path.set_extension("idx");
    let idx = File::open(&path).ok()?;
    let mut ibuf = vec![0u8; INDEX_HEAD];
    let got = pread(&idx, &mut ibuf, 0)?;
    ibuf.truncate(got);
    let ih = IndexHeader::decode(ibuf.get(..HEADER_SIZE)?).ok()?;
    if ih.base_seq != base || ih.log_id != header.log_id {
        return None;
    }
    let mut eof = got < INDEX_HEAD;
    let mut from = 0u64;
    let count = match ih.state {
        // A sealed segment has a successor: the mapping path walks to it.
        IndexState::Sealed => return None,
        IndexState::Closed => {
            // Entries count - 1 (the last record's) and count (none: zero or past the end).
            let first = ih.count.saturating_sub(1);
            if entry(&ibuf, from, first + 1, eof).is_none() {
                from = format::index_entry_offset(first);
                ibuf.resize(2 * INDEX_ENTRY_SIZE, 0);
                let got = pread(&idx, &mut ibuf, from)?;
                ibuf.truncate(got);
                eof = got < 2 * INDEX_ENTRY_SIZE;
            }
            // (An entry past the end of the file reads as zero: the map path counts a closed
            // index only when the file holds its entries.)
            if ih.count > 0 && entry(&ibuf, from, first, eof)? == 0 {
                return None;
            }
            if ih.count == 0 && ih.end != HEADER_SIZE as u64 {
                // Records the header does not count: the map path scans for them.
                return None;
            }
            if entry(&ibuf, from, ih.count, eof)? != 0 {
                return None;
            }
            ih.count
        }
        IndexState::Open => {
            // The entries the writer wrote since the header's count: the first zero one ends
            // them (the map path finds the same one by a binary search).
            let mut i = ih.count.saturating_sub(1);
            let mut chunks = 0;
            loop {
                match entry(&ibuf, from, i, eof) {
                    Some(0) => break,
                    Some(_) => i += 1,
                    None => {
                        chunks += 1;
                        if chunks > MAX_CHUNKS {
                            return None;
                        }
                        // From the entry before (the last record's, when this chunk ends them).
                        from = format::index_entry_offset(i.saturating_sub(1));
                        ibuf.resize(ENTRY_CHUNK * INDEX_ENTRY_SIZE, 0);
                        let got = pread(&idx, &mut ibuf, from)?;
                        ibuf.truncate(got);
                        eof = got < ENTRY_CHUNK * INDEX_ENTRY_SIZE;
                    }
                }
            }
            if i < ih.count {
                // The header names a record whose entry is zero: damage the map path reports.
                return None;
            }
            i
        }
    };
    drop(idx);
    let last = match count.checked_sub(1) {
        None => None,
        Some(k) => {
            let offset = u64::from(entry(&ibuf, from, k, false)?);
            let record = read_record(&seg, &header, offset, k, ih)?;
            // The segment after this one must not exist: a writer that kept no hint rolled.
            path.set_file_name(format::segment_file_name(base + count));
            if path.symlink_metadata().is_ok() {
                return None;
            }
            Some(record)
        }
    };
    Some(Tail {
        header,
        count,
        last,
    })
}

/// The last record from the copy a clean close wrote in the hint, without reading the segment
/// (`path` names it): the copied header must decode (its own checksum, this build's format
/// version, not compressed) and match the hint (log id, base seq, schema, capacity), the copied
/// record must check (its checksum, seeded by the log id and base seq, its seq
/// `base + count - 1`) and end where the tail says, the segment file must be the one the copy
/// was taken from, unchanged (its inode, size and times: `hint::FileIdentity`), and the segment
/// after it must not exist. What follows the record in the segment is not read: a writer that opens the
/// log drops the copy, durably, before it changes anything (`hint::drop_tail_durably`).
fn from_copy(file: hint::HintFile, path: &mut PathBuf) -> Option<Tail> {
    let t = file.hint.tail?;
    let copy = file.copy()?;
    if cold::is_cold(copy.header) {
        return None;
    }
    let header = SegmentHeader::decode(copy.header).ok()?;
    if header.base_seq != file.hint.last_base
        || header.log_id != file.hint.log_id
        || !tail_fits(&header, t)
        || t.last_offset < HEADER_SIZE as u32
    {
        return None;
    }
    // The segment is the file the copy was taken from, unchanged since (a symlink never is).
    if hint::FileIdentity::of(path)? != copy.identity {
        return None;
    }
    let bytes = file.into_record_bytes()?;
    last_record(header, u64::from(t.count), bytes, path)
}

/// True when the tail agrees with the segment header's schema and capacity.
fn tail_fits(header: &SegmentHeader, t: HintTail) -> bool {
    u64::from(t.capacity) == header.capacity && t.payload_schema == header.payload_schema
}

/// The tail whose last record (seq `base + count - 1`) is exactly `bytes` (read from the
/// segment or from the hint's copy), when that record checks, ends where `bytes` do, and no
/// segment follows (`path` names the segment; it is changed to name the next one).
fn last_record(
    header: SegmentHeader,
    count: u64,
    bytes: AlignedVec<16>,
    path: &mut PathBuf,
) -> Option<Tail> {
    let seq = header.base_seq + count - 1;
    // The checksum is seeded by the log id and the base seq: a record of another log or
    // segment does not check.
    let found = check_record(&bytes, 0, seq, &RecordCheck::of(&header)).ok()?;
    if found.next != bytes.len() as u64 {
        return None;
    }
    let payload_len = found.payload.len();
    path.set_file_name(format::segment_file_name(header.base_seq + count));
    if path.symlink_metadata().is_ok() {
        return None;
    }
    Some(Tail {
        header,
        count,
        last: Some(TailRecord {
            seq,
            bytes,
            payload_len,
        }),
    })
}

/// The last record from the tail a clean close wrote in the hint (its segment's header read and
/// checked by the caller): one `pread` of the record and
/// the 16 bytes after it, which must be zero (or past the end of the file): no record follows
/// it. `None` when the claim does not check (the caller reads the index then).
fn from_hint_tail(
    seg: &File,
    header: SegmentHeader,
    t: HintTail,
    path: &mut PathBuf,
) -> Option<Tail> {
    if !tail_fits(&header, t) {
        return None;
    }
    let (offset, end) = (u64::from(t.last_offset), u64::from(t.end));
    let size = usize::try_from(end.checked_sub(offset)?).ok()?;
    if offset < HEADER_SIZE as u64 || size < RECORD_HEADER_SIZE || end > header.capacity {
        return None;
    }
    let want = size + RECORD_HEADER_SIZE;
    let mut bytes = AlignedVec::<16>::with_capacity(want);
    bytes.resize(want, 0);
    let got = pread(seg, &mut bytes, offset)?;
    if got < size || bytes[size..got].iter().any(|&b| b != 0) {
        return None;
    }
    bytes.resize(size, 0);
    last_record(header, u64::from(t.count), bytes, path)
}

/// Reads and checks record `k` of the segment at `offset`: for a closed index it must end at
/// the index's end.
fn read_record(
    seg: &File,
    header: &SegmentHeader,
    offset: u64,
    k: u64,
    ih: IndexHeader,
) -> Option<TailRecord> {
    if offset < HEADER_SIZE as u64 {
        return None;
    }
    let check = RecordCheck::of(header);
    let seq = header.base_seq + k;
    let closed = ih.state == IndexState::Closed;
    let want = if closed {
        usize::try_from(ih.end.checked_sub(offset)?).ok()?
    } else {
        RECORD_GUESS
    };
    if want < RECORD_HEADER_SIZE || want as u64 > header.capacity {
        return None;
    }
    // A closed index is believed only when nothing starts where it says the records end (an
    // index older than its segment, restored from a backup, ends early): the 16 bytes after
    // the record are read too, and must be zero or past the end of the file.
    let read = if closed {
        want + RECORD_HEADER_SIZE
    } else {
        want
    };
    let mut bytes = AlignedVec::<16>::with_capacity(read);
    bytes.resize(read, 0);
    let got = pread(seg, &mut bytes, offset)?;
    if closed {
        if got < want || bytes[want..got].iter().any(|&b| b != 0) {
            return None;
        }
        bytes.resize(want, 0);
    } else {
        bytes.resize(got, 0);
    }
    if !closed && got >= RECORD_HEADER_SIZE {
        let h = format::RecordHeader::read(&bytes[..RECORD_HEADER_SIZE]);
        let size = format::record_size(u64::from(h.len));
        if size > got as u64 && size <= check.max_payload + RECORD_HEADER_SIZE as u64 {
            let size = usize::try_from(size).ok()?;
            bytes.resize(size, 0);
            let more = pread(seg, &mut bytes[got..], offset + got as u64)?;
            bytes.resize(got + more, 0);
        }
    }
    let found = check_record(&bytes, 0, seq, &check).ok()?;
    if closed && found.next != bytes.len() as u64 {
        return None;
    }
    let payload_len = found.payload.len();
    Some(TailRecord {
        seq,
        bytes,
        payload_len,
    })
}
