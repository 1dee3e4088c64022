//! Reading segments: checking one record, scanning a segment, and the read-only view of a
//! segment and its index that readers and recovery share.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use memmap2::Mmap;

use super::cold::{self, BlockFault, ColdSegment};
use super::error::{CorruptionKind, Error, Result};
use super::format::{
    self, IndexHeader, RecordHeader, SegmentHeader, HEADER_SIZE, INDEX_ENTRY_SIZE,
    RECORD_HEADER_SIZE,
};
use super::mmap;

/// Why the bytes at a record position are not the expected record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fault {
    /// All 16 header bytes are zero: nothing was written here (the end of the records).
    Zero,
    /// The header names more bytes than the file holds.
    Incomplete { need: u64, have: u64 },
    /// A header no writer produces.
    BadHeader(String),
    /// A well-formed record for another seq.
    SeqMismatch { expected: u64, found: u64 },
    /// The checksum does not match.
    Checksum { expected: u32, got: u32 },
    /// A block of a cold segment that cannot be decompressed (the offset reported with it is
    /// the block's, in the cold file).
    Cold(String),
    /// The records end (the file ends, or zero bytes follow) before `claimed`, where the index
    /// header says the complete (closed, sealed) or synced records reach.
    EndsEarly { claimed: u64 },
}

impl Fault {
    pub(crate) fn into_kind(self) -> CorruptionKind {
        match self {
            Fault::Zero => CorruptionKind::Truncated("the records end early (zero bytes)".into()),
            Fault::Incomplete { need, have } => CorruptionKind::Truncated(format!(
                "the record needs {need} bytes, the file holds {have}"
            )),
            Fault::BadHeader(s) => CorruptionKind::BadRecordHeader(s),
            Fault::SeqMismatch { expected, found } => {
                CorruptionKind::SeqMismatch { expected, found }
            }
            Fault::Checksum { expected, got } => CorruptionKind::ChecksumMismatch { expected, got },
            Fault::Cold(what) => CorruptionKind::CompressedBlock(what),
            Fault::EndsEarly { claimed } => CorruptionKind::Truncated(format!(
                "the records end here, but the index says they reach byte offset {claimed}"
            )),
        }
    }
}

/// What a segment's records are checked against.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RecordCheck {
    pub base_seq: u64,
    pub seed: u32,
    pub max_payload: u64,
}

impl RecordCheck {
    /// What the records of the segment with this header are checked against.
    pub(crate) fn of(header: &SegmentHeader) -> RecordCheck {
        RecordCheck {
            base_seq: header.base_seq,
            seed: format::segment_seed(&header.log_id, header.base_seq),
            max_payload: header.capacity - (HEADER_SIZE + RECORD_HEADER_SIZE) as u64,
        }
    }
}

/// A valid record found at some offset.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Found<'a> {
    pub payload: &'a [u8],
    /// Offset just past the record (and its padding).
    pub next: u64,
}

/// Checks the record at `offset` of `data` (the readable bytes of a segment) against `seq`.
pub(crate) fn check_record<'a>(
    data: &'a [u8],
    offset: u64,
    seq: u64,
    check: &RecordCheck,
) -> std::result::Result<Found<'a>, Fault> {
    check_record_with(data, offset, seq, check, true)
}

