//! Search and statistics over the sessions of a store: [`Store::search`], [`Store::stats`].
//!
//! The filters, their exact meaning and the text matcher are documented on
//! [`Query`](crate::session::Query); the statistics on [`SessionStats`].

use std::ops::ControlFlow;

use crate::error::{Error, Result};
use crate::event::archived::ArchivedEvent;
use crate::event::Value;
use crate::session::{Query, SearchStats, SessionState, SessionStats};

use super::Store;

/// Statistics summed over the sessions of a store.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// The sessions counted.
    pub sessions: u64,
    /// Their statistics merged ([`SessionStats::merge`]: sums, and medians over every sample).
    pub total: SessionStats,
}

impl StoreStats {
    /// The JSON form `agentlog stats --all --json` prints: the object of
    /// [`SessionStats::to_json`] with a last member `"sessions"`.
    pub fn to_json(&self) -> Value {
        let mut value = self.total.to_json();
        if let Value::Object(map) = &mut value {
            // `to_json` has no member of that name.
            let _ = map.push("sessions", Value::from(self.sessions));
        }
        value
    }
}

impl Store {
    /// Searches the store: calls `on_match` with the session id and each event that matches
    /// `query`, sessions in id order (the query's sessions, else every session that is not
    /// deleted), events in seq order, until the query's limit is reached or `on_match` breaks.
    /// Each session is scanned once, in place ([`SessionReader::search`]); an event that does
    /// not match costs no allocation.
    ///
    /// A session the query names that does not exist is [`Error::NotFound`], one that is deleted
    /// [`Error::Deleted`]. A damaged session stops the search with its error (after the matches
    /// before the damage); [`Store::search_skipping`] goes on past it.
    ///
    /// [`SessionReader::search`]: crate::session::SessionReader::search
    pub fn search<F>(&self, query: &Query, on_match: F) -> Result<SearchStats>
    where
        F: FnMut(&str, &ArchivedEvent) -> ControlFlow<()>,
    {
        self.search_skipping(query, on_match, |_, e| Err(e))
    }

    /// [`Store::search`], handing the error of a session that cannot be read (damaged, or
    /// deleted or missing when the query names it) to `on_error` with its id: `Ok(())` skips
    /// that session (the matches before its damage were given already) and goes on, `Err` stops
    /// the search with that error.
    pub fn search_skipping<F, G>(
        &self,
        query: &Query,
        mut on_match: F,
        mut on_error: G,
    ) -> Result<SearchStats>
    where
        F: FnMut(&str, &ArchivedEvent) -> ControlFlow<()>,
        G: FnMut(&str, Error) -> Result<()>,
    {
        let (ids, named) = match query.sessions() {
            Some(ids) => {
                let mut ids = ids.to_vec();
                ids.sort();
                ids.dedup();
                (ids, true)
            }
            None => (self.ids(super::Deleted::Skip)?, false),
        };
        let mut stats = SearchStats::default();
        let mut remaining = query.max_matches();
        for id in &ids {
            if remaining == Some(0) {
                break;
            }
            let reader = match self.open_reader(id) {
                Ok(r) => r,
                Err(e) => {
                    on_error(id, e)?;
                    continue;
                }
            };
            if reader.meta().state == SessionState::Deleted {
                if named {
                    on_error(id, Error::Deleted(id.clone()))?;
                }
                continue;
            }
            let mut each = |e: &ArchivedEvent| on_match(id, e);
            match reader.search_into(query, &mut remaining, &mut stats, &mut each) {
                Ok(flow) if flow.is_break() => break,
                Ok(_) => {}
                Err(e) => on_error(id, e)?,
            }
        }
        Ok(stats)
    }

    /// The statistics of every session that is not deleted, summed. A damaged session stops it
    /// with its error; [`Store::stats_skipping`] leaves it out instead.
    pub fn stats(&self) -> Result<StoreStats> {
        self.stats_skipping(|_, e| Err(e))
    }

    /// [`Store::stats`], handing the error of a session that cannot be read to `on_error` with
    /// its id: `Ok(())` leaves that session out of the sums, `Err` stops with that error.
    pub fn stats_skipping<G>(&self, mut on_error: G) -> Result<StoreStats>
    where
        G: FnMut(&str, Error) -> Result<()>,
    {
        let mut all = StoreStats::default();
        for id in self.ids(super::Deleted::Skip)? {
            match self.open_reader(&id).and_then(|r| r.stats()) {
                Ok(stats) => {
                    all.total.merge(&stats);
                    all.sessions += 1;
                }
                Err(e) => on_error(&id, e)?,
            }
        }
        Ok(all)
    }
}
