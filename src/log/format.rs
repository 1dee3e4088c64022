//! The byte formats of segment files, records and index files.
//!
//! Everything on disk is little-endian. `docs/format.md` carries the same tables with byte diagrams;
//! this module is the code that writes and checks them.
//!
//! # Segment file `<base seq, 20 digits>.seg`
//!
//! A 64-byte header, then records back to back, each starting at a 16-byte aligned offset.
//!
//! | offset | size | field | value |
//! |---:|---:|---|---|
//! | 0 | 8 | magic | `AGLOGSEG` |
//! | 8 | 2 | format version | `2` |
//! | 10 | 2 | header size | `64` |
//! | 12 | 1 | rkyv endianness | `1` = little-endian |
//! | 13 | 1 | rkyv alignment | `1` = aligned (natural alignment of archived primitives) |
//! | 14 | 1 | rkyv pointer width | `4` (32-bit relative pointers) |
//! | 15 | 1 | log2 of record alignment | `4` (16 bytes) |
//! | 16 | 8 | base seq | seq of the first record |
//! | 24 | 16 | log id | random id shared by every segment of one log (and of its forks) |
//! | 40 | 8 | capacity | the size the segment may grow to; readers map this much |
//! | 48 | 4 | payload schema | chosen by the log's user (agentlog events: see `session`) |
//! | 52 | 8 | created | epoch milliseconds |
//! | 60 | 4 | header checksum | crc32 of bytes 0..60 |
//!
//! # Record
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 4 | payload length `n` (bytes, without padding) |
//! | 4 | 4 | checksum: crc32, initial value = the segment seed, over bytes 0..4, 8..16 and the payload |
//! | 8 | 4 | seq − base seq of the segment |
//! | 12 | 4 | flags: bit 0 always set (a record header is never all zero); other bits reserved, zero |
//! | 16 | n | payload (an rkyv archive: its root sits at the end, so `n` must be exact) |
//! | 16+n | pad | zero bytes up to the next multiple of 16 |
//!
//! The segment seed is `crc32(log id ‖ base seq as u64 LE)`: a record copied from another log or
//! another segment never validates. A header that is all zero marks the end of the records. The
//! writer writes payload and padding first and the header last, so a writer killed in the middle of
//! an append leaves a zero header behind.
//!
//! # Index file `<base seq, 20 digits>.idx`
//!
//! A 64-byte header, then one `u32` per record: the byte offset of record `base + i` in the segment.
//! An entry is written after its record, so a non-zero entry names a complete record.
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 8 | magic `AGLOGIDX` |
//! | 8 | 2 | format version `2` |
//! | 10 | 2 | header size `64` |
//! | 12 | 4 | state: `1` open (a writer appends; the tail may be unindexed), `2` closed cleanly, `3` sealed |
//! | 16 | 8 | base seq |
//! | 24 | 16 | log id |
//! | 40 | 8 | record count (meaningful when closed or sealed) |
//! | 48 | 8 | end offset of the last record (meaningful when closed or sealed) |
//! | 56 | 4 | synced end: every record that ends at or before this offset was on stable storage |
//! | 60 | 4 | header checksum: crc32 of bytes 0..60 |

use std::fmt;

/// The format version this build writes and reads.
pub const FORMAT_VERSION: u16 = 2;
/// Size of the segment header and of the index header.
pub const HEADER_SIZE: usize = 64;
/// Size of a record header.
pub const RECORD_HEADER_SIZE: usize = 16;
/// Records start at multiples of this.
pub const RECORD_ALIGN: usize = 16;
/// Bytes per index entry.
pub const INDEX_ENTRY_SIZE: usize = 4;

const SEGMENT_MAGIC: [u8; 8] = *b"AGLOGSEG";
const INDEX_MAGIC: [u8; 8] = *b"AGLOGIDX";
const LAYOUT_LITTLE_ENDIAN: u8 = 1;
const LAYOUT_ALIGNED: u8 = 1;
const LAYOUT_POINTER_WIDTH: u8 = 4;
const LAYOUT_RECORD_ALIGN_LOG2: u8 = 4;
const FLAG_PRESENT: u32 = 1;