/// [`check_record`], computing the record's checksum only when `checksum` is true: false for a
/// record of a cold segment's decompressed block, whose compressed bytes' checksum was checked
/// before it was decompressed (and whose records were checked when it was compressed). The
/// header, the length, the bounds and the seq are checked either way. Always inlined (with a
/// plain `#[inline]` the iterator still called it): interleaved runs of `--bench cold`, plain
/// rows, small mix 5.26 → 4.72 ms, current mix 10.87 → 10.39 ms.
#[inline(always)]
pub(crate) fn check_record_with<'a>(
    data: &'a [u8],
    offset: u64,
    seq: u64,
    check: &RecordCheck,
    checksum: bool,
) -> std::result::Result<Found<'a>, Fault> {
    let have = data.len() as u64;
    let header_end = offset.saturating_add(RECORD_HEADER_SIZE as u64);
    if header_end > have {
        if offset >= have || data[offset as usize..].iter().all(|&b| b == 0) {
            return Err(Fault::Zero);
        }
        return Err(Fault::Incomplete {
            need: RECORD_HEADER_SIZE as u64,
            have: have - offset,
        });
    }
    let start = offset as usize;
    let header = &data[start..start + RECORD_HEADER_SIZE];
    let h = RecordHeader::read(header);
    if h.is_zero() {
        return Err(Fault::Zero);
    }
    if !h.flags_ok() {
        return Err(Fault::BadHeader(format!("flags {:#010x}", h.flags)));
    }
    if u64::from(h.len) > check.max_payload {
        return Err(Fault::BadHeader(format!(
            "payload length {} exceeds what fits in a segment ({})",
            h.len, check.max_payload
        )));
    }
    let size = format::record_size(u64::from(h.len));
    let end = offset.saturating_add(size);
    let payload_end = header_end + u64::from(h.len);
    if payload_end > have {
        return Err(Fault::Incomplete {
            need: size,
            have: have - offset,
        });
    }
    let found_seq = check.base_seq + u64::from(h.seq_delta);
    let payload = &data[header_end as usize..payload_end as usize];
    if checksum {
        let got = format::record_crc(check.seed, header, payload);
        if got != h.crc {
            return Err(Fault::Checksum {
                expected: h.crc,
                got,
            });
        }
    }
    if found_seq != seq {
        return Err(Fault::SeqMismatch {
            expected: seq,
            found: found_seq,
        });
    }
    Ok(Found { payload, next: end })
}

/// The result of walking a segment's records from some point.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    /// Offsets of the valid records found, in order.
    pub offsets: Vec<u32>,
    /// Where the valid records end.
    pub end: u64,
    /// What stopped the walk before the end of the data, and where.
    pub stop: Option<(u64, Fault)>,
}

/// The whole of a file a writer may be appending to, read in chunks from its end back to its
/// start. A writer completes records in file order, so a record the copy holds complete was
/// mostly complete before the (later) read of the records before it: read front to back, a
/// copy often held records written after one it caught unwritten (read before the writer
/// reached it), which reads as records that end early. (Not always: [`super::verify`] reads a
/// segment being written again before it calls such a gap damage.) A file that shrinks
/// meanwhile (its writer's close gives back the preallocated tail) is read again, from its new
/// length.
fn read_backwards(file: &File) -> std::io::Result<Vec<u8>> {
    const CHUNK: u64 = 1 << 20;
    'again: for _ in 0..8 {
        let len = file.metadata()?.len();
        let mut bytes = vec![0u8; usize::try_from(len).map_err(std::io::Error::other)?];
        let mut end = len;
        while end > 0 {
            let start = end.saturating_sub(CHUNK);
            // (`start` and `end` are within `len`, which fits in usize.)
            let chunk = &mut bytes[start as usize..end as usize];
            match file.read_exact_at(chunk, start) {
                Ok(()) => end = start,
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => continue 'again,
                Err(e) => return Err(e),
            }
        }
        return Ok(bytes);
    }
    // Shrinking again and again: the copy as a plain read finds it.
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut &*file, &mut bytes)?;
    Ok(bytes)
}

/// Walks records from `offset` (holding `seq`) until the data ends or a record is not valid.
pub(crate) fn scan(data: &[u8], mut offset: u64, mut seq: u64, check: &RecordCheck) -> Scan {
    let mut out = Scan::default();
    while offset < data.len() as u64 {
        match check_record(data, offset, seq, check) {
            Ok(found) => {
                out.offsets.push(offset as u32);
                offset = found.next;
                // A base seq near u64::MAX (a damaged or hand-made header) ends the scan.
                let Some(next) = seq.checked_add(1) else {
                    break;
                };
                seq = next;
            }
            Err(fault) => {
                out.stop = Some((offset, fault));
                break;
            }
        }
    }
    out.end = offset;
    out
}

