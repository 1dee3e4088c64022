//! Group commit: the callers of one log that ask for durability share fdatasyncs
//! ([`Inner::sync_through`]), and every fdatasync holds a ticket so that a success counts only
//! once the fdatasyncs overlapping it have returned ([`Inner::sync_once`]).

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};

use super::{is_sync_error, Inner, Result};
use crate::log::error::Error;
use crate::log::format::IndexState;
use crate::util::{lock, unpoisoned};

pub(super) struct SyncState {
    /// Every record below this seq is on stable storage.
    pub(super) synced: u64,
    /// Group-commit fdatasyncs under way (at most [`MAX_SYNCS_IN_FLIGHT`]).
    in_flight: u32,
    /// Tickets handed out so far (the last one's), one per fdatasync of the active segment and
    /// per background seal: see [`Inner::sync_once`].
    issued: u64,
    /// Tickets of those not finished yet.
    running: Vec<u64>,
    /// Callers waiting (in [`Inner::wait_syncs_through`]) for tickets to be given back: an
    /// fdatasync that gives its ticket back wakes the waiters only when there are some (the
    /// group commit's followers would wake for nothing, before their records are durable).
    ticket_waiters: usize,
    /// The largest length an fdatasync under way (or done) covers: a caller whose records are
    /// below it waits for that one instead of starting its own.
    covering: u64,
    /// Background seals finished (successfully or not); compared with `Inner::seals`.
    seals_done: u64,
    /// The targets of the callers of [`Inner::sync_through`] waiting now (one entry each).
    waiters: Vec<u64>,
    /// How many callers the last group-commit fdatasync released (its leader among them):
    /// the callers the next leader gathers ([`Inner::sync_through`]).
    expected: usize,
    /// Callers that came to wait since the last group-commit fdatasync ended.
    arrived: usize,
    /// True while a leader gathers callers before its fdatasync (it counts as in flight).
    gathering: bool,
    /// Gatherings started so far (the current one's number while `gathering`).
    gathers: u64,
    /// The number of the last gathering whose count a caller completed: that caller leads the
    /// fdatasync itself (it is running; the leader would first have to be woken), and the
    /// leader, once it wakes, waits as a follower. (No gathering starts while one is under
    /// way, so a leader whose number is at most this one was taken over.)
    taken_over: u64,
    /// A moving average of the group-commit fdatasyncs' duration, in nanoseconds (0: none yet).
    sync_ns: u64,
    /// Group-commit fdatasyncs made ([`Log::group_syncs`]).
    pub(super) group_syncs: u64,
}

impl SyncState {
    /// The state of a log opened with every record below `synced` on stable storage.
    pub(super) fn new(synced: u64) -> SyncState {
        SyncState {
            synced,
            in_flight: 0,
            issued: 0,
            running: Vec::new(),
            ticket_waiters: 0,
            covering: 0,
            seals_done: 0,
            waiters: Vec::new(),
            expected: 0,
            arrived: 0,
            gathering: false,
            gathers: 0,
            taken_over: 0,
            sync_ns: 0,
            group_syncs: 0,
        }
    }

    /// A new ticket, held by an fdatasync (or a seal) until it returns: given back by removing
    /// it from `running`.
    pub(super) fn issue_ticket(&mut self) -> u64 {
        self.issued += 1;
        self.running.push(self.issued);
        self.issued
    }
}

/// Group-commit fdatasyncs of one log that may run at once. One: the callers that arrive while
/// it runs share the next one, and the next leader first gathers the callers the last one
/// released ([`Inner::sync_through`]). Two or more in flight (measured: two, four, one per
/// appending thread) each cover fewer events, and with the ticket rule a success waits for the
/// overlapping fdatasync to end as well (README, "Issue 14 targets", ³).
const MAX_SYNCS_IN_FLIGHT: u32 = 1;

/// The longest a leader waits to gather callers, as a fraction of the recent fdatasync time
/// (the gathering pays when it adds callers whose sync would otherwise cost one more
/// fdatasync) and at most [`MAX_GATHER`].
const GATHER_FRACTION: u64 = 2;

/// The longest a leader waits to gather callers, whatever the fdatasyncs take.
const MAX_GATHER: Duration = Duration::from_millis(2);