/// A random identity shared by every segment of one log.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct LogId(pub [u8; 16]);

impl LogId {
    /// A fresh random id (std's randomly keyed SipHash over the clock, the process id and a counter).
    pub fn generate() -> LogId {
        use std::collections::hash_map::RandomState;
        use std::hash::BuildHasher;
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let mut out = [0u8; 16];
        for half in out.chunks_mut(8) {
            let h = RandomState::new().hash_one((nanos, std::process::id(), n));
            half.copy_from_slice(&h.to_le_bytes());
        }
        LogId(out)
    }
}

impl fmt::Debug for LogId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for LogId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// The checksum seed of one segment: ties every record to its log and its segment.
pub fn segment_seed(log_id: &LogId, base_seq: u64) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&log_id.0);
    h.update(&base_seq.to_le_bytes());
    h.finalize()
}

/// Rounds `n` up to the record alignment.
pub fn align_up(n: u64) -> u64 {
    n.div_ceil(RECORD_ALIGN as u64) * RECORD_ALIGN as u64
}

/// Total bytes a record with a payload of `len` bytes occupies in a segment.
pub fn record_size(len: u64) -> u64 {
    RECORD_HEADER_SIZE as u64 + align_up(len)
}

pub(crate) fn u16_at(b: &[u8], at: usize) -> u16 {
    let mut a = [0u8; 2];
    a.copy_from_slice(&b[at..at + 2]);
    u16::from_le_bytes(a)
}

/// The little-endian `u32` at byte `at` of `b` (which must hold it).
pub(crate) fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

/// The little-endian `u64` at byte `at` of `b` (which must hold it).
pub(crate) fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

fn log_id_at(b: &[u8], at: usize) -> LogId {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[at..at + 16]);
    LogId(a)
}

fn header_crc(b: &[u8]) -> u32 {
    crc32fast::hash(&b[..60])
}

/// Why a header could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderError {
    /// Fewer than 64 bytes.
    Short(usize),
    /// Not an agentlog file of this kind.
    BadMagic,
    /// The header checksum does not match.
    Checksum {
        /// Stored in the header.
        expected: u32,
        /// Computed over the header.
        got: u32,
    },
    /// Written by a format version this build does not read.
    Version(u16),
    /// Written with another rkyv layout (endianness, alignment, pointer width, record alignment).
    Layout(String),
    /// A field has an impossible value.
    Invalid(String),
}

impl fmt::Display for HeaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeaderError::Short(n) => write!(f, "header is {n} bytes, expected {HEADER_SIZE}"),
            HeaderError::BadMagic => write!(f, "bad magic bytes (not an agentlog file)"),
            HeaderError::Checksum { expected, got } => write!(
                f,
                "header checksum mismatch (stored {expected:#010x}, computed {got:#010x})"
            ),
            HeaderError::Version(v) => write!(
                f,
                "format version {v} is not supported (this build reads version {FORMAT_VERSION})"
            ),
            HeaderError::Layout(s) => write!(f, "incompatible archive layout: {s}"),
            HeaderError::Invalid(s) => write!(f, "invalid header: {s}"),
        }
    }
}

fn check_common(b: &[u8], magic: &[u8; 8]) -> Result<(), HeaderError> {
    if b.len() < HEADER_SIZE {
        return Err(HeaderError::Short(b.len()));
    }
    if &b[0..8] != magic {
        return Err(HeaderError::BadMagic);
    }
    let expected = u32_at(b, 60);
    let got = header_crc(b);
    if expected != got {
        return Err(HeaderError::Checksum { expected, got });
    }
    let version = u16_at(b, 8);
    if version != FORMAT_VERSION {
        return Err(HeaderError::Version(version));
    }
    if usize::from(u16_at(b, 10)) != HEADER_SIZE {
        return Err(HeaderError::Invalid(format!(
            "header size {} (expected {HEADER_SIZE})",
            u16_at(b, 10)
        )));
    }
    Ok(())
}