/// Looks for a valid record after `offset` whose seq is at least `min_seq`: its existence means
/// the damage at `offset` is in the middle of the data, not a torn tail. Checks every aligned
/// position of the data ranges `ranges` (holes read as zeros and hold no record), so it finds
/// records even when the damaged header's length is wrong.
pub(crate) fn valid_record_after(
    data: &[u8],
    offset: u64,
    min_seq: u64,
    check: &RecordCheck,
    ranges: &[(u64, u64)],
) -> Option<u64> {
    for &(start, end) in ranges {
        let end = end.min(data.len() as u64);
        let mut at = format::align_up(start.max(offset + 1));
        while at + RECORD_HEADER_SIZE as u64 <= end {
            let h = RecordHeader::read(&data[at as usize..]);
            if h.flags_ok() {
                let seq = check.base_seq + u64::from(h.seq_delta);
                if seq >= min_seq && check_record(data, at, seq, check).is_ok() {
                    return Some(at);
                }
            }
            at += format::RECORD_ALIGN as u64;
        }
    }
    None
}

/// The offset just past the last non-zero byte of `data[from..]`, if there is one, looking
/// only at the data ranges `ranges` (holes read as zeros).
pub(crate) fn has_nonzero(data: &[u8], from: u64, ranges: &[(u64, u64)]) -> Option<u64> {
    for &(start, end) in ranges.iter().rev() {
        let start = start.max(from);
        let end = end.min(data.len() as u64);
        if start >= end {
            continue;
        }
        let tail = data.get(start as usize..end as usize)?;
        if let Some(last) = tail.iter().rposition(|&b| b != 0) {
            return Some(start + last as u64 + 1);
        }
    }
    None
}

/// The ranges of `file` from `from` to `to` that may hold data (`SEEK_DATA` / `SEEK_HOLE`):
/// everything else is a hole and reads as zeros. A sealed segment keeps its preallocated length
/// with its tail given back, so looking only here keeps a check from reading megabytes of
/// zeros. Where the file system cannot tell, the whole range.
pub(crate) fn data_ranges(file: &File, from: u64, to: u64) -> Vec<(u64, u64)> {
    use rustix::fs::SeekFrom;
    let mut out = Vec::new();
    let mut at = from;
    while at < to {
        let start = match rustix::fs::seek(file, SeekFrom::Data(at)) {
            Ok(s) => s,
            Err(rustix::io::Errno::NXIO) => break,
            Err(_) => return vec![(at, to)],
        };
        if start >= to {
            break;
        }
        let end = match rustix::fs::seek(file, SeekFrom::Hole(start)) {
            Ok(e) => e.min(to),
            Err(_) => return vec![(at.min(start), to)],
        };
        if end <= start {
            return vec![(start, to)];
        }
        out.push((start, end));
        at = end;
    }
    out
}

/// Reads the first `HEADER_SIZE` bytes of a file (fewer if it is shorter).
pub(crate) fn read_header(file: &File, path: &Path) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; HEADER_SIZE];
    let mut got = 0;
    while got < HEADER_SIZE {
        match file.read_at(&mut buf[got..], got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io("read header of", path, e)),
        }
    }
    buf.truncate(got);
    Ok(buf)
}

/// The capacity of an index for a segment of `segment_capacity` bytes: one entry per smallest
/// possible record.
pub(crate) fn index_capacity(segment_capacity: u64) -> u64 {
    HEADER_SIZE as u64 + segment_capacity / RECORD_HEADER_SIZE as u64 * INDEX_ENTRY_SIZE as u64
}

/// A read-only view of one segment and its index, shared by readers.
#[derive(Debug)]
pub(crate) struct SegmentView {
    pub path: PathBuf,
    pub header: SegmentHeader,
    pub check: RecordCheck,
    file: File,
    /// The mapped segment file (`None` for a cold segment: its bytes are the cold view's).
    map: Option<Mmap>,
    index: Option<(File, Mmap)>,
    /// Offsets found by scanning, used instead of a damaged or missing index.
    fallback: OnceLock<Vec<u32>>,
    /// Bytes of the file that may be touched (the file never shrinks below published records).
    readable: AtomicU64,
    /// Bytes of the index file that may be touched: the map is larger than the file, and a page
    /// beyond the file's end must never be read (SIGBUS). The writer never shrinks an index
    /// file that readers may have mapped.
    index_readable: AtomicU64,
    /// A cold (compressed) segment: `map` is then its plain bytes, rebuilt in memory block by
    /// block as reads need them, and there is no index file (the cold file has its own).
    cold: Option<ColdSegment>,
}