impl Inner {
    /// Group commit: a caller whose records an fdatasync under way covers waits for it; else
    /// it leads the next one, unless [`MAX_SYNCS_IN_FLIGHT`] run already (then it waits for one
    /// to end and looks again).
    ///
    /// A leader first gathers: the callers the last fdatasync released (its own leader
    /// among them) are appending their next records now, a few microseconds behind. Starting
    /// at once would cover only the callers that arrived while the last one ran (about half of
    /// N concurrent appenders), and the others would need an fdatasync of their own. So the
    /// leader waits until as many callers have arrived since the last one ended as it released,
    /// or a fraction of an fdatasync's time has passed ([`GATHER_FRACTION`], at most
    /// [`MAX_GATHER`]), whichever comes first. The caller that completes the count leads the
    /// fdatasync in the leader's place (it is running; waking the leader would add a wake-up to
    /// every fdatasync), and the leader, when it wakes, waits as a follower. A lone appender
    /// never waits: it is the one caller its last fdatasync released.
    pub(super) fn sync_through(&self, target: u64) -> Result<()> {
        let mut s = lock(&self.sync);
        if s.synced >= target {
            return Ok(());
        }
        s.waiters.push(target);
        s.arrived += 1;
        if s.gathering && s.arrived >= s.expected {
            // The last caller the leader waits for: it starts the fdatasync itself (below),
            // one wake-up sooner than the leader could; the leader becomes a follower.
            s.gathering = false;
            s.taken_over = s.gathers;
            self.gather_cv.notify_one();
        }
        let (mut s, result, wake) = self.wait_synced(s, target);
        if let Some(i) = s.waiters.iter().position(|&t| t == target) {
            s.waiters.swap_remove(i);
        }
        drop(s);
        if wake {
            // The callers this caller's fdatasync released, woken once the lock is free: each
            // takes it at once instead of queueing behind the others for it.
            self.sync_cv.notify_all();
        }
        result
    }

