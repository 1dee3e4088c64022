//! `LASTSEG`: a checksummed hint naming a log's last segment, so that a reader finds the last
//! record without listing the directory.
//!
//! A cache, never the truth. The writer rewrites it, through its [`Storage`], *before* it
//! creates a segment (the hint is durable before the segment's name is), and when it opens a
//! log whose hint does not name its active segment. So at any moment the hint names either the
//! last segment or a segment that does not exist (yet, or any more): never a segment with a
//! successor the hint does not know of, except through a writer older than the hint (which
//! leaves an older hint: the reader walks forward from it, see below) or a failed hint write
//! (after which the writer removes the old hint, best effort).
//!
//! [`LogReader::open`](super::LogReader::open) checks a hint before trusting it: the file is
//! whole (magic, version, checksum), the named segment exists, carries the hint's log id and
//! base seq, and the segment named by its end (`base + count`) does not exist, or the reader
//! walks forward to it as a refresh does. A missing, damaged or wrong hint falls back to the
//! directory listing. The segments before the last one are listed only when a read first needs
//! one of them.
//!
//! The file is 64 bytes:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `AGLOGTAL` |
//! | 8 | 2 | format version (1), u16 LE |
//! | 10 | 2 | size (64), u16 LE |
//! | 12 | 4 | flags, u32 LE: bit 0 set when bytes 40..60 hold the tail (else zero) |
//! | 16 | 16 | log id |
//! | 32 | 8 | base seq of the last segment, u64 LE |
//! | 40 | 4 | tail: records in the last segment, u32 LE |
//! | 44 | 4 | tail: byte offset of the last record in its segment, u32 LE |
//! | 48 | 4 | tail: byte offset where the last record ends, u32 LE |
//! | 52 | 4 | tail: the segment header's payload schema, u32 LE |
//! | 56 | 4 | tail: the segment header's capacity, u32 LE |
//! | 60 | 4 | crc32 of bytes 0..60 |
//! | 64 | 64 | with flag bit 1 (the copy): the last segment's header, as in the segment |
//! | 128 | 8 | with flag bit 1: the segment file's inode number, u64 LE |
//! | 136 | 8 | with flag bit 1: the segment file's size, u64 LE |
//! | 144 | 8 | with flag bit 1: the segment file's modification time, ns since the epoch, i64 LE |
//! | 152 | 8 | with flag bit 1: the segment file's change time, ns since the epoch, i64 LE |
//! | 160 | `end - last offset` | with flag bit 1: the last record (header, payload, padding), as in the segment |
//!
//! The tail is written when the writer closes the log cleanly (and dropped when a writer opens
//! it; both in place, [`rewrite_hint_in_place`]): with it, a reader finds the last record with one `pread` of the segment, without its
//! index (`src/log/tail.rs`). It is a claim checked before it is used: the record there must
//! check (checksum, seq `base + count - 1`), end where the tail says, and be followed by no
//! record (zero bytes or the end of the file) and no segment (`base + count` does not exist).
//!
//! **The copy.** When the last record is small ([`MAX_COPY_RECORD`] bytes with its header and
//! padding, so that the file fits in one 4 KiB page), the clean close also writes a copy of the
//! segment's header and of that record after the 64 bytes: a reader then answers the last
//! record from the hint alone, without reading the segment (one read of one page, as a JSONL
//! tail). The copy is checked as the record would be (the header's own checksum, the record's
//! checksum seeded by the log id and base seq, its seq, its length), and the segment file must
//! still be the one it was taken from: the same inode, size, modification and change time
//! (`statx`, which reads no data; a file copied in, cut, written or touched since differs). A
//! write inside the clock's resolution could keep the times, so a writer that opens the log
//! also drops the tail and the copy **and syncs the hint** before it does anything else
//! ([`drop_tail_durably`]): a copy on disk always describes a segment no writer has changed
//! since its clean close. Damage that changes no metadata (bits rotting in place) is not seen
//! by a reader that reads only the last record from the copy; every other read of that record
//! (through the segment) and `verify` report it. Deleting `LASTSEG` is always safe.

use std::fs::OpenOptions;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::format::{u32_at, u64_at, LogId, HEADER_SIZE as SEGMENT_HEADER_SIZE};
use super::io::Storage;
use rkyv::util::AlignedVec;

/// The name of the hint file in a log directory.
pub const LASTSEG_FILE: &str = "LASTSEG";
/// Where the writer prepares the hint (a crash may leave it; it is never read).
pub const LASTSEG_TMP_FILE: &str = "LASTSEG.tmp";