/// Reads a segment header and checks that its base seq is the one the file name says.
fn decode_segment_header(head: &[u8], path: &Path, base_seq: u64) -> Result<SegmentHeader> {
    let header = SegmentHeader::decode(head).map_err(|h| header_error(path, h))?;
    if header.base_seq != base_seq {
        return Err(Error::corrupt(
            path,
            16,
            None,
            CorruptionKind::BadHeader(format::HeaderError::Invalid(format!(
                "base seq {} does not match the file name (base {base_seq})",
                header.base_seq
            ))),
        ));
    }
    Ok(header)
}

/// Reads and checks the header of the segment of `dir` holding `base_seq`, without mapping it.
pub(crate) fn read_segment_header(dir: &Path, base_seq: u64) -> Result<SegmentHeader> {
    let path = dir.join(format::segment_file_name(base_seq));
    let file = File::open(&path).map_err(|e| Error::io("open segment", &path, e))?;
    let head = read_header(&file, &path)?;
    if cold::is_cold(&head) {
        // A cold segment: its header and block index are checked, the blocks are not read.
        return SegmentView::open(dir, base_seq).map(|v| v.header);
    }
    decode_segment_header(&head, &path, base_seq)
}

impl SegmentView {
    /// Opens and maps a segment (and its index, when present and readable) read-only.
    pub(crate) fn open(dir: &Path, base_seq: u64) -> Result<SegmentView> {
        let path = dir.join(format::segment_file_name(base_seq));
        let file = File::open(&path).map_err(|e| Error::io("open segment", &path, e))?;
        let len = file
            .metadata()
            .map_err(|e| Error::io("stat segment", &path, e))?
            .len();
        let head = read_header(&file, &path)?;
        if cold::is_cold(&head) {
            return SegmentView::open_cold(file, path, base_seq);
        }
        let header = decode_segment_header(&head, &path, base_seq)?;
        let map = mmap::map_read(&file, header.capacity.max(len))
            .map_err(|e| Error::io("map segment", &path, e))?;
        let idx_path = dir.join(format::index_file_name(base_seq));
        let mut index_len = 0;
        let index = File::open(&idx_path).ok().and_then(|f| {
            let len = f.metadata().ok()?.len();
            let cap = index_capacity(header.capacity).max(len);
            let m = mmap::map_read(&f, cap).ok()?;
            index_len = len;
            Some((f, m))
        });
        let check = RecordCheck::of(&header);
        Ok(SegmentView {
            path,
            header,
            check,
            file,
            map: Some(map),
            index,
            fallback: OnceLock::new(),
            readable: AtomicU64::new(len),
            index_readable: AtomicU64::new(index_len),
            cold: None,
        })
    }

    fn open_cold(file: File, path: PathBuf, base_seq: u64) -> Result<SegmentView> {
        let (cold, header) = ColdSegment::open(&file, &path, base_seq)?;
        let check = RecordCheck::of(&header);
        let len = cold.plain().len() as u64;
        Ok(SegmentView {
            path,
            header,
            check,
            file,
            map: None,
            index: None,
            fallback: OnceLock::new(),
            readable: AtomicU64::new(len),
            index_readable: AtomicU64::new(0),
            cold: Some(cold),
        })
    }

    /// Tells the kernel how the maps of a plain segment and its index will be read: `random`
    /// (a lookup: a page fault reads that page, not the readahead window around it, which on
    /// a disk with a large readahead is the whole segment) or sequential (a scan). Advice only:
    /// a failure changes nothing but speed.
    pub(crate) fn advise(&self, random: bool) {
        let advice = if random {
            memmap2::Advice::Random
        } else {
            memmap2::Advice::Sequential
        };
        if let Some(m) = &self.map {
            let _ = m.advise(advice);
        }
        if let Some((_, m)) = &self.index {
            let _ = m.advise(advice);
        }
    }

    /// True for a cold (compressed) segment.
    pub(crate) fn is_cold(&self) -> bool {
        self.cold.is_some()
    }

    /// The cold segment, when this one is.
    pub(crate) fn cold(&self) -> Option<&ColdSegment> {
        self.cold.as_ref()
    }

