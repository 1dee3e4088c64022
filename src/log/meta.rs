//! `LOGMETA`: a write-once, checksummed blob of metadata beside a log's segments.
//!
//! The engine treats the blob as opaque bytes; agentlog's sessions keep in it what rebuilding
//! their `session.json` needs. The file is a 64-byte header, then the blob:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `AGLOGMTA` |
//! | 8 | 2 | format version (1), u16 LE |
//! | 10 | 2 | header size (64), u16 LE |
//! | 12 | 4 | reserved, zero |
//! | 16 | 16 | log id of the segments it was written beside (zeros when there were none) |
//! | 32 | 8 | blob length, u64 LE |
//! | 40 | 4 | crc32 of the blob |
//! | 44 | 16 | reserved, zero |
//! | 60 | 4 | crc32 of bytes 0..60 |
//!
//! It is written once ([`write_meta`]): to `LOGMETA.tmp`, synced, linked to `LOGMETA` (which
//! fails if the file exists), the directory synced. [`read_meta`] checks everything and names the
//! file and byte offset of what is wrong.

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::error::{CorruptionKind, Error, Result};
use super::format::{u32_at, u64_at, HeaderError, LogId};
use super::reader::LogReader;

/// The name of the metadata file in a log directory.
pub const LOGMETA_FILE: &str = "LOGMETA";

const MAGIC: [u8; 8] = *b"AGLOGMTA";
const VERSION: u16 = 1;
const HEADER: usize = 64;
/// A blob larger than this is refused (it is a few KiB of metadata, not data).
pub const MAX_META_LEN: usize = 16 << 20;

/// Where [`write_meta`] prepares the file (a crash may leave it; it is never read).
pub const LOGMETA_TMP_FILE: &str = "LOGMETA.tmp";

fn tmp_name() -> &'static str {
    LOGMETA_TMP_FILE
}

fn header(log_id: Option<LogId>, blob: &[u8]) -> [u8; HEADER] {
    let mut b = [0u8; HEADER];
    b[0..8].copy_from_slice(&MAGIC);
    b[8..10].copy_from_slice(&VERSION.to_le_bytes());
    b[10..12].copy_from_slice(&(HEADER as u16).to_le_bytes());
    if let Some(id) = log_id {
        b[16..32].copy_from_slice(&id.0);
    }
    b[32..40].copy_from_slice(&(blob.len() as u64).to_le_bytes());
    b[40..44].copy_from_slice(&crc32fast::hash(blob).to_le_bytes());
    let crc = crc32fast::hash(&b[..60]);
    b[60..64].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Writes `blob` as the metadata of the log in `dir` (which must exist), once: a `LOGMETA` that
/// exists already is never replaced ([`std::io::ErrorKind::AlreadyExists`]). `log_id` is the
/// log's id when it has segments. Durable when it returns; a failure leaves no temporary file.
pub fn write_meta(dir: &Path, log_id: Option<LogId>, blob: &[u8]) -> Result<()> {
    if blob.len() > MAX_META_LEN {
        return Err(Error::InvalidOptions(format!(
            "log metadata of {} bytes is larger than the maximum of {MAX_META_LEN}",
            blob.len()
        )));
    }
    let path = dir.join(LOGMETA_FILE);
    let tmp = dir.join(tmp_name());
    // A temporary file a crash left: never the metadata itself.
    match std::fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io("remove", &tmp, e)),
    }
    let written = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc_o_nofollow())
            .open(&tmp)
            .map_err(|e| Error::io("create", &tmp, e))?;
        f.write_all(&header(log_id, blob))
            .and_then(|()| f.write_all(blob))
            .and_then(|()| f.sync_all())
            .map_err(|e| Error::io("write", &tmp, e))?;
        // A link fails when the target exists: write-once without a window.
        std::fs::hard_link(&tmp, &path).map_err(|e| Error::io("create", &path, e))
    })();
    let removed = std::fs::remove_file(&tmp);
    written?;
    removed.map_err(|e| Error::io("remove", &tmp, e))?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io("sync directory", dir, e))
}

/// `O_NOFOLLOW`: a symlink named `LOGMETA` is refused, never followed.
fn libc_o_nofollow() -> i32 {
    rustix::fs::OFlags::NOFOLLOW.bits() as i32
}

/// The log id `LOGMETA` in `dir` records, when its header is sound and names one: where a
/// salvage whose first segment header is damaged finds the log's id.
pub(crate) fn recorded_log_id(dir: &Path) -> Option<LogId> {
    let mut f = OpenOptions::new()
        .read(true)
        .custom_flags(libc_o_nofollow())
        .open(dir.join(LOGMETA_FILE))
        .ok()?;
    let mut b = [0u8; HEADER];
    f.read_exact(&mut b).ok()?;
    let sound = b[0..8] == MAGIC && u32_at(&b, 60) == crc32fast::hash(&b[..60]);
    let mut id = [0u8; 16];
    id.copy_from_slice(&b[16..32]);
    (sound && id != [0u8; 16]).then_some(LogId(id))
}