const MAGIC: [u8; 8] = *b"AGLOGTAL";
const VERSION: u16 = 1;
const SIZE: usize = 64;
/// The largest hint file: one page.
const MAX_FILE: usize = 4096;
/// The identity of the segment file a copy was taken from: inode, size, times.
const IDENTITY_SIZE: usize = 32;
/// Where the copied record starts in the file (16-byte aligned, as in a segment).
const COPY_RECORD_AT: usize = SIZE + SEGMENT_HEADER_SIZE + IDENTITY_SIZE;
/// The largest record (header, payload and padding) copied into the hint at a clean close.
pub(crate) const MAX_COPY_RECORD: usize = MAX_FILE - COPY_RECORD_AT;

/// What identifies a segment file as it was when its last record was copied into the hint: a
/// file put in its place, cut, written or touched since has another inode, size or change
/// time (`statx`, no data read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileIdentity {
    pub ino: u64,
    pub size: u64,
    /// Modification and change times, nanoseconds since the epoch.
    pub mtime_ns: i64,
    pub ctime_ns: i64,
}

impl FileIdentity {
    /// The identity of the file at `path` (not followed if a symlink: a symlink never matches).
    pub fn of(path: &Path) -> Option<FileIdentity> {
        use std::os::unix::fs::MetadataExt;
        let m = path.symlink_metadata().ok()?;
        if !m.is_file() {
            return None;
        }
        let ns = |s: i64, n: i64| s.checked_mul(1_000_000_000)?.checked_add(n);
        Some(FileIdentity {
            ino: m.ino(),
            size: m.len(),
            mtime_ns: ns(m.mtime(), m.mtime_nsec())?,
            ctime_ns: ns(m.ctime(), m.ctime_nsec())?,
        })
    }

    fn encode(&self) -> [u8; IDENTITY_SIZE] {
        let mut b = [0u8; IDENTITY_SIZE];
        b[0..8].copy_from_slice(&self.ino.to_le_bytes());
        b[8..16].copy_from_slice(&self.size.to_le_bytes());
        b[16..24].copy_from_slice(&self.mtime_ns.to_le_bytes());
        b[24..32].copy_from_slice(&self.ctime_ns.to_le_bytes());
        b
    }

    fn decode(b: &[u8]) -> Option<FileIdentity> {
        let b = b.get(..IDENTITY_SIZE)?;
        // (The times' bits as written: `encode` wrote their little-endian two's complement.)
        Some(FileIdentity {
            ino: u64_at(b, 0),
            size: u64_at(b, 8),
            mtime_ns: u64_at(b, 16) as i64,
            ctime_ns: u64_at(b, 24) as i64,
        })
    }
}

/// The copy a clean close writes after the hint: the last segment's header bytes, the segment
/// file's identity, and the last record's bytes (header, payload, padding).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Copy<'a> {
    pub header: &'a [u8],
    pub identity: FileIdentity,
    pub record: &'a [u8],
}

/// What a hint says: the log's id and its last segment's base seq, and, after a clean close,
/// where the last record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hint {
    pub log_id: LogId,
    pub last_base: u64,
    pub tail: Option<HintTail>,
}

/// Where a cleanly closed log's last record is, and the last segment header's fields a reader
/// needs (a claim: see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HintTail {
    /// Records in the last segment (at least one).
    pub count: u32,
    /// Where the last one starts and ends in its segment.
    pub last_offset: u32,
    pub end: u32,
    pub payload_schema: u32,
    pub capacity: u32,
}

const FLAG_TAIL: u32 = 1;
const FLAG_COPY: u32 = 2;

/// A hint as read from its file: the hint, and the copy of the last segment's header and last
/// record that follows it after a clean close (unchecked: `src/log/tail.rs` checks it).
#[derive(Debug)]
pub(crate) struct HintFile {
    pub hint: Hint,
    /// The file's bytes (16-byte aligned): the copy is at `64..`, the record at `128..`.
    bytes: Option<AlignedVec<16>>,
}

impl HintFile {
    /// The copied segment header, file identity and last record, when the file holds them.
    pub fn copy(&self) -> Option<Copy<'_>> {
        let b = self.bytes.as_ref()?;
        Some(Copy {
            header: b.get(SIZE..SIZE + SEGMENT_HEADER_SIZE)?,
            identity: FileIdentity::decode(b.get(SIZE + SEGMENT_HEADER_SIZE..COPY_RECORD_AT)?)?,
            record: b.get(COPY_RECORD_AT..)?,
        })
    }

    /// The file's bytes, to be reused as the last record's buffer (the record moved to the start).
    pub fn into_record_bytes(self) -> Option<AlignedVec<16>> {
        let mut b = self.bytes?;
        let from = COPY_RECORD_AT;
        let len = b.len().checked_sub(from)?;
        b.copy_within(from.., 0);
        b.resize(len, 0);
        Some(b)
    }
}