    /// Makes the record at `offset` readable through [`data_unchecked`](Self::data_unchecked):
    /// a cold segment decompresses the block holding it (once). Returns the offset up to which
    /// the bytes are readable now (`u64::MAX` for a plain segment).
    #[inline]
    pub(crate) fn ready_at(&self, offset: u64) -> std::result::Result<u64, BlockFault> {
        match &self.cold {
            Some(c) => c.ensure_offset(offset),
            None => Ok(u64::MAX),
        }
    }

    /// The bytes that may be read now, without decompressing anything: for a cold segment,
    /// only the ranges [`ready_at`](Self::ready_at) made readable hold its records.
    #[inline]
    pub(crate) fn data_unchecked(&self) -> &[u8] {
        self.data_plain()
    }

    /// A private copy of the segment and its index as they are now, read from the files (not
    /// mapped): for checking a segment that its writer may trim meanwhile (a file map cannot
    /// survive a shrink). The index is read first, so every record it names is in the copy.
    /// The segment is read from its end back to its start ([`read_backwards`]), so that the
    /// records a writer completes in order while the copy is made are a prefix of the copy.
    pub(crate) fn snapshot(dir: &Path, base_seq: u64) -> Result<SegmentView> {
        let path = dir.join(format::segment_file_name(base_seq));
        if File::open(&path)
            .and_then(|f| {
                let mut head = [0u8; 8];
                f.read_exact_at(&mut head, 0).map(|()| cold::is_cold(&head))
            })
            .unwrap_or(false)
        {
            // A cold segment never changes: its map is as good as a copy.
            return SegmentView::open(dir, base_seq);
        }
        let idx_path = dir.join(format::index_file_name(base_seq));
        let index_bytes = std::fs::read(&idx_path).ok().filter(|b| !b.is_empty());
        let file = File::open(&path).map_err(|e| Error::io("open segment", &path, e))?;
        let bytes = read_backwards(&file).map_err(|e| Error::io("read segment", &path, e))?;
        let header =
            decode_segment_header(&bytes[..bytes.len().min(HEADER_SIZE)], &path, base_seq)?;
        let map = mmap::copy_to_map(&bytes).map_err(|e| Error::io("copy segment", &path, e))?;
        let index = index_bytes.and_then(|b| {
            let f = File::open(&idx_path).ok()?;
            let m = mmap::copy_to_map(&b).ok()?;
            Some((f, m))
        });
        let index_len = index.as_ref().map_or(0, |(_, m)| m.len() as u64);
        let check = RecordCheck::of(&header);
        Ok(SegmentView {
            path,
            header,
            check,
            file,
            map: Some(map),
            index,
            fallback: OnceLock::new(),
            readable: AtomicU64::new(bytes.len() as u64),
            index_readable: AtomicU64::new(index_len),
            cold: None,
        })
    }

    /// True when the segment can no longer change under this view: its index says it is sealed
    /// or closed and the view ends where its records end (so the writer's trim of the
    /// preallocated tail happened before the view was made).
    pub(crate) fn is_settled(&self) -> bool {
        if self.cold.is_some() {
            return true;
        }
        // A sealed or closed segment never changes again (its tail was given back as a hole,
        // the file keeps its length, so a map of it stays valid).
        self.index_header().is_some_and(|h| {
            matches!(
                h.state,
                format::IndexState::Sealed | format::IndexState::Closed
            ) && h.end <= self.data().len() as u64
        })
    }

    /// The ranges after `from` of the readable bytes that may hold data (not holes).
    pub(crate) fn data_ranges(&self, from: u64) -> Vec<(u64, u64)> {
        if self.cold.is_some() {
            let end = self.data().len() as u64;
            return if from < end {
                vec![(from, end)]
            } else {
                Vec::new()
            };
        }
        data_ranges(&self.file, from, self.data().len() as u64)
    }

    /// The bytes that may be read now. A cold segment decompresses every block first (a
    /// damaged block reads as zeros: the records end early there); reads of single records use
    /// [`ready_at`](Self::ready_at) and [`record`](Self::record), which decompress one block.
    pub(crate) fn data(&self) -> &[u8] {
        if let Some(c) = &self.cold {
            let _ = c.ensure_all();
        }
        self.data_plain()
    }

    /// How many bytes may be read (for a cold segment, without decompressing anything).
    pub(crate) fn readable_len(&self) -> u64 {
        self.data_plain().len() as u64
    }

