//! Options of a log, with their documented defaults.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::error::{Error, Result};
use super::format::HEADER_SIZE;
use super::io::{OsStorage, Storage};

/// How far an appended event has travelled when `append` returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// The event has reached the operating system (it is in the mapped segment, in the page
    /// cache). It survives a crash of the process (`kill -9`), not a power loss or a kernel crash.
    /// The default.
    #[default]
    Os,
    /// `append` returns after the event is on stable storage (fdatasync). Concurrent appenders
    /// share one fdatasync (group commit). Survives a power loss.
    Sync,
    /// Like [`Durability::Os`], plus a background thread that syncs every interval: a power loss
    /// loses at most about one interval of events.
    Periodic(Duration),
}

/// What opening a log does with damage it finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecoveryMode {
    /// Check every record of every segment, and change nothing: a torn tail or any damage is an
    /// error.
    Strict,
    /// Cut a torn tail (an incomplete last record, which a crash leaves behind), sync, and report
    /// it; a complete record that fails its checksum, or damage in a sealed segment, is an error.
    /// After a clean close only headers and index tails are read (damage inside a sealed segment
    /// shows when a reader reaches it); after a crash the active segment is checked record by
    /// record. The default.
    #[default]
    TolerateTornTail,
    /// Check every record of every segment; keep every valid record before the first damage and
    /// cut the rest. What is cut is reported, and the cut files are kept in the log's `damaged/`
    /// folder.
    Salvage,
}

/// Options of [`Log::open`](super::Log::open). Validated when the log is opened.
#[derive(Clone)]
pub struct Options {
    /// Create the log directory and its first segment when missing. Default: `true`.
    pub create: bool,
    /// Size at which a segment is sealed and a new one started, in bytes: a record (or a batch:
    /// the records of one `append_batch` always share a segment) that would take the segment past
    /// this size goes to a new segment (a record or batch larger than this gets a segment of its
    /// own). Between 1 KiB and 4 GiB − 1. Default: 64 MiB.
    pub segment_size: u64,
    /// The largest payload accepted, in bytes; a larger one is refused with
    /// [`Error::EventTooLarge`] and nothing is written. At most 1 GiB. Default: 16 MiB.
    pub max_event_size: u64,
    /// How far a segment file is allocated ahead of the writer, in bytes. Segment files grow in
    /// steps of this size (fallocate), so appends do not change file metadata, and a full disk is
    /// reported before any byte of an event is written. Default: 4 MiB.
    pub preallocate: u64,
    /// What `append` waits for. Default: [`Durability::Os`].
    pub durability: Durability,
    /// What opening does with damage. Default: [`RecoveryMode::TolerateTornTail`].
    pub recovery: RecoveryMode,
    /// Identifies the payload format; written into every segment header and checked at open.
    /// Default: `0` (opaque bytes).
    pub payload_schema: u32,
    /// The I/O seam every write goes through. Default: the operating system ([`OsStorage`]).
    pub storage: Arc<dyn Storage>,
    /// Compress each segment when it is sealed, in a background thread after the seal (see
    /// [`compress_segment`](super::compress_segment)): readers read cold segments
    /// transparently. Default: `false`.
    pub compress_sealed: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            create: true,
            segment_size: 64 << 20,
            max_event_size: 16 << 20,
            preallocate: 4 << 20,
            durability: Durability::Os,
            recovery: RecoveryMode::TolerateTornTail,
            payload_schema: 0,
            storage: Arc::new(OsStorage),
            compress_sealed: false,
        }
    }
}

impl fmt::Debug for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Options")
            .field("create", &self.create)
            .field("segment_size", &self.segment_size)
            .field("max_event_size", &self.max_event_size)
            .field("preallocate", &self.preallocate)
            .field("durability", &self.durability)
            .field("recovery", &self.recovery)
            .field("compress_sealed", &self.compress_sealed)
            .field("payload_schema", &self.payload_schema)
            .finish_non_exhaustive()
    }
}

impl Options {
    /// Sets [`Options::segment_size`].
    #[must_use]
    pub fn segment_size(mut self, bytes: u64) -> Self {
        self.segment_size = bytes;
        self
    }