    /// [`Inner::sync_through`] once its caller is counted among the waiters. True with the
    /// result when the caller led the fdatasync that made its records durable: it must wake the
    /// other waiters once it has let go of the lock.
    fn wait_synced<'a>(
        &'a self,
        mut s: MutexGuard<'a, SyncState>,
        target: u64,
    ) -> (MutexGuard<'a, SyncState>, Result<()>, bool) {
        loop {
            if s.synced >= target {
                return (s, Ok(()), false);
            }
            if let Err(e) = self.check_poison() {
                return (s, Err(e), false);
            }
            if s.covering >= target || s.gathering || s.in_flight >= MAX_SYNCS_IN_FLIGHT {
                s = unpoisoned(self.sync_cv.wait(s));
                continue;
            }
            let (g, lead) = self.gather(s);
            s = g;
            if !lead {
                // The caller that completed the count leads this fdatasync.
                continue;
            }
            s.in_flight += 1;
            drop(s);
            let started = Instant::now();
            let result = self.sync_once();
            let took = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
            s = lock(&self.sync);
            s.in_flight -= 1;
            s.group_syncs += 1;
            s.sync_ns = if s.sync_ns == 0 {
                took
            } else {
                (s.sync_ns.saturating_mul(7) / 8).saturating_add(took / 8)
            };
            match result {
                Ok(len) => {
                    s.synced = s.synced.max(len);
                    let synced = s.synced;
                    s.expected = s.waiters.iter().filter(|&&t| t <= synced).count();
                    s.arrived = 0;
                    if synced >= target {
                        return (s, Ok(()), true);
                    }
                    self.sync_cv.notify_all();
                }
                Err(e) => {
                    self.poison(&e);
                    self.sync_cv.notify_all();
                    return (s, Err(e), false);
                }
            }
        }
    }

    /// A leader's wait for the callers the last fdatasync released ([`Inner::sync_through`]).
    /// False when the last of them took the lead over (the caller then waits as a follower).
    fn gather<'a>(&'a self, mut s: MutexGuard<'a, SyncState>) -> (MutexGuard<'a, SyncState>, bool) {
        if s.arrived >= s.expected || s.sync_ns == 0 {
            return (s, true);
        }
        let limit = Duration::from_nanos(s.sync_ns / GATHER_FRACTION).min(MAX_GATHER);
        let deadline = Instant::now() + limit;
        s.gathering = true;
        s.gathers += 1;
        let mine = s.gathers;
        while s.arrived < s.expected && s.taken_over < mine && !self.poisoned.load(Ordering::SeqCst)
        {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            s = unpoisoned(self.gather_cv.wait_timeout(s, deadline - now)).0;
        }
        if s.taken_over >= mine {
            return (s, false);
        }
        s.gathering = false;
        (s, true)
    }

    /// Waits (on the sync state's lock) until every fdatasync with a ticket up to `ticket` has
    /// returned.
    pub(super) fn wait_syncs_through<'a>(
        &self,
        mut s: MutexGuard<'a, SyncState>,
        ticket: u64,
    ) -> MutexGuard<'a, SyncState> {
        while s.running.iter().any(|&t| t <= ticket) {
            s.ticket_waiters += 1;
            s = unpoisoned(self.sync_cv.wait(s));
            s.ticket_waiters -= 1;
        }
        s
    }

    /// One fdatasync of the active segment, outside the append lock. Returns the length it
    /// made durable: the records of earlier segments are made durable by their seals, which it
    /// waits for.
    ///
    /// With several fdatasyncs of one file under way (a group-commit one and the
    /// segment's seal), a success alone does not prove the records durable: when write-back
    /// fails, Linux reports the error once per open file, to the first fdatasync that checks,
    /// which may be another one under way, and this one returns 0. So every fdatasync holds a
    /// ticket while it runs, and a success counts only once every ticket handed out before it
    /// returned has been given back, and the log is not poisoned (a failure poisons it before
    /// its ticket is given back).
    fn sync_once(&self) -> Result<u64> {
        self.check_poison()?;
        let ticket: u64;
        let (syncer, len, end, base, path, seals) = {
            let w = lock(&self.writer);
            // Seals started so far (each under this lock): the records before the active
            // segment are durable once these have finished.
            let seals = self.seals.load(Ordering::Acquire);
            // Waiters for records below `len` can wait for this sync rather than start one.
            {
                let mut s = lock(&self.sync);
                s.covering = s.covering.max(w.next_seq);
                ticket = s.issue_ticket();
            }
            // With no active segment (its creation failed), the retired one holds the last
            // records: it is synced instead.
            match w.active.as_ref().or(w.retired.as_ref()) {
                Some(a) => (
                    Some(Arc::clone(&a.syncer)),
                    w.next_seq,
                    a.end,
                    a.base,
                    a.seg_path.clone(),
                    seals,
                ),
                None => (None, w.next_seq, 0, 0, PathBuf::new(), seals),
            }
        };
        // Given back however this returns (the fdatasync, or its absence).
        let result = match &syncer {
            Some(syncer) => syncer
                .sync_data()
                .map_err(|e| Error::io("fdatasync", &path, e)),
            None => Ok(()),
        };
        {
            let mut s = lock(&self.sync);
            if let Err(e) = &result {
                self.poison(e);
            }
            s.running.retain(|&t| t != ticket);
            let last = s.issued;
            if s.ticket_waiters > 0 {
                self.sync_cv.notify_all();
            }
            drop(self.wait_syncs_through(s, last));
        }
        result?;
        self.check_poison()?;
        if syncer.is_some() {
            let mut w = lock(&self.writer);
            if let Some(a) = w.active.as_mut().filter(|a| a.base == base) {
                if end > a.synced_end {
                    a.synced_end = end;
                    a.write_index_header(IndexState::Open)?;
                }
            } else if let Some(a) = w.retired.as_mut().filter(|a| a.base == base) {
                a.synced_end = a.synced_end.max(end);
            }
        }
        // The records of the segments retired before `len` was taken are durable once their
        // seals (each an fdatasync of its segment) have finished.
        let mut s = lock(&self.sync);
        while s.seals_done < seals {
            self.check_poison()?;
            s = unpoisoned(self.sync_cv.wait(s));
        }
        drop(s);
        self.check_poison()?;
        Ok(len)
    }

    /// Records the end of a background seal. Its first step is the fdatasync of the segment's
    /// data: any later failure (the trim, the final index header) leaves the data durable, and
    /// the segment marked open on disk, which the next open checks.
    ///
    /// The seal holds a ticket like a group-commit fdatasync (given back here, after a failure
    /// has poisoned the writer), and its success counts only once every fdatasync under way
    /// when it ended has returned too ([`Inner::sync_once`] says why).
    pub(super) fn sealed(&self, result: Result<()>, len: u64, ticket: u64) {
        let mut s = lock(&self.sync);
        if let Err(e) = &result {
            if is_sync_error(e) {
                self.poison(e);
            }
        }
        s.running.retain(|&t| t != ticket);
        self.sync_cv.notify_all();
        if result.is_ok() {
            let issued = s.issued;
            s = self.wait_syncs_through(s, issued);
            if !self.poisoned.load(Ordering::SeqCst) {
                s.synced = s.synced.max(len);
            }
        }
        s.seals_done += 1;
        self.sync_cv.notify_all();
    }
}