impl Hint {
    fn encode(&self) -> [u8; SIZE] {
        self.encode_with(false)
    }

    /// The 64 bytes, flagged as followed by a copy when `copy` (and the hint has a tail).
    fn encode_with(&self, copy: bool) -> [u8; SIZE] {
        let mut b = [0u8; SIZE];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..10].copy_from_slice(&VERSION.to_le_bytes());
        b[10..12].copy_from_slice(&(SIZE as u16).to_le_bytes());
        b[16..32].copy_from_slice(&self.log_id.0);
        b[32..40].copy_from_slice(&self.last_base.to_le_bytes());
        if let Some(t) = &self.tail {
            let flags = if copy {
                FLAG_TAIL | FLAG_COPY
            } else {
                FLAG_TAIL
            };
            b[12..16].copy_from_slice(&flags.to_le_bytes());
            b[40..44].copy_from_slice(&t.count.to_le_bytes());
            b[44..48].copy_from_slice(&t.last_offset.to_le_bytes());
            b[48..52].copy_from_slice(&t.end.to_le_bytes());
            b[52..56].copy_from_slice(&t.payload_schema.to_le_bytes());
            b[56..60].copy_from_slice(&t.capacity.to_le_bytes());
        }
        let crc = crc32fast::hash(&b[..60]);
        b[60..64].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// The hint in the first 64 bytes of `b` and whether the copy follows it (`b` is then
    /// exactly 160 bytes plus the record the tail places; without the copy flag, exactly 64).
    fn decode_file(b: &[u8]) -> Option<(Hint, bool)> {
        let hint = Hint::decode(b.get(..SIZE)?)?;
        let copy = u32_at(b, 12) == FLAG_TAIL | FLAG_COPY;
        let expected = match (copy, hint.tail) {
            (true, Some(t)) => COPY_RECORD_AT + t.end.checked_sub(t.last_offset)? as usize,
            _ => SIZE,
        };
        (b.len() == expected).then_some((hint, copy && hint.tail.is_some()))
    }

    fn decode(b: &[u8]) -> Option<Hint> {
        if b.len() != SIZE
            || b[0..8] != MAGIC
            || u16::from_le_bytes([b[8], b[9]]) != VERSION
            || usize::from(u16::from_le_bytes([b[10], b[11]])) != SIZE
            || u32_at(b, 60) != crc32fast::hash(&b[..60])
        {
            return None;
        }
        let mut id = [0u8; 16];
        id.copy_from_slice(&b[16..32]);
        // A hint of a later build with other flags still names the last segment; its tail is
        // not read.
        let flags = u32_at(b, 12);
        let tail = (flags == FLAG_TAIL || flags == FLAG_TAIL | FLAG_COPY)
            .then(|| HintTail {
                count: u32_at(b, 40),
                last_offset: u32_at(b, 44),
                end: u32_at(b, 48),
                payload_schema: u32_at(b, 52),
                capacity: u32_at(b, 56),
            })
            .filter(|t| t.count > 0);
        Some(Hint {
            log_id: LogId(id),
            last_base: u64_at(b, 32),
            tail,
        })
    }
}

/// The hint of the log in `dir`: `None` when there is none or it is not whole (never an error:
/// the caller lists the directory instead).
pub(crate) fn read_hint(dir: &Path) -> Option<Hint> {
    read_hint_file(dir).map(|f| f.hint)
}

