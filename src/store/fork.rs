//! Forking: a new session holding the first events of another, with its lineage recorded
//! (`parentSession`, `seedLength`). The parent is never changed; sealed segments are shared
//! through hard links, so a fork costs about one segment's copy whatever the parent's size.

use crate::error::{Error, Result};
use crate::event::archived::ArchivedEventData;
use crate::event::Opt;
use crate::log::{self, PrefixCopy};
use crate::session::{new_id, SessionMeta, SessionReader, SessionState};
use crate::util::now_ms;

use super::Store;

/// The prefix of the hidden folder a fork is built in.
/// Where a fork is built before it is renamed into place; `~` is not an id character, so such a
/// folder is never taken for a session.
pub(crate) const FORK_PREFIX: &str = ".fork~";

/// Where to fork.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForkPoint {
    /// After the first `n` events (seqs `0..n`).
    At(u64),
    /// Through the `turn/end` of turn `t`.
    Turn(u64),
}

/// What a fork did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForkReport {
    /// The new session's id.
    pub id: String,
    /// Events it starts with (its `seedLength`).
    pub events: u64,
    /// How the segments were shared or copied.
    pub copy: PrefixCopy,
}

/// The number of events through the `turn/end` of turn `turn`.
pub(crate) fn turn_end_len(reader: &SessionReader, turn: u64) -> Result<u64> {
    let mut last_turn = None;
    for event in reader.events() {
        let event = event?;
        if let ArchivedEventData::TurnEnd(end) = &event.data {
            let t = end.turn.to_native();
            if t == turn {
                return Ok(event.seq() + 1);
            }
            last_turn = Some(t);
        }
    }
    Err(Error::Invalid(match last_turn {
        Some(t) => format!("turn {turn} has no turn/end (the last turn that ended is {t})"),
        None => format!("turn {turn} has no turn/end (no turn of this session has ended)"),
    }))
}

impl Store {
    /// Creates session `id` (a new id when `None`) holding the first events of session `parent`
    /// up to `at`. Returns its id. Works while a writer appends to the parent.
    pub fn fork(&self, parent: &str, at: ForkPoint, id: Option<String>) -> Result<ForkReport> {
        self.fork_from(&self.open_reader(parent)?, at, id)
    }

    /// Like [`Store::fork`], from a session opened for reading (it may live in another store or
    /// directory; the new session is created in this store).
    pub fn fork_from(
        &self,
        reader: &SessionReader,
        at: ForkPoint,
        id: Option<String>,
    ) -> Result<ForkReport> {
        let parent = reader.meta().id.as_str();
        let n = match at {
            ForkPoint::At(n) => {
                if n > reader.len() {
                    return Err(Error::Invalid(format!(
                        "cannot fork at {n}: session {parent:?} holds {} events",
                        reader.len()
                    )));
                }
                n
            }
            ForkPoint::Turn(t) => turn_end_len(reader, t)?,
        };
        let id = id.unwrap_or_else(new_id);
        let parent_meta = reader.meta();
        let mut meta = SessionMeta::new(id.clone(), now_ms());
        meta.title = parent_meta.title.clone();
        meta.cwd = parent_meta.cwd.clone();
        meta.config = parent_meta.config.clone();
        meta.header_extra = parent_meta.header_extra.clone();
        meta.store_extra = parent_meta.store_extra.clone();
        meta.state = SessionState::Active;
        meta.parent_session = Opt::Present(parent_meta.id.clone());
        meta.seed_length = Opt::Present(n);
        let copy = self.build_session(&id, FORK_PREFIX, |temp| {
            crate::session::create_private_dir(temp)?;
            // Held while the fork is built, so a garbage collection leaves the folder alone.
            let _lock = log::lock_dir(temp)?;
            let copy = log::copy_prefix(reader.dir(), temp, n)?;
            meta.save(temp)?;
            let log_id = log::LogReader::open(temp).ok().and_then(|r| r.log_id());
            meta.write_logmeta(temp, log_id)?;
            Ok(copy)
        })?;
        Ok(ForkReport {
            id,
            events: n,
            copy,
        })
    }
}