    /// Sets [`Options::max_event_size`].
    #[must_use]
    pub fn max_event_size(mut self, bytes: u64) -> Self {
        self.max_event_size = bytes;
        self
    }

    /// Sets [`Options::durability`].
    #[must_use]
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Sets [`Options::recovery`].
    #[must_use]
    pub fn recovery(mut self, mode: RecoveryMode) -> Self {
        self.recovery = mode;
        self
    }

    /// Sets [`Options::create`].
    #[must_use]
    pub fn create(mut self, create: bool) -> Self {
        self.create = create;
        self
    }

    /// Sets [`Options::preallocate`].
    #[must_use]
    pub fn preallocate(mut self, bytes: u64) -> Self {
        self.preallocate = bytes;
        self
    }

    /// Sets [`Options::payload_schema`].
    #[must_use]
    pub fn payload_schema(mut self, schema: u32) -> Self {
        self.payload_schema = schema;
        self
    }

    /// Sets [`Options::compress_sealed`].
    #[must_use]
    pub fn compress_sealed(mut self, on: bool) -> Self {
        self.compress_sealed = on;
        self
    }

    /// Sets [`Options::storage`].
    #[must_use]
    pub fn storage(mut self, storage: Arc<dyn Storage>) -> Self {
        self.storage = storage;
        self
    }

    /// Checks the options; called by `Log::open`.
    pub fn validate(&self) -> Result<()> {
        const MIN_SEGMENT: u64 = 1 << 10;
        if self.segment_size < MIN_SEGMENT || self.segment_size > u64::from(u32::MAX) {
            return Err(Error::InvalidOptions(format!(
                "segment_size {} must be between {MIN_SEGMENT} and {} bytes",
                self.segment_size,
                u32::MAX
            )));
        }
        if self.max_event_size == 0 || self.max_event_size > MAX_EVENT_SIZE_LIMIT {
            return Err(Error::InvalidOptions(format!(
                "max_event_size {} must be between 1 and {MAX_EVENT_SIZE_LIMIT} bytes",
                self.max_event_size
            )));
        }
        if self.preallocate == 0 {
            return Err(Error::InvalidOptions(
                "preallocate must be at least 1 byte".into(),
            ));
        }
        if let Durability::Periodic(d) = self.durability {
            if d.is_zero() {
                return Err(Error::InvalidOptions(
                    "the periodic sync interval must be longer than zero".into(),
                ));
            }
        }
        Ok(())
    }

    /// The capacity of a new segment: the segment size, or more when the largest event would not
    /// fit in an empty segment of that size.
    pub(crate) fn segment_capacity(&self) -> u64 {
        self.segment_size
            .max(HEADER_SIZE as u64 + super::format::record_size(self.max_event_size))
    }
}

/// The largest [`Options::max_event_size`] accepted: 1 GiB.
pub const MAX_EVENT_SIZE_LIMIT: u64 = 1 << 30;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_documented_values() {
        let o = Options::default();
        o.validate().unwrap();
        assert_eq!(o.segment_size, 64 << 20);
        assert_eq!(o.max_event_size, 16 << 20);
        assert_eq!(o.durability, Durability::Os);
        assert_eq!(o.recovery, RecoveryMode::TolerateTornTail);
    }

    #[test]
    fn invalid_options_are_refused() {
        assert!(Options::default().segment_size(10).validate().is_err());
        assert!(Options::default().segment_size(1 << 40).validate().is_err());
        assert!(Options::default()
            .max_event_size(MAX_EVENT_SIZE_LIMIT + 1)
            .validate()
            .is_err());
        // A segment smaller than the largest event is fine: such an event gets a segment of its own.
        let o = Options::default()
            .segment_size(1 << 20)
            .max_event_size(4 << 20);
        o.validate().unwrap();
        assert!(o.segment_capacity() >= (4 << 20) + 64 + 16);
        assert!(Options::default().max_event_size(0).validate().is_err());
        assert!(Options::default()
            .durability(Durability::Periodic(Duration::ZERO))
            .validate()
            .is_err());
    }
}
