//! The error of the session and store layers (the event and log layers have their own, which
//! this one wraps).

use std::fmt;
use std::path::PathBuf;

use crate::event::{ArchiveError, ParseError};
use crate::log;
use crate::projection::ProjectError;
use crate::session::LifecycleError;

/// An error of agentlog's session and store layers.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The storage engine failed (I/O, damage, lock, poisoned writer, event too large, …).
    Log(log::Error),
    /// An event was refused by a lifecycle rule (docs/events.md §6); nothing was written.
    Lifecycle(Box<LifecycleError>),
    /// A JSONL line was refused (import, append from text); nothing was written.
    Parse(ParseError),
    /// An event could not be encoded, or a stored record is not a valid event archive.
    Archive {
        /// The seq of the record, when reading.
        seq: Option<u64>,
        /// What failed.
        source: ArchiveError,
    },
    /// A session id that is not `[A-Za-z0-9._-]{1,128}`.
    InvalidId(String),
    /// No session with this id (or at this path).
    NotFound(String),
    /// A session with this id exists already.
    Exists(String),
    /// The session is archived: it can be read, not appended to (unarchive it first).
    Archived(String),
    /// The session is deleted (it will be removed for good by the next garbage collection).
    Deleted(String),
    /// A file of the session or store could not be read or written.
    Io {
        /// What was being done.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A `session.json` or `agentlog.toml` that cannot be understood.
    BadFile {
        /// The file.
        path: PathBuf,
        /// What is wrong, with its line where known.
        reason: String,
    },
    /// A session's `session.json` is missing (beside a log), is not valid, or fails its
    /// checksum. The session's events are not affected; [`SessionMeta::repair`] rebuilds the
    /// file from the log's metadata (`LOGMETA`) where the session has one.
    ///
    /// [`SessionMeta::repair`]: crate::session::SessionMeta::repair
    BrokenMeta {
        /// The `session.json` file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A value the caller gave is not acceptable (a bad option, a fork point beyond the end, …).
    Invalid(String),
    /// An import refused the event of one line: `source` says why (an event too large, a value
    /// refused, …), keeping its type.
    Import {
        /// The line of the imported file (1-based).
        line: u64,
        /// Why the event of that line was refused.
        source: Box<Error>,
    },
    /// The NATS server, the network or the stream failed or refused (shipping, restoring).
    Remote(String),
    /// A stored event the projection refuses (a log written without the rules, docs/events.md
    /// §5): the model-visible history up to it cannot be derived. `source` says why.
    Project {
        /// The seq of the stored event.
        seq: u64,
        /// Why the projection refused it.
        source: ProjectError,
    },
}

impl Error {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }

    /// The lifecycle refusal, if this is one.
    pub fn lifecycle(&self) -> Option<&LifecycleError> {
        match self {
            Error::Lifecycle(e) => Some(e),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Log(e) => e.fmt(f),
            Error::Lifecycle(e) => write!(f, "{e}; nothing was written"),
            Error::Parse(e) => write!(f, "{e}; nothing was written"),
            Error::Archive {
                seq: Some(s),
                source,
            } => write!(f, "event at seq {s}: {source}"),
            Error::Archive { seq: None, source } => source.fmt(f),
            Error::InvalidId(id) => write!(
                f,
                "invalid session id {id:?}: an id is 1 to 128 characters from A-Z a-z 0-9 . _ -, \
                 and not . or .. (never a path)"
            ),
            Error::NotFound(id) => write!(f, "no session {id:?}"),
            Error::Exists(id) => write!(f, "a session {id:?} exists already"),
            Error::Archived(id) => write!(
                f,
                "session {id:?} is archived and refuses appends; unarchive it to write again"
            ),
            Error::Deleted(id) => write!(f, "session {id:?} is deleted"),
            Error::Io { op, path, source } => write!(f, "{op} {}: {source}", path.display()),
            Error::BadFile { path, reason } => write!(f, "{}: {reason}", path.display()),
            Error::BrokenMeta { path, reason } => write!(f, "{}: {reason}", path.display()),
            Error::Invalid(s) => f.write_str(s),
            Error::Import { line, source } => write!(f, "line {line}: {source}"),
            Error::Remote(s) => f.write_str(s),
            Error::Project { seq, source } => f.write_str(&stored_event_refused(*seq, source)),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Log(e) => Some(e),
            Error::Lifecycle(e) => Some(e.as_ref()),
            Error::Parse(e) => Some(e),
            Error::Archive { source, .. } => Some(source),
            Error::Io { source, .. } => Some(source),
            Error::Import { source, .. } => Some(source.as_ref()),
            Error::Project { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<log::Error> for Error {
    fn from(e: log::Error) -> Self {
        Error::Log(e)
    }
}

impl From<LifecycleError> for Error {
    fn from(e: LifecycleError) -> Self {
        Error::Lifecycle(Box::new(e))
    }
}

impl From<ParseError> for Error {
    fn from(e: ParseError) -> Self {
        Error::Parse(e)
    }
}

/// The message of a stored event the projection refused: what [`Error::Project`] displays and
/// what a checkpoint stores (its format keeps the text only).
pub(crate) fn stored_event_refused(seq: u64, error: &ProjectError) -> String {
    format!("the stored event at seq {seq}: {error}")
}

/// Result of the session and store layers.
pub type Result<T, E = Error> = std::result::Result<T, E>;
