//! Errors of the storage engine.

use std::fmt;
use std::io;
use std::path::PathBuf;

use super::format::HeaderError;

/// What is wrong with damaged bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CorruptionKind {
    /// A complete record whose checksum does not match its bytes.
    ChecksumMismatch {
        /// The checksum stored in the record header.
        expected: u32,
        /// The checksum computed over the record.
        got: u32,
    },
    /// A record header that no writer of this format produces (bad flags, impossible length).
    BadRecordHeader(String),
    /// A record with the wrong seq at this position.
    SeqMismatch {
        /// The seq this position must hold.
        expected: u64,
        /// The seq the record says it holds.
        found: u64,
    },
    /// The segment ends in the middle of a record, or a sealed segment ends early.
    Truncated(String),
    /// A segment or index header that cannot be read.
    BadHeader(HeaderError),
    /// A segment that belongs to another log.
    ForeignSegment {
        /// The log id of the other segments.
        expected: String,
        /// The log id in this segment.
        found: String,
    },
    /// Segments are not contiguous: seqs are missing between two segments.
    MissingSeqs {
        /// The first missing seq.
        from: u64,
        /// The seq the next segment starts at.
        to: u64,
    },
    /// Non-zero bytes after the end of the records of a sealed segment.
    TrailingBytes(u64),
    /// A segment file that must exist is missing; the text says how the log knows.
    MissingSegment(String),
    /// A cold (compressed) segment whose header, block index or a block is damaged: the text
    /// names the block and its seqs (see `docs/format.md`, "Cold segment file").
    CompressedBlock(String),
}

impl fmt::Display for CorruptionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CorruptionKind::ChecksumMismatch { expected, got } => write!(
                f,
                "checksum mismatch (stored {expected:#010x}, computed {got:#010x})"
            ),
            CorruptionKind::BadRecordHeader(s) => write!(f, "bad record header: {s}"),
            CorruptionKind::SeqMismatch { expected, found } => {
                write!(f, "record holds seq {found}, expected seq {expected}")
            }
            CorruptionKind::Truncated(s) => write!(f, "truncated: {s}"),
            CorruptionKind::BadHeader(h) => write!(f, "{h}"),
            CorruptionKind::ForeignSegment { expected, found } => write!(
                f,
                "segment belongs to another log (log id {found}, this log is {expected})"
            ),
            CorruptionKind::MissingSeqs { from, to } => {
                write!(
                    f,
                    "seqs {from} to {} are missing between segments",
                    to.saturating_sub(1)
                )
            }
            CorruptionKind::TrailingBytes(n) => {
                write!(f, "{n} unexpected bytes after the last record")
            }
            CorruptionKind::MissingSegment(why) => {
                write!(f, "the segment file is missing ({why})")
            }
            CorruptionKind::CompressedBlock(what) => write!(f, "damaged cold segment: {what}"),
        }
    }
}

/// Where damage was found: the file, the byte offset in it and the seq that lives (or should live) there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Corruption {
    /// The damaged file.
    pub path: PathBuf,
    /// Byte offset of the damage in that file.
    pub offset: u64,
    /// The seq at that offset, when known.
    pub seq: Option<u64>,
    /// What is wrong.
    pub kind: CorruptionKind,
}

impl fmt::Display for Corruption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte offset {}", self.path.display(), self.offset)?;
        if let Some(seq) = self.seq {
            write!(f, " (seq {seq})")?;
        }
        write!(f, ": {}", self.kind)
    }
}

impl std::error::Error for Corruption {}