/// The fixed header of a segment file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentHeader {
    /// Seq of the first record.
    pub base_seq: u64,
    /// The log this segment belongs to.
    pub log_id: LogId,
    /// The size the file may grow to.
    pub capacity: u64,
    /// The payload schema chosen by the log's user.
    pub payload_schema: u32,
    /// Creation time, epoch milliseconds.
    pub created_ms: i64,
}

impl SegmentHeader {
    /// The 64 header bytes.
    pub fn encode(&self) -> [u8; HEADER_SIZE] {
        let mut b = [0u8; HEADER_SIZE];
        b[0..8].copy_from_slice(&SEGMENT_MAGIC);
        b[8..10].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        b[10..12].copy_from_slice(&(HEADER_SIZE as u16).to_le_bytes());
        b[12] = LAYOUT_LITTLE_ENDIAN;
        b[13] = LAYOUT_ALIGNED;
        b[14] = LAYOUT_POINTER_WIDTH;
        b[15] = LAYOUT_RECORD_ALIGN_LOG2;
        b[16..24].copy_from_slice(&self.base_seq.to_le_bytes());
        b[24..40].copy_from_slice(&self.log_id.0);
        b[40..48].copy_from_slice(&self.capacity.to_le_bytes());
        b[48..52].copy_from_slice(&self.payload_schema.to_le_bytes());
        b[52..60].copy_from_slice(&self.created_ms.to_le_bytes());
        let crc = header_crc(&b);
        b[60..64].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Reads and checks a segment header.
    pub fn decode(b: &[u8]) -> Result<SegmentHeader, HeaderError> {
        check_common(b, &SEGMENT_MAGIC)?;
        let layout = (b[12], b[13], b[14], b[15]);
        let ours = (
            LAYOUT_LITTLE_ENDIAN,
            LAYOUT_ALIGNED,
            LAYOUT_POINTER_WIDTH,
            LAYOUT_RECORD_ALIGN_LOG2,
        );
        if layout != ours {
            return Err(HeaderError::Layout(format!(
                "file has endianness={} aligned={} pointer width={} record align=2^{}, \
                 this build uses endianness=1 (little) aligned=1 pointer width=4 record align=2^4",
                layout.0, layout.1, layout.2, layout.3
            )));
        }
        let capacity = u64_at(b, 40);
        if capacity < (HEADER_SIZE + RECORD_HEADER_SIZE) as u64 || capacity > u64::from(u32::MAX) {
            return Err(HeaderError::Invalid(format!("capacity {capacity}")));
        }
        let base_seq = u64_at(b, 16);
        if base_seq >= MAX_SEQ {
            return Err(HeaderError::Invalid(format!("base seq {base_seq}")));
        }
        Ok(SegmentHeader {
            base_seq,
            log_id: log_id_at(b, 24),
            capacity,
            payload_schema: u32_at(b, 48),
            created_ms: u64_at(b, 52) as i64,
        })
    }
}

/// The state recorded in an index header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexState {
    /// A writer has the segment open; the tail may be unindexed (and after a crash, torn).
    Open,
    /// The writer closed the log cleanly; `count` and `end` are exact.
    Closed,
    /// The segment is sealed and never changes again; `count` and `end` are exact.
    Sealed,
}

impl IndexState {
    pub(crate) fn code(self) -> u32 {
        match self {
            IndexState::Open => 1,
            IndexState::Closed => 2,
            IndexState::Sealed => 3,
        }
    }

    pub(crate) fn from_code(c: u32) -> Option<IndexState> {
        match c {
            1 => Some(IndexState::Open),
            2 => Some(IndexState::Closed),
            3 => Some(IndexState::Sealed),
            _ => None,
        }
    }
}