    #[inline]
    fn data_plain(&self) -> &[u8] {
        let all: &[u8] = match (&self.map, &self.cold) {
            (Some(m), _) => m,
            (None, Some(c)) => c.plain(),
            (None, None) => &[],
        };
        let n = self.readable.load(Ordering::Acquire).min(all.len() as u64);
        &all[..n as usize]
    }

    /// Sets how many bytes may be read (the writer grew the file).
    pub(crate) fn set_readable(&self, len: u64) {
        self.readable.fetch_max(len, Ordering::AcqRel);
    }

    /// Lowers how many bytes may be read (before the writer trims the file).
    pub(crate) fn shrink_readable(&self, len: u64) {
        self.readable.fetch_min(len, Ordering::AcqRel);
    }

    /// Re-reads the file's size (for readers in another process than the writer).
    pub(crate) fn refresh_len(&self) {
        if self.cold.is_some() {
            return;
        }
        if let Ok(m) = self.file.metadata() {
            self.set_readable(m.len());
        }
        if let Some(m) = self.index.as_ref().and_then(|(f, _)| f.metadata().ok()) {
            self.set_index_readable(m.len());
        }
    }

    /// Sets how many bytes of the index may be read (the writer grew the index file).
    pub(crate) fn set_index_readable(&self, len: u64) {
        self.index_readable.fetch_max(len, Ordering::AcqRel);
    }

    /// The bytes of the index file that may be read now.
    fn index_bytes(&self) -> Option<&[u8]> {
        let (_, m) = self.index.as_ref()?;
        let n = self
            .index_readable
            .load(Ordering::Acquire)
            .min(m.len() as u64);
        Some(&m[..n as usize])
    }

    /// The index header, when the index is present and its header valid.
    pub(crate) fn index_header(&self) -> Option<IndexHeader> {
        if let Some(c) = &self.cold {
            return Some(c.index_header(&self.header));
        }
        let h = IndexHeader::decode(self.index_bytes()?.get(..HEADER_SIZE)?).ok()?;
        (h.base_seq == self.header.base_seq && h.log_id == self.header.log_id).then_some(h)
    }

    fn index_len(&self) -> u64 {
        self.index_bytes().map_or(0, |b| b.len() as u64)
    }

    /// The offset of the record `i` of this segment, from the index (or the scanned fallback).
    pub(crate) fn offset_of(&self, i: u64) -> Option<u64> {
        if let Some(c) = &self.cold {
            return c.offset_of(i).ok().flatten();
        }
        if let Some(offsets) = self.fallback.get() {
            if let Some(&o) = offsets.get(usize::try_from(i).ok()?) {
                return Some(u64::from(o));
            }
            // Records appended after the scan (the active segment) are found by the index,
            // which the writer keeps writing.
        }
        let m = self.index_bytes()?;
        let entry = format::index_entry(m, i)?;
        std::sync::atomic::fence(Ordering::Acquire);
        (entry != 0).then_some(u64::from(entry))
    }

    /// The offset the index file itself names for record `i` (never the scanned fallback);
    /// `None` when the entry is zero (not written) or beyond the file.
    pub(crate) fn offset_of_indexed(&self, i: u64) -> Option<u64> {
        if let Some(c) = &self.cold {
            return c.offset_of(i).ok().flatten();
        }
        let entry = format::index_entry(self.index_bytes()?, i)?;
        std::sync::atomic::fence(Ordering::Acquire);
        (entry != 0).then_some(u64::from(entry))
    }

    /// True when the index names exactly these offsets for its first records.
    pub(crate) fn index_entries_match(&self, offsets: &[u32]) -> bool {
        if self.cold.is_some() {
            return offsets
                .iter()
                .enumerate()
                .all(|(i, &o)| self.offset_of(i as u64) == Some(u64::from(o)));
        }
        let Some(m) = self.index_bytes() else {
            return false;
        };
        offsets
            .iter()
            .enumerate()
            .all(|(i, &o)| format::index_entry(m, i as u64) == Some(o))
    }

    /// Replaces the index by offsets found by scanning (the index is missing or damaged).
    pub(crate) fn use_fallback(&self, offsets: Vec<u32>) {
        let _ = self.fallback.set(offsets);
    }