/// An error of the storage engine.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// An I/O operation failed.
    Io {
        /// What the engine was doing.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// Damaged data. The log was not changed; [`RecoveryMode::Salvage`](super::RecoveryMode) can
    /// cut the log back to the last valid record before the damage.
    Corrupt(Box<Corruption>),
    /// A file written by another format version or archive layout; it was not read.
    Incompatible {
        /// The file.
        path: PathBuf,
        /// What differs.
        reason: String,
    },
    /// The recovery mode refuses to repair a torn tail (strict mode).
    TornTail(Box<Corruption>),
    /// Another writer holds the log's lock.
    Locked {
        /// The lock file.
        path: PathBuf,
        /// What the holder wrote into the lock file (its process id), when readable.
        holder: Option<String>,
    },
    /// An earlier fdatasync failed: the page cache can no longer be trusted, so the writer refuses
    /// further writes. Reopen the log to recover from what is on disk.
    Poisoned {
        /// The failure that poisoned the writer.
        cause: String,
    },
    /// An event larger than the configured maximum; nothing was written.
    EventTooLarge {
        /// The size of the refused event in bytes.
        size: u64,
        /// The configured maximum in bytes.
        max: u64,
    },
    /// Invalid [`Options`](super::Options).
    InvalidOptions(String),
    /// No log at this path (and `create` was off).
    NotFound(PathBuf),
    /// A seq beyond the end of the log.
    SeqOutOfRange {
        /// The requested seq.
        seq: u64,
        /// The number of events in the log.
        len: u64,
    },
    /// The log was opened read-only, or the writer was closed.
    Closed,
    /// A segment that cannot be compressed because it may still change: its index does not
    /// say it is sealed or closed cleanly.
    NotSealed(PathBuf),
}

impl Error {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Error {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }

    pub(crate) fn corrupt(
        path: impl Into<PathBuf>,
        offset: u64,
        seq: Option<u64>,
        kind: CorruptionKind,
    ) -> Error {
        Error::Corrupt(Box::new(Corruption {
            path: path.into(),
            offset,
            seq,
            kind,
        }))
    }

    /// The damage this error reports, if it is about damaged data.
    pub fn corruption(&self) -> Option<&Corruption> {
        match self {
            Error::Corrupt(c) | Error::TornTail(c) => Some(c),
            _ => None,
        }
    }

    /// True when the operating system reported a full disk.
    pub fn is_disk_full(&self) -> bool {
        matches!(self, Error::Io { source, .. } if is_storage_full(source))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { op, path, source } => {
                write!(f, "{op} {}: {source}", path.display())?;
                if is_storage_full(source) {
                    write!(
                        f,
                        " (the disk is full; nothing was written, free space and retry)"
                    )?;
                }
                Ok(())
            }
            Error::Corrupt(c) => write!(f, "corrupt log: {c}"),
            Error::Incompatible { path, reason } => {
                write!(f, "cannot read {}: {reason}", path.display())
            }
            Error::TornTail(c) => write!(
                f,
                "torn tail (strict recovery refuses to cut it): {c}; open with the default \
                 recovery mode to truncate it"
            ),
            Error::Locked { path, holder } => {
                write!(f, "the log is locked by another writer: {}", path.display())?;
                if let Some(h) = holder {
                    write!(f, " (held by {h})")?;
                }
                Ok(())
            }
            Error::Poisoned { cause } => write!(
                f,
                "the writer is poisoned by an earlier failed fdatasync ({cause}); reopen the log"
            ),
            Error::EventTooLarge { size, max } => write!(
                f,
                "event of {size} bytes exceeds the maximum event size of {max} bytes \
                 (max_event_size: a store sets it in its agentlog.toml, at most 1 GiB); nothing \
                 was written"
            ),
            Error::InvalidOptions(s) => write!(f, "invalid options: {s}"),
            Error::NotFound(p) => write!(f, "no log at {}", p.display()),
            Error::SeqOutOfRange { seq, len } => {
                write!(f, "seq {seq} is out of range (the log holds {len} events)")
            }
            Error::Closed => write!(f, "the log is closed for writing"),
            Error::NotSealed(p) => write!(
                f,
                "cannot compress {}: it is not sealed or closed cleanly (a writer may append to it)",
                p.display()
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Corrupt(c) | Error::TornTail(c) => {
                let c: &Corruption = c;
                Some(c)
            }
            _ => None,
        }
    }
}

/// A full disk (or quota), as the operating system reports it: `ENOSPC`/`EDQUOT`.
fn is_storage_full(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    )
}

/// Result of the storage engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;