/// The fixed header of an index file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexHeader {
    /// Open, closed or sealed.
    pub state: IndexState,
    /// Seq of the segment's first record.
    pub base_seq: u64,
    /// The log the segment belongs to.
    pub log_id: LogId,
    /// Records in the segment (exact when closed or sealed).
    pub count: u64,
    /// End offset of the last record (exact when closed or sealed).
    pub end: u64,
    /// Records ending at or before this offset had reached stable storage.
    pub synced_end: u32,
}

impl IndexHeader {
    /// The 64 header bytes.
    pub fn encode(&self) -> [u8; HEADER_SIZE] {
        let mut b = [0u8; HEADER_SIZE];
        b[0..8].copy_from_slice(&INDEX_MAGIC);
        b[8..10].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        b[10..12].copy_from_slice(&(HEADER_SIZE as u16).to_le_bytes());
        b[12..16].copy_from_slice(&self.state.code().to_le_bytes());
        b[16..24].copy_from_slice(&self.base_seq.to_le_bytes());
        b[24..40].copy_from_slice(&self.log_id.0);
        b[40..48].copy_from_slice(&self.count.to_le_bytes());
        b[48..56].copy_from_slice(&self.end.to_le_bytes());
        b[56..60].copy_from_slice(&self.synced_end.to_le_bytes());
        let crc = header_crc(&b);
        b[60..64].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Reads and checks an index header.
    pub fn decode(b: &[u8]) -> Result<IndexHeader, HeaderError> {
        check_common(b, &INDEX_MAGIC)?;
        let code = u32_at(b, 12);
        let state = IndexState::from_code(code)
            .ok_or_else(|| HeaderError::Invalid(format!("index state {code}")))?;
        let (base_seq, count, end) = (u64_at(b, 16), u64_at(b, 40), u64_at(b, 48));
        // A segment is under 4 GiB: it holds fewer than 2^32 records and ends below 2^32.
        if base_seq >= MAX_SEQ || count > u64::from(u32::MAX) || end > u64::from(u32::MAX) {
            return Err(HeaderError::Invalid(format!(
                "base seq {base_seq}, count {count}, end {end}"
            )));
        }
        Ok(IndexHeader {
            state,
            base_seq,
            log_id: log_id_at(b, 24),
            count,
            end,
            synced_end: u32_at(b, 56),
        })
    }
}

/// A decoded record header (not yet checked against its payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    /// Payload length in bytes.
    pub len: u32,
    /// Stored checksum.
    pub crc: u32,
    /// Seq minus the segment's base seq.
    pub seq_delta: u32,
    /// Flags word.
    pub flags: u32,
}

impl RecordHeader {
    /// Reads the 16 header bytes at the start of `b`.
    pub fn read(b: &[u8]) -> RecordHeader {
        RecordHeader {
            len: u32_at(b, 0),
            crc: u32_at(b, 4),
            seq_delta: u32_at(b, 8),
            flags: u32_at(b, 12),
        }
    }

    /// True when all 16 bytes are zero: the end of the records.
    pub fn is_zero(&self) -> bool {
        self.len == 0 && self.crc == 0 && self.seq_delta == 0 && self.flags == 0
    }

    /// True when the flags word is one this build writes.
    pub fn flags_ok(&self) -> bool {
        self.flags == FLAG_PRESENT
    }

    /// The 16 header bytes of a record holding `payload` as seq `base + seq_delta`.
    pub fn encode(seed: u32, seq_delta: u32, payload: &[u8]) -> [u8; RECORD_HEADER_SIZE] {
        let mut b = [0u8; RECORD_HEADER_SIZE];
        let len = payload.len() as u32;
        b[0..4].copy_from_slice(&len.to_le_bytes());
        b[8..12].copy_from_slice(&seq_delta.to_le_bytes());
        b[12..16].copy_from_slice(&FLAG_PRESENT.to_le_bytes());
        let crc = record_crc(seed, &b, payload);
        b[4..8].copy_from_slice(&crc.to_le_bytes());
        b
    }
}

