//! Sessions on top of a log: metadata (`session.json`), the lifecycle rules checked on every
//! append (docs/events.md §6), the turn state (§7), the incremental projection (§5), closing what a
//! crash left open, subscriptions, search ([`Query`], [`SessionReader::search`]) and statistics
//! ([`SessionStats`], [`SessionReader::stats`]).
//!
//! A session lives in one directory: `session.json` beside the log's segment and index files.
//! [`Session`] is the one writer; [`SessionReader`] reads from any thread or process.
//!
//! ```
//! use agentlog::event::{Block, EventData, ReasonKind, TurnEnd, TurnStart, UserMessage};
//! use agentlog::session::{Session, SessionMeta, SessionOptions, TurnState};
//!
//! let dir = tempfile::tempdir()?;
//! let session = Session::create(dir.path().join("s1"), SessionMeta::new("s1", 0), SessionOptions::default())?;
//! // Members not given take their defaults: optional ones absent, `extra` empty.
//! session.append(EventData::TurnStart(TurnStart { turn: 1, ..Default::default() }))?;
//! assert_eq!(session.state(), TurnState::Pending);
//! session.append(EventData::UserMessage(UserMessage {
//!     content: vec![Block::text("hello")],
//!     ..Default::default()
//! }))?;
//! // A second turn/start while turn 1 is open breaks a lifecycle rule: nothing is written.
//! let err = session.append(EventData::TurnStart(TurnStart { turn: 2, ..Default::default() })).unwrap_err();
//! assert!(err.to_string().contains("turn/start only when no turn is open"));
//! session.append(EventData::TurnEnd(TurnEnd::new(1, ReasonKind::Completed)))?;
//! assert_eq!(session.len(), 3);
//! assert_eq!(session.messages().len(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub(crate) mod checkpoint;
mod facts;
mod id;
mod json;
mod lifecycle;
mod meta;
mod notice;
mod reader;
mod replay;
mod salvage;
mod search;
mod stats;
mod writer;

use std::path::Path;

pub use checkpoint::{CheckpointCheck, CHECKPOINT_FILE, CHECKPOINT_TMP_PREFIX};
pub use id::{new_id, validate_id, MAX_ID_LEN};
pub use lifecycle::{CallInfo, Lifecycle, LifecycleError, OpenState, OpenWork, Rule, TurnState};
pub(crate) use meta::remove_stale_tmp;
pub use meta::{is_session_dir, MetaRepair, SessionMeta, SessionState, META_FILE, META_TMP_FILE};
pub use notice::Notice;
pub use reader::{HeaderLine, RecordSize, SessionReader};
pub use replay::{
    replay, CallReport, ReplayCall, ReplayReport, StepReport, ToolExecutor, ToolOutput,
};
pub use salvage::SalvagedEvents;
pub use search::{Query, SearchStats, TextMatcher, TypeFilter};
pub use stats::{Durations, SessionStats, StatsCollector, Tokens, ToolStats};
pub use writer::{OpenReport, Session, SessionOptions};

pub(crate) use notice::Subscribers;

/// The payload schema of agentlog session logs (written in every segment header): the rkyv
/// archive of [`Event`](crate::event::Event). Its layout is versioned by the segment's format
/// version ([`FORMAT_VERSION`](crate::log::FORMAT_VERSION)): version 2 changed it.
pub const PAYLOAD_SCHEMA: u32 = 1;

/// Creates a directory (and its parents) with mode 0700.
pub(crate) fn create_private_dir(dir: &Path) -> crate::Result<()> {
    crate::util::create_private_dir(dir).map_err(|e| crate::Error::io("create directory", dir, e))
}