/// The hint of the log in `dir` with the copy that may follow it ([`HintFile`]).
///
/// Three system calls: open, one read, close. The read asks for one byte more than a hint
/// file can hold: a regular file's read returns fewer bytes than asked only at its end, so
/// what comes back is the whole file.
pub(crate) fn read_hint_file(dir: &Path) -> Option<HintFile> {
    let mut path = PathBuf::from(dir);
    path.push(LASTSEG_FILE);
    let mut f = OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(&path)
        .ok()?;
    let mut b = AlignedVec::<16>::with_capacity(MAX_FILE + 1);
    b.resize(MAX_FILE + 1, 0);
    let n = loop {
        match f.read(&mut b) {
            Ok(n) => break n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    };
    b.resize(n, 0);
    let (hint, copy) = Hint::decode_file(&b)?;
    Some(HintFile {
        hint,
        bytes: copy.then_some(b),
    })
}

/// Rewrites the existing hint in place with `hint` (the writer's close adds the tail, and
/// `copy`, the last segment's header and last record, when given: at most
/// [`MAX_COPY_RECORD`] bytes of record): `pwrite`s over the file's first page (the copy first,
/// then the 64 bytes that flag it), so nothing is allocated (on a full disk, and on a full
/// tmpfs, where a reader's read of a hole needs a free page, this takes none). A hint without
/// a copy cuts the file back to 64 bytes. Never creates the file, and synced only when `sync`
/// ([`drop_tail_durably`]): a cache whose claims readers check; a reader that reads it half
/// written finds a checksum wrong and does without it.
pub(crate) fn rewrite_hint_in_place(
    dir: &Path,
    hint: Hint,
    copy: Option<Copy<'_>>,
    sync: bool,
) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut path = PathBuf::from(dir);
    path.push(LASTSEG_FILE);
    let f = OpenOptions::new()
        .write(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(&path)?;
    let len = f.metadata()?.len();
    if len < SIZE as u64 || len > MAX_FILE as u64 {
        return Err(std::io::Error::other("not a whole hint"));
    }
    let copy = copy.filter(|c| {
        hint.tail.is_some_and(|t| {
            c.header.len() == SEGMENT_HEADER_SIZE
                && c.record.len() <= MAX_COPY_RECORD
                && t.end.checked_sub(t.last_offset) == u32::try_from(c.record.len()).ok()
        })
    });
    match copy {
        Some(c) => {
            let mut page = Vec::with_capacity(COPY_RECORD_AT - SIZE + c.record.len());
            page.extend_from_slice(c.header);
            page.extend_from_slice(&c.identity.encode());
            page.extend_from_slice(c.record);
            f.write_all_at(&page, SIZE as u64)?;
            f.write_all_at(&hint.encode_with(true), 0)?;
            let want = (SIZE + page.len()) as u64;
            if len > want {
                f.set_len(want)?;
            }
        }
        None => {
            f.write_all_at(&hint.encode(), 0)?;
            if len > SIZE as u64 {
                f.set_len(SIZE as u64)?;
            }
        }
    }
    if sync {
        f.sync_data()?;
    }
    Ok(())
}

/// What a writer does first when it opens a log: when the hint holds a tail, it is dropped
/// **durably** (rewritten in place without it and synced; failing that, the hint is removed
/// and the directory synced), so that no copy of a last record can outlive this writer's
/// appends, even across a power loss. An error only when neither could be done.
///
/// A tail without a copy is dropped the same way but not synced, and a failure is ignored:
/// a reader checks such a tail against the segment, which this writer's appends change.
pub(crate) fn drop_tail_durably(storage: &dyn Storage, dir: &Path) -> std::io::Result<()> {
    let Some(file) = read_hint_file(dir) else {
        return Ok(());
    };
    if file.hint.tail.is_none() {
        return Ok(());
    }
    let copy = file.copy().is_some();
    let plain = Hint {
        tail: None,
        ..file.hint
    };
    let dropped = rewrite_hint_in_place(dir, plain, None, copy);
    if dropped.is_ok() || !copy {
        return Ok(());
    }
    match std::fs::remove_file(dir.join(LASTSEG_FILE)) {
        Ok(()) => storage.sync_dir(dir),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Writes the hint naming `last_base` as the last segment of the log in `dir`: to
/// `LASTSEG.tmp`, then renamed over `LASTSEG`. With `durable`, the file is synced before the
/// rename and the directory after it, so the hint is on disk before whatever the caller does
/// next (the writer creates the segment it names).
///
/// On failure the old hint is removed (best effort), so that it cannot outlive the segment the
/// caller goes on to create; the caller carries on without a hint (readers list the directory).
pub(crate) fn write_hint(
    storage: &dyn Storage,
    dir: &Path,
    hint: Hint,
    durable: bool,
) -> std::io::Result<()> {
    let tmp = dir.join(LASTSEG_TMP_FILE);
    let path = dir.join(LASTSEG_FILE);
    let written = (|| {
        let mut f = storage.create(&tmp, SIZE as u64)?;
        f.extend_to(SIZE as u64)?;
        f.write_at(0, &hint.encode())?;
        if durable {
            f.syncer().sync_data()?;
        }
        drop(f);
        storage.rename(&tmp, &path)?;
        if durable {
            storage.sync_dir(dir)?;
        }
        Ok(())
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hint_round_trips_and_any_flipped_byte_is_refused() {
        let plain = Hint {
            log_id: LogId([7; 16]),
            last_base: 123_456,
            tail: None,
        };
        let with_tail = Hint {
            tail: Some(HintTail {
                count: 12,
                last_offset: 4096,
                end: 5008,
                payload_schema: 3,
                capacity: 1 << 26,
            }),
            ..plain
        };
        for h in [plain, with_tail] {
            let b = h.encode();
            assert_eq!(Hint::decode(&b), Some(h));
            for i in 0..SIZE {
                let mut bad = b;
                bad[i] ^= 0x10;
                assert_eq!(Hint::decode(&bad), None, "byte {i} flipped");
            }
            assert_eq!(Hint::decode(&b[..SIZE - 1]), None);
        }
    }
}
