//! agentlog: append-only, checksummed, memory-mapped logs for LLM agent sessions.
//!
//! A session is a log of typed events (docs/events.md): appends are checked against the lifecycle
//! rules, and everything else — the history a model sees, the turn state, statistics — is
//! derived from the log. The layers, each usable on its own:
//!
//! - [`event`]: the typed events, their lossless JSON values and the canonical JSONL codec;
//! - [`log`]: the storage engine (segments of checksummed rkyv records, seq index, recovery,
//!   durability modes, zero-copy readers in any process);
//! - [`session`]: a log with its header, lifecycle rules, turn state, resume and replay;
//! - [`projection`]: the derived history (`messages()` / `messages_at(n)`), incremental, and its
//!   provider renderings;
//! - [`redact`]: secrets and personal data redacted at append, scanned for, rewritten away;
//! - [`store`]: many sessions in one directory: create, import, fork, list, search, stats;
//! - `ship` (the `nats` feature): sessions shipped to a NATS JetStream stream and restored
//!   from it on any host.
//!
//! ```
//! use agentlog::event::{parse_draft_line, Block, TurnStart, UserMessage};
//! use agentlog::session::TurnState;
//! use agentlog::{EventData, NewSession, Store};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let store = Store::open(dir.path())?;
//! let session = store.create(NewSession::default().title("demo"))?;
//!
//! // Typed events: the log assigns seq and time; members not given take their defaults
//! // (optional ones absent, `extra` empty). Each event is checked before it is written.
//! session.append(EventData::TurnStart(TurnStart { turn: 1, ..Default::default() }))?;
//! let hi = UserMessage { content: vec![Block::text("Hi")], ..Default::default() };
//! session.append(EventData::UserMessage(hi))?;
//! // Or JSONL lines without seq and time.
//! session.append_draft(parse_draft_line(r#"{"type":"step/start","data":{"turn":1,"step":1}}"#)?)?;
//! assert_eq!(session.state(), TurnState::Inferring);
//! // A second turn/start while turn 1 is open breaks a lifecycle rule: refused, nothing written.
//! assert!(session
//!     .append_draft(parse_draft_line(r#"{"type":"turn/start","data":{"turn":2}}"#)?)
//!     .is_err());
//! assert_eq!(session.len(), 3);
//!
//! // The model-visible history, derived from the log.
//! let messages = session.messages().to_value().to_string();
//! assert_eq!(messages, r#"[{"role":"user","content":[{"type":"text","text":"Hi"}]}]"#);
//!
//! // Canonical JSONL out; any process can read while the writer appends.
//! let mut jsonl = Vec::new();
//! session.reader().export(&mut jsonl, agentlog::session::HeaderLine::Omit, |_| {})?;
//! assert_eq!(String::from_utf8(jsonl)?.lines().count(), 3);
//! session.close()?;
//! # Ok(())
//! # }
//! ```
#![deny(unsafe_code)]
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]
#![warn(missing_docs)]

mod error;
pub mod event;
pub mod import;
pub mod log;
pub mod projection;
/// The module's former name: everything is in [`projection`] now.
#[deprecated(note = "renamed: use `agentlog::projection`")]
pub mod project {
    pub use crate::projection::*;
}
pub mod redact;
pub mod session;
#[cfg(feature = "nats")]
pub mod ship;
pub mod store;
mod util;

pub use error::{Error, Result};

// The everyday types at the root: a program that appends to and reads sessions needs only
// `use agentlog::{...}`; the modules hold the rest.
pub use event::{Draft, Event, EventData};
pub use session::{Session, SessionReader};
pub use store::{NewSession, Store};