/// The checksum of a record: header bytes 0..4 and 8..16, then the payload, seeded per segment.
pub fn record_crc(seed: u32, header: &[u8], payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new_with_initial(seed);
    h.update(&header[0..4]);
    h.update(&header[8..16]);
    h.update(payload);
    h.finalize()
}

/// The first seq no segment may start at (2^62): far beyond any log (2^62 appends at one per
/// nanosecond take 146 years), and it keeps every sum of a base seq and a count (under 2^32) far
/// from overflowing. A header naming a base seq at or past it is refused as damaged.
pub const MAX_SEQ: u64 = 1 << 62;

/// Reads index entry `i` from the bytes of an index file.
pub fn index_entry(index: &[u8], i: u64) -> Option<u32> {
    let at = (HEADER_SIZE as u64).checked_add(i.checked_mul(INDEX_ENTRY_SIZE as u64)?)?;
    let at = usize::try_from(at).ok()?;
    let bytes = index.get(at..at.checked_add(INDEX_ENTRY_SIZE)?)?;
    Some(u32_at(bytes, 0))
}

/// The byte offset of index entry `i` in an index file.
pub fn index_entry_offset(i: u64) -> u64 {
    // Saturating: `i` may come from a damaged header; such an offset lies past any file.
    (HEADER_SIZE as u64).saturating_add(i.saturating_mul(INDEX_ENTRY_SIZE as u64))
}

/// The file name of the segment starting at `base_seq`.
pub fn segment_file_name(base_seq: u64) -> String {
    format!("{base_seq:020}.seg")
}

/// The file name of the index of the segment starting at `base_seq`.
pub fn index_file_name(base_seq: u64) -> String {
    format!("{base_seq:020}.idx")
}

/// Parses `<20 digits>.seg` into its base seq.
pub fn parse_segment_file_name(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(".seg")?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_header_round_trips_and_detects_damage() {
        let h = SegmentHeader {
            base_seq: 131_072,
            log_id: LogId::generate(),
            capacity: 1 << 20,
            payload_schema: 7,
            created_ms: 1_755_000_000_000,
        };
        let mut b = h.encode();
        assert_eq!(SegmentHeader::decode(&b), Ok(h));
        b[17] ^= 0x10;
        assert!(matches!(
            SegmentHeader::decode(&b),
            Err(HeaderError::Checksum { .. })
        ));
    }

    #[test]
    fn index_header_round_trips() {
        let h = IndexHeader {
            state: IndexState::Sealed,
            base_seq: 5,
            log_id: LogId::generate(),
            count: 9,
            end: 4096,
            synced_end: 4096,
        };
        assert_eq!(IndexHeader::decode(&h.encode()), Ok(h));
        assert!(matches!(
            IndexHeader::decode(&h.encode()[..10]),
            Err(HeaderError::Short(10))
        ));
    }

    #[test]
    fn record_header_is_never_zero_and_checksum_covers_payload() {
        let seed = segment_seed(&LogId([1; 16]), 0);
        let h = RecordHeader::encode(seed, 3, b"");
        assert!(!RecordHeader::read(&h).is_zero());
        let h = RecordHeader::encode(seed, 3, b"abc");
        let r = RecordHeader::read(&h);
        assert_eq!(r.crc, record_crc(seed, &h, b"abc"));
        assert_ne!(r.crc, record_crc(seed, &h, b"abd"));
        let other = segment_seed(&LogId([1; 16]), 1);
        assert_ne!(r.crc, record_crc(other, &h, b"abc"));
    }

    #[test]
    fn file_names() {
        assert_eq!(segment_file_name(131072), "00000000000000131072.seg");
        assert_eq!(
            parse_segment_file_name("00000000000000131072.seg"),
            Some(131072)
        );
        assert_eq!(parse_segment_file_name("131072.seg"), None);
        assert_eq!(parse_segment_file_name("0000000000000013107x.seg"), None);
        assert_eq!(record_size(0), 16);
        assert_eq!(record_size(1), 32);
        assert_eq!(record_size(16), 32);
    }
}