    /// True when the fallback offsets are in use.
    pub(crate) fn has_fallback(&self) -> bool {
        self.fallback.get().is_some()
    }

    /// Checks the record `i` of this segment.
    pub(crate) fn record(&self, i: u64) -> std::result::Result<Found<'_>, (u64, Fault)> {
        let seq = self.check.base_seq + i;
        if let Some(c) = &self.cold {
            let offset = c
                .offset_of(i)
                .map_err(|b| (b.file_offset, Fault::Cold(b.what)))?
                .ok_or((0, Fault::Zero))?;
            return check_record(self.data_plain(), offset, seq, &self.check)
                .map_err(|f| (offset, f));
        }
        let offset = self.offset_of(i).ok_or((0, Fault::Zero))?;
        check_record(self.data(), offset, seq, &self.check).map_err(|f| (offset, f))
    }

    /// [`SegmentView::record`], and when that fails in a plain segment whose records were not
    /// found by scanning yet: the index may be missing or damaged (derived data), so the
    /// records are found by scanning, once, and record `i` is checked again. The error is the
    /// first check's.
    pub(crate) fn record_rescanning(&self, i: u64) -> std::result::Result<Found<'_>, (u64, Fault)> {
        let first = match self.record(i) {
            Ok(found) => return Ok(found),
            Err(e) => e,
        };
        if self.has_fallback() || self.cold.is_some() {
            return Err(first);
        }
        let s = scan(
            self.data(),
            HEADER_SIZE as u64,
            self.header.base_seq,
            &self.check,
        );
        if (s.offsets.len() as u64) > i {
            self.use_fallback(s.offsets);
            if let Ok(found) = self.record(i) {
                return Ok(found);
            }
        }
        Err(first)
    }

    /// Checks that the index agrees with the segment for `count` records ending at `end`: the
    /// last entry names a valid record with the right seq that ends at `end`.
    pub(crate) fn index_tail_ok(&self, count: u64, end: u64) -> bool {
        if self.cold.is_some() {
            return match count.checked_sub(1) {
                None => end == HEADER_SIZE as u64,
                Some(last) => self.record(last).is_ok_and(|f| f.next == end),
            };
        }
        if self.index_len() < format::index_entry_offset(count) {
            return false;
        }
        if count == 0 {
            return end == HEADER_SIZE as u64;
        }
        match self.record(count - 1) {
            Ok(found) => found.next == end,
            Err(_) => false,
        }
    }

    /// Counts the records an open (being written) index names, by binary search for the first
    /// zero entry, and checks the last one. `None` when the index cannot be trusted.
    pub(crate) fn count_by_index(&self) -> Option<u64> {
        let n = self.count_by_entries()?;
        if n == 0 {
            return Some(0);
        }
        self.record(n - 1).ok().map(|_| n)
    }

    /// Counts the records an open (being written) index has entries for, by binary search for
    /// the first zero entry, without checking them. Re-reads the file's length first, so the
    /// records the entries name are inside what may be read.
    pub(crate) fn count_by_entries(&self) -> Option<u64> {
        if let Some(c) = &self.cold {
            return Some(c.head.count);
        }
        // The entry was written after its record, and the record after the file grew: the
        // file's length read now covers it (the length read when the view was opened may not).
        self.refresh_len();
        let m = self.index_bytes()?;
        let entries = (m.len() as u64).checked_sub(HEADER_SIZE as u64)? / INDEX_ENTRY_SIZE as u64;
        let (mut lo, mut hi) = (0u64, entries);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if format::index_entry(m, mid).unwrap_or(0) != 0 {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Some(lo)
    }

    /// The file name of the index.
    pub(crate) fn index_path(&self) -> PathBuf {
        self.path.with_extension("idx")
    }
}

/// Converts a header problem into the right error: an unsupported version or layout is not
/// damage, everything else is.
pub(crate) fn header_error(path: &Path, h: format::HeaderError) -> Error {
    match h {
        format::HeaderError::Version(_) | format::HeaderError::Layout(_) => Error::Incompatible {
            path: path.to_path_buf(),
            reason: h.to_string(),
        },
        other => Error::corrupt(path, 0, None, CorruptionKind::BadHeader(other)),
    }
}