/// Reads the metadata blob of the log in `dir`: `None` when there is no `LOGMETA`. Every byte is
/// checked (magic, version, both checksums, the length, and the log id against the segments when
/// both are known); damage is [`Error::Corrupt`] naming the file and byte offset.
pub fn read_meta(dir: &Path) -> Result<Option<Vec<u8>>> {
    let path = dir.join(LOGMETA_FILE);
    let mut f = match OpenOptions::new()
        .read(true)
        .custom_flags(libc_o_nofollow())
        .open(&path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("open", &path, e)),
    };
    let mut bytes = Vec::new();
    Read::by_ref(&mut f)
        .take((HEADER + MAX_META_LEN + 1) as u64)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io("read", &path, e))?;
    let bad = |offset: u64, kind: CorruptionKind| Error::corrupt(&path, offset, None, kind);
    let bad_header = |offset: u64, h: HeaderError| bad(offset, CorruptionKind::BadHeader(h));
    if bytes.len() < HEADER {
        return Err(bad(
            0,
            CorruptionKind::BadHeader(HeaderError::Short(bytes.len())),
        ));
    }
    if bytes[0..8] != MAGIC {
        return Err(bad_header(0, HeaderError::BadMagic));
    }
    let stored = u32_at(&bytes, 60);
    let got = crc32fast::hash(&bytes[..60]);
    if stored != got {
        return Err(bad_header(
            60,
            HeaderError::Checksum {
                expected: stored,
                got,
            },
        ));
    }
    let version = u16::from_le_bytes([bytes[8], bytes[9]]);
    if version != VERSION {
        return Err(Error::Incompatible {
            path,
            reason: format!(
                "log metadata format version {version} (this build reads version {VERSION})"
            ),
        });
    }
    let size = u16::from_le_bytes([bytes[10], bytes[11]]);
    if usize::from(size) != HEADER {
        return Err(bad_header(
            10,
            HeaderError::Invalid(format!("header size {size} (expected {HEADER})")),
        ));
    }
    let len = u64_at(&bytes, 32);
    let have = (bytes.len() - HEADER) as u64;
    if len != have {
        return Err(if have < len {
            bad(
                bytes.len() as u64,
                CorruptionKind::Truncated(format!(
                    "the metadata blob holds {have} of its {len} bytes"
                )),
            )
        } else {
            bad(
                HEADER as u64 + len,
                CorruptionKind::TrailingBytes(have - len),
            )
        });
    }
    let blob = bytes.split_off(HEADER);
    let expected = u32_at(&bytes, 40);
    let got = crc32fast::hash(&blob);
    if expected != got {
        return Err(bad(
            HEADER as u64,
            CorruptionKind::ChecksumMismatch { expected, got },
        ));
    }
    let mut stored_id = [0u8; 16];
    stored_id.copy_from_slice(&bytes[16..32]);
    if stored_id != [0u8; 16] {
        // The segments' id, when they can be read: a LOGMETA copied in from another log is
        // damage, not this log's metadata.
        if let Some(id) = LogReader::open(dir).ok().and_then(|r| r.log_id()) {
            if id.0 != stored_id {
                return Err(bad(
                    16,
                    CorruptionKind::ForeignSegment {
                        expected: id.to_string(),
                        found: LogId(stored_id).to_string(),
                    },
                ));
            }
        }
    }
    Ok(Some(blob))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::{Log, Options};

    /// Written once, read back byte for byte; a second write is refused and changes nothing.
    #[test]
    fn writes_once_and_reads_back() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        assert_eq!(read_meta(dir).unwrap(), None);
        write_meta(dir, None, b"hello").unwrap();
        assert_eq!(read_meta(dir).unwrap().as_deref(), Some(&b"hello"[..]));
        let err = write_meta(dir, None, b"other").unwrap_err();
        assert!(
            matches!(&err, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::AlreadyExists),
            "{err}"
        );
        assert_eq!(read_meta(dir).unwrap().as_deref(), Some(&b"hello"[..]));
        assert!(!dir.join(tmp_name()).exists());
    }

    /// Every single-bit flip of the file is detected, and the error names the file and an
    /// offset inside it (a flip must never change what is read).
    #[test]
    fn every_bit_flip_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        write_meta(dir, Some(LogId([7; 16])), br#"{"header":{"id":"x"}}"#).unwrap();
        let path = dir.join(LOGMETA_FILE);
        let good = std::fs::read(&path).unwrap();
        for i in 0..good.len() * 8 {
            let mut b = good.clone();
            b[i / 8] ^= 1 << (i % 8);
            std::fs::write(&path, &b).unwrap();
            match read_meta(dir) {
                Err(Error::Corrupt(c)) => {
                    assert_eq!(c.path, path);
                    assert!(c.offset <= good.len() as u64, "bit {i}: {c}");
                }
                Err(Error::Incompatible { path: p, .. }) => assert_eq!(p, path),
                other => panic!("bit {i}: {other:?}"),
            }
        }
        // Cut short, or with bytes added.
        for b in [
            &good[..good.len() - 1],
            &good[..10],
            &[good.clone(), vec![0]].concat()[..],
        ] {
            std::fs::write(&path, b).unwrap();
            assert!(matches!(read_meta(dir), Err(Error::Corrupt(_))));
        }
    }

    /// A LOGMETA written beside another log's segments is refused, naming both log ids.
    #[test]
    fn refuses_the_metadata_of_another_log() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("log");
        let log = Log::open(&dir, Options::default()).unwrap();
        log.append(b"x").unwrap();
        let id = log.reader().log_id().unwrap();
        log.close().unwrap();
        write_meta(&dir, Some(LogId([9; 16])), b"m").unwrap();
        let err = read_meta(&dir).unwrap_err();
        assert!(err.to_string().contains(&id.to_string()), "{err}");
        std::fs::remove_file(dir.join(LOGMETA_FILE)).unwrap();
        write_meta(&dir, Some(id), b"m").unwrap();
        assert_eq!(read_meta(&dir).unwrap().as_deref(), Some(&b"m"[..]));
    }
}
