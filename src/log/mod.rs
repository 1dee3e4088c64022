//! The storage engine: segments of checksummed records, a seq index per segment, crash
//! recovery, one writer with group commit, and zero-copy readers.
//!
//! The engine stores opaque payloads (agentlog's sessions store rkyv archives of events) and
//! knows nothing of sessions. The byte format is documented in [`format`](self#on-disk-format)
//! and in `docs/format.md`.
//!
//! # On-disk format
//!
//! ```text
//! <log dir>/
//!     00000000000000000000.seg   segment: 64-byte header, then 16-byte aligned records
//!     00000000000000000000.idx   its index: 64-byte header, then one u32 offset per record
//!     00000000000000052311.seg   the next segment, named by its base seq
//!     LOCK                       held by the one writer
//!     LOGMETA                    write-once metadata of the log's user (see read_meta)
//!     LASTSEG                    a checksummed hint naming the last segment (a cache)
//! ```
//!
//! # Example
//!
//! ```
//! use agentlog::log::{Log, LogReader, Options};
//!
//! let dir = tempfile::tempdir()?;
//! let log = Log::open(dir.path().join("log"), Options::default())?;
//! assert!(log.recovery_report().created);
//! let seq = log.append(b"hello")?;
//! assert_eq!(seq, 0);
//! log.append_batch(&[b"a".as_slice(), b"b".as_slice()])?;
//!
//! // A reader in this process sees appends as they happen.
//! let reader = log.reader();
//! assert_eq!(reader.get(0)?.payload, b"hello");
//! assert_eq!(reader.iter().count(), 3);
//! log.close()?;
//!
//! // Any process can read, also while a writer appends.
//! let reader = LogReader::open(dir.path().join("log"))?;
//! assert_eq!(reader.len(), 3);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub(crate) mod cold;
mod error;
mod fork;
mod format;
mod hint;
mod io;
mod lock;
mod meta;
mod mmap;
mod open;
mod options;
mod readahead;
mod reader;
mod recovery;
mod salvage;
mod segment;
#[cfg(feature = "sim")]
pub mod sim;
mod tail;
mod verify;
mod writer;

pub use cold::{
    compress_log, compress_segment, Compressed, BLOCK_TARGET, COLD_MAGIC, COLD_VERSION,
};
pub use error::{Corruption, CorruptionKind, Error, Result};
pub use fork::{copy_prefix, PrefixCopy};
pub use format::{HeaderError, IndexState, LogId, FORMAT_VERSION, MAX_SEQ};
pub use hint::{LASTSEG_FILE, LASTSEG_TMP_FILE};
/// The bytes a record with a payload of `len` bytes takes in a segment (16-byte header,
/// payload, zero padding to a multiple of 16).
pub fn record_size_on_disk(len: u64) -> u64 {
    format::record_size(len)
}

pub use io::{refuse_symlink, OsStorage, Storage, StorageFile, Syncer};
pub(crate) use lock::lock_dir;
pub use lock::LOCK_FILE;
pub use meta::{read_meta, write_meta, LOGMETA_FILE, LOGMETA_TMP_FILE, MAX_META_LEN};
pub use open::{Cut, RecoveryReport, DAMAGED_DIR};
pub use options::{Durability, Options, RecoveryMode};
pub(crate) use readahead::vouched;
pub use reader::{Iter, LogReader, Record};
pub(crate) use recovery::refuse_corruption;
pub use recovery::{Damage, DamageClass};
pub(crate) use salvage::take_pending;
pub use salvage::{SalvageSource, SalvagedRecords};
pub use verify::{verify, IndexCheck, SegmentCheck, VerifyReport};
pub use writer::Log;
