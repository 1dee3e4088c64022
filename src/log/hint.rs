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
//!
//! The tail is written when the writer closes the log cleanly (and dropped when a writer opens
//! it; both in place, [`rewrite_hint_in_place`]): with it, a reader finds the last record with one `pread` of the segment, without its
//! index (`src/log/tail.rs`). It is a claim checked before it is used: the record there must
//! check (checksum, seq `base + count - 1`), end where the tail says, and be followed by no
//! record (zero bytes or the end of the file) and no segment (`base + count` does not exist).

use std::fs::OpenOptions;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::format::{u32_at, u64_at, LogId};
use super::io::Storage;

/// The name of the hint file in a log directory.
pub const LASTSEG_FILE: &str = "LASTSEG";
/// Where the writer prepares the hint (a crash may leave it; it is never read).
pub const LASTSEG_TMP_FILE: &str = "LASTSEG.tmp";

const MAGIC: [u8; 8] = *b"AGLOGTAL";
const VERSION: u16 = 1;
const SIZE: usize = 64;

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

impl Hint {
    fn encode(&self) -> [u8; SIZE] {
        let mut b = [0u8; SIZE];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..10].copy_from_slice(&VERSION.to_le_bytes());
        b[10..12].copy_from_slice(&(SIZE as u16).to_le_bytes());
        b[16..32].copy_from_slice(&self.log_id.0);
        b[32..40].copy_from_slice(&self.last_base.to_le_bytes());
        if let Some(t) = &self.tail {
            b[12..16].copy_from_slice(&FLAG_TAIL.to_le_bytes());
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
        let tail = (u32_at(b, 12) == FLAG_TAIL)
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
///
/// Three system calls: open, one read, close. The read asks for one byte more than a hint
/// holds: a regular file's read returns fewer bytes than asked only at its end, so 64 bytes
/// back is the whole file (the writer replaces the file by a rename, never in place).
pub(crate) fn read_hint(dir: &Path) -> Option<Hint> {
    let mut path = PathBuf::from(dir);
    path.push(LASTSEG_FILE);
    let mut f = OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(&path)
        .ok()?;
    let mut b = [0u8; SIZE + 1];
    let n = loop {
        match f.read(&mut b) {
            Ok(n) => break n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    };
    Hint::decode(&b[..n])
}

/// Rewrites the existing hint in place with `hint` (the writer's close adds the tail): one
/// `pwrite` of 64 bytes over the file's 64, so nothing is allocated (on a full disk, and on a
/// full tmpfs, where a reader's read of a hole needs a free page, this takes none). Never
/// creates the file, never synced: a cache whose claims readers check; a reader that reads it
/// half written finds its checksum wrong and does without it.
pub(crate) fn rewrite_hint_in_place(dir: &Path, hint: Hint) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut path = PathBuf::from(dir);
    path.push(LASTSEG_FILE);
    let f = OpenOptions::new()
        .write(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(&path)?;
    if f.metadata()?.len() != SIZE as u64 {
        return Err(std::io::Error::other("not a whole hint"));
    }
    f.write_all_at(&hint.encode(), 0)
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
