//! [`Session`]: a log plus its metadata, with the lifecycle rules checked on every append, the
//! turn state, the incremental projection, closing what a crash left open, and subscriptions.

use std::path::{Path, PathBuf};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};

use rkyv::util::AlignedVec;

use crate::error::{Error, Result};
use crate::event::{
    access_event, decode_event, encode_event, CompactEnd, Draft, Event, EventData, EventType, Map,
    Opt, ReasonKind, StepEnd, StepStart, SurfaceOp, ToolResult, TurnEnd, TurnEndReason,
};
use crate::log::{self, Durability, Log, RecoveryReport};
use crate::projection::{projector_wants, Messages, Projector};
use crate::util::{lock, now_ms};

use super::facts::Facts;
use super::id::validate_id;
use super::lifecycle::{Lifecycle, LifecycleError, OpenWork, TurnState};
use super::meta::{SessionMeta, SessionState};
use super::notice::{Notice, Subscribers};
use super::reader::SessionReader;
use super::PAYLOAD_SCHEMA;

/// Options of a session, with documented defaults.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// The storage engine's options (segment size, durability, recovery mode, maximum event
    /// size). Default: [`log::Options::default`]; the payload schema is always agentlog's.
    pub log: log::Options,
    /// Store `assistant/chunk` events. When false, appending a chunk stores nothing and returns
    /// `None` (the `assistant/message` then lists `sourceEventSeqs: []`). Default: `true`.
    pub keep_raw_chunks: bool,
    /// Redaction at append (docs/events.md §9): every event (and the metadata of a session
    /// created with these options) passes through it before anything reaches disk. Default:
    /// `None`, events are stored as given.
    pub redact: Option<Arc<crate::redact::Redactor>>,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            log: log::Options::default(),
            keep_raw_chunks: true,
            redact: None,
        }
    }
}

impl SessionOptions {
    fn log_options(&self, create: bool) -> log::Options {
        self.log
            .clone()
            .payload_schema(PAYLOAD_SCHEMA)
            .create(create)
    }
}

/// What opening a session found.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct OpenReport {
    /// What opening the log found and did (torn tail cut, indexes rebuilt, …).
    pub log: RecoveryReport,
    /// The turn state after opening.
    pub state: TurnState,
    /// What a crash left open (a turn, a step, unanswered calls, pending approvals).
    pub open_work: OpenWork,
    /// Lifecycle rules the stored events break (a log written by something that did not check
    /// them); the first few.
    pub violations: Vec<LifecycleError>,
    /// After a cut that left files in `damaged/` (a salvage): the valid events found there after
    /// the damage, per file, and the canonical JSONL file they were written to.
    pub salvaged: Vec<super::SalvagedEvents>,
}

struct Inner {
    lifecycle: Lifecycle,
    projector: Projector,
    buf: AlignedVec,
    last_time: i64,
}

/// A session opened for writing: one per session at a time (the log's lock).
///
/// Every append is checked against the lifecycle rules (docs/events.md §6) and the projection (§5)
/// before anything is written; a refused event leaves the session unchanged.
pub struct Session {
    dir: PathBuf,
    log: Log,
    meta: Mutex<SessionMeta>,
    /// `meta.state == Active`, kept with it by [`update_meta`](Session::update_meta): read by
    /// every append without taking the metadata's lock.
    writable: std::sync::atomic::AtomicBool,
    inner: Mutex<Inner>,
    keep_raw_chunks: bool,
    redact: Option<Arc<crate::redact::Redactor>>,
    durability: Durability,
    subscribers: Subscribers<Notice>,
    /// Checkpoints (`CHECKPOINT`): the log's seal count when the last one was started, and
    /// the thread writing one after a seal, if any.
    checkpoint: Mutex<CheckpointTask>,
    /// `checkpoint.seals` without its lock: an append that sealed nothing checks this alone.
    seals_seen: std::sync::atomic::AtomicU64,
    /// What opening found ([`Session::open_report`]).
    open_report: OpenReport,
}

#[derive(Default)]
struct CheckpointTask {
    seals: u64,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("dir", &self.dir)
            .field("len", &self.len())
            .finish()
    }
}

impl Session {
    /// Creates a new session in `dir` (which must not exist) with `meta`.
    pub fn create(
        dir: impl AsRef<Path>,
        mut meta: SessionMeta,
        options: SessionOptions,
    ) -> Result<Session> {
        let dir = dir.as_ref().to_path_buf();
        if let Some(r) = &options.redact {
            r.redact_meta(&mut meta);
        }
        validate_id(&meta.id)?;
        // Creating the folder claims the id: of two creates at once, the one that finds the
        // folder there is told the session exists (a check before creating it let both pass).
        match crate::util::create_private_dir_new(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(Error::Exists(meta.id.clone()))
            }
            Err(e) => return Err(Error::io("create directory", &dir, e)),
        }
        // The log first: a session whose session.json exists always has a segment, so a
        // session without one has lost it.
        let made = (|| -> Result<Log> {
            let log = Log::open(&dir, options.log_options(true))?;
            // What rebuilding session.json needs, beside the log, once, before session.json:
            // a crash between the two leaves a session whose session.json can be rebuilt.
            meta.write_logmeta(&dir, log.reader().log_id())?;
            meta.save(&dir)?;
            Ok(log)
        })();
        let log = match made {
            Ok(log) => log,
            Err(e) => {
                // Nothing of the session is written yet: the folder this create claimed goes,
                // so that the id is free again (a retry is not told the session exists).
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        let mut lifecycle = Lifecycle::new();
        // The calls of closed turns are read from the log when needed, not kept.
        lifecycle.read_past_calls_from(log.reader(), true);
        let mut projector = Projector::new();
        projector.forget_answered_calls_of_closed_turns(None);
        let inner = Inner {
            lifecycle,
            projector,
            buf: AlignedVec::new(),
            last_time: i64::MIN,
        };
        debug_assert!(log.recovery_report().created || log.recovery_report().events == 0);
        let report = OpenReport {
            log: log.recovery_report().clone(),
            state: inner.lifecycle.state(),
            open_work: inner.lifecycle.open_work(),
            violations: Vec::new(),
            salvaged: Vec::new(),
        };
        Ok(Session::from_parts(dir, log, meta, inner, &options, report))
    }

    fn from_parts(
        dir: PathBuf,
        log: Log,
        meta: SessionMeta,
        inner: Inner,
        options: &SessionOptions,
        open_report: OpenReport,
    ) -> Session {
        Session {
            dir,
            durability: options.log.durability,
            log,
            writable: std::sync::atomic::AtomicBool::new(meta.state == SessionState::Active),
            meta: Mutex::new(meta),
            inner: Mutex::new(inner),
            keep_raw_chunks: options.keep_raw_chunks,
            redact: options.redact.clone(),
            subscribers: Subscribers::new(),
            checkpoint: Mutex::new(CheckpointTask::default()),
            seals_seen: std::sync::atomic::AtomicU64::new(0),
            open_report,
        }
    }

    /// Opens the session in `dir` for writing: recovers the log as the options' recovery mode
    /// allows, then replays it to rebuild the lifecycle state and the projection. What opening
    /// found is the session's [`open_report`](Session::open_report).
    pub fn open(dir: impl AsRef<Path>, options: SessionOptions) -> Result<Session> {
        let dir = dir.as_ref().to_path_buf();
        let meta = SessionMeta::load(&dir)?;
        let log = Log::open(&dir, options.log_options(false))?;
        let log_report = log.recovery_report().clone();
        // Under the writer's lock no metadata write is under way: a temporary file is what a
        // failed or killed one left (best effort: it holds nothing the session needs).
        let _ = super::remove_stale_tmp(&dir);
        let salvaged = super::salvage::write_after_cuts(&dir, log.log_id())?;
        super::checkpoint::remove_stale_tmp(&dir);
        // From the newest valid checkpoint (a missing, stale or damaged one is ignored), then
        // only the events after it.
        let reader = log.reader();
        let mut derived = super::checkpoint::load_or_empty(&dir, &reader, reader.len(), true);
        derived.skip_projection = false;
        let mut violations = std::mem::take(&mut derived.violations);
        let mut lifecycle = derived.stats.lifecycle().clone();
        // The calls of closed turns are read from the log when needed, not kept.
        lifecycle.read_past_calls_from(log.reader(), true);
        let mut projector = std::mem::take(&mut derived.projector);
        projector.forget_answered_calls_of_closed_turns(lifecycle.last_end().map(|(t, _)| t));
        let mut last_time = derived.last_time;
        for rec in reader.range(derived.len..) {
            let rec = rec?;
            let event = access_event(rec.payload).map_err(|source| Error::Archive {
                seq: Some(rec.seq),
                source,
            })?;
            let facts = Facts::of_archived(event);
            if let Err(v) = lifecycle.check(&facts) {
                if violations.len() < super::checkpoint::MAX_VIOLATIONS {
                    violations.push(v);
                }
            }
            lifecycle.apply(&facts);
            last_time = last_time.max(event.time());
            if projector_wants(event.event_type()) {
                let owned = decode_event(event).map_err(|source| Error::Archive {
                    seq: Some(rec.seq),
                    source,
                })?;
                // A stored event the projection cannot place is left out of the history; the
                // lifecycle violation (if any) is reported above.
                let _ = projector.apply(&owned);
            }
        }
        let inner = Inner {
            lifecycle,
            projector,
            buf: AlignedVec::new(),
            last_time,
        };
        let report = OpenReport {
            log: log_report,
            state: inner.lifecycle.state(),
            open_work: inner.lifecycle.open_work(),
            violations,
            salvaged,
        };
        let session = Session::from_parts(dir, log, meta, inner, &options, report);
        let seals = session.log.seals();
        lock(&session.checkpoint).seals = seals;
        session
            .seals_seen
            .store(seals, std::sync::atomic::Ordering::Relaxed);
        Ok(session)
    }

    /// What opening the session found: the log's recovery report, the turn state and the work a
    /// crash left open at that time, lifecycle violations in the stored events, what a salvage
    /// found after a cut. A session just created reports an empty log and no open work.
    pub fn open_report(&self) -> &OpenReport {
        &self.open_report
    }

    /// The session's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The session id.
    pub fn id(&self) -> String {
        lock(&self.meta).id.clone()
    }

    /// A copy of the session's metadata.
    pub fn meta(&self) -> SessionMeta {
        lock(&self.meta).clone()
    }

    /// Changes the metadata (title, cwd, config, …) and writes `session.json` atomically. The id
    /// cannot change.
    pub fn update_meta(&self, f: impl FnOnce(&mut SessionMeta)) -> Result<()> {
        let mut meta = lock(&self.meta);
        let mut next = meta.clone();
        f(&mut next);
        next.id = meta.id.clone();
        next.save(&self.dir)?;
        self.writable.store(
            next.state == SessionState::Active,
            std::sync::atomic::Ordering::Release,
        );
        *meta = next;
        Ok(())
    }

    /// Events in the session.
    pub fn len(&self) -> u64 {
        self.log.len()
    }

    /// True when the session holds no event.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The turn state (docs/events.md §7).
    pub fn state(&self) -> TurnState {
        lock(&self.inner).lifecycle.state()
    }

    /// What is open: turn, step, unanswered calls, pending approvals, an open compaction.
    pub fn open_work(&self) -> OpenWork {
        lock(&self.inner).lifecycle.open_work()
    }

    /// A copy of the lifecycle bookkeeping (turn numbers, open calls, …).
    pub fn lifecycle(&self) -> Lifecycle {
        lock(&self.inner).lifecycle.clone()
    }

    /// The model-visible history now: an immutable snapshot, O(1) to take.
    pub fn messages(&self) -> Messages {
        lock(&self.inner).projector.messages()
    }

    /// The model-visible history when the log held `n` events
    /// ([`SessionReader::messages_at`]: from the newest checkpoint covering at most `n` events).
    pub fn messages_at(&self, n: u64) -> Result<Messages> {
        self.reader().messages_at(n)
    }

    /// A reader of this session that sees appends as they happen.
    pub fn reader(&self) -> SessionReader {
        SessionReader::attached(self.dir.clone(), self.meta(), self.log.reader())
    }

    /// Receives every appended event and lifecycle notice from now on.
    pub fn subscribe(&self) -> Receiver<Notice> {
        self.subscribers.subscribe()
    }

    /// Appends an event built from its payload: seq and time are set by the log, no
    /// `surfaceOp`, no `sourceEventSeqs`. Returns the seq (`None` for an `assistant/chunk` when
    /// raw chunks are not kept).
    pub fn append(&self, data: EventData) -> Result<Option<u64>> {
        self.append_draft(Draft {
            event: Event {
                seq: 0,
                time: 0,
                data,
                surface_op: None,
                source_event_seqs: None,
                extra: Map::new(),
            },
            seq: None,
            time: None,
        })
    }

    /// Appends an event with full control of its envelope: a given `seq` must be the session's
    /// length, a given `time` is kept (otherwise the clock's, never earlier than the last
    /// event's), `surfaceOp`, `sourceEventSeqs` and unknown members are stored as given.
    pub fn append_draft(&self, draft: Draft) -> Result<Option<u64>> {
        self.append_with(draft, self.durability)
    }

    /// Appends several events at once: every one is checked first (in order, each against the
    /// state the earlier ones leave), and if any is refused nothing is written.
    pub fn append_drafts(&self, drafts: Vec<Draft>) -> Result<Vec<Option<u64>>> {
        self.append_drafts_with(drafts, self.durability)
    }

    /// [`Session::append_draft`] with the durability of this one call: `Durability::Sync`
    /// returns once the event is on stable storage (sharing the fdatasync with concurrent
    /// appenders), `Durability::Os` once it is in the log, whatever the session's default.
    pub fn append_with(&self, draft: Draft, durability: Durability) -> Result<Option<u64>> {
        let (seq, end) = {
            let mut inner = lock(&self.inner);
            self.check_writable()?;
            match self.append_one_locked(&mut inner, draft)? {
                Some(seq) => (Some(seq), Some(seq + 1)),
                None => (None, None),
            }
        };
        if let (Some(end), Durability::Sync) = (end, durability) {
            self.log.sync_through(end)?;
        }
        if end.is_some() {
            self.checkpoint_after_seal();
        }
        Ok(seq)
    }

    /// [`append_locked`](Self::append_locked) for one event, with nothing it does not need: no
    /// vectors, one lifecycle summary, and one projection plan for both the check and the apply.
    /// Returns the event's seq (`None` for a chunk the session does not keep).
    fn append_one_locked(&self, inner: &mut Inner, draft: Draft) -> Result<Option<u64>> {
        let kind = draft.event.data.event_type();
        if !self.keep_raw_chunks && kind == Some(EventType::AssistantChunk) {
            check_dropped(&inner.lifecycle, draft)?;
            return Ok(None);
        }
        let mut event = draft.event;
        if let Some(r) = &self.redact {
            r.redact_event(&mut event);
        }
        event.seq = inner.lifecycle.len();
        check_given_seq(&inner.lifecycle, &event, draft.seq)?;
        event.time = draft.time.unwrap_or_else(|| now_ms().max(inner.last_time));
        check_shape(&event)?;
        let facts = Facts::of(&event);
        inner.lifecycle.check(&facts)?;
        // The plan no longer borrows the event: once written, its content moves into the
        // projection instead of being copied (the draft is ours, and nothing reads it after).
        let plan = if projector_wants(kind) {
            Some(
                inner
                    .projector
                    .check_plan(&event)
                    .map_err(|e| surface_error(&inner.lifecycle, &event, e))?
                    .detach(),
            )
        } else {
            None
        };
        let buf = &mut inner.buf;
        buf.clear();
        let start = encode_event(&event, buf).map_err(|source| Error::Archive {
            seq: Some(event.seq),
            source,
        })?;
        let seq = self.log.append_with(&buf[start..], Durability::Os)?;
        debug_assert_eq!(seq, event.seq);
        inner.lifecycle.apply(&facts);
        inner.last_time = inner.last_time.max(event.time);
        if self.subscribers.any() {
            // Subscribers get the whole event: the projection copies what it keeps.
            if let Some(plan) = plan {
                let mut copy = event.clone();
                inner.projector.apply_detached(&mut copy, plan);
            }
            self.notify(vec![event]);
        } else if let Some(plan) = plan {
            inner.projector.apply_detached(&mut event, plan);
        }
        Ok(Some(seq))
    }

    /// [`Session::append_drafts`] with the durability of this one call.
    pub fn append_drafts_with(
        &self,
        drafts: Vec<Draft>,
        durability: Durability,
    ) -> Result<Vec<Option<u64>>> {
        let (seqs, end) = {
            let mut inner = lock(&self.inner);
            self.check_writable()?;
            self.append_locked(&mut inner, drafts)?
        };
        // The fdatasync runs outside the session's lock, so that concurrent appenders share it
        // (group commit).
        if let (Some(end), Durability::Sync) = (end, durability) {
            self.log.sync_through(end)?;
        }
        if end.is_some() {
            self.checkpoint_after_seal();
        }
        Ok(seqs)
    }

    /// The durability of this handle's appends (the store's, or [`NewSession`]'s when it set
    /// one).
    ///
    /// [`NewSession`]: crate::store::NewSession
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// Returns once every event up to and including `seq` is on stable storage (an fdatasync
    /// shared with concurrent callers; at once when they are already). With it a caller can
    /// append order-dependent events under a lock of its own, with the default durability, and
    /// wait for their durability after releasing that lock.
    pub fn sync_through(&self, seq: u64) -> Result<()> {
        Ok(self.log.sync_through(seq.saturating_add(1))?)
    }

    /// Checks, writes and applies `drafts`; returns the seqs and the log's length after them
    /// (`None` when nothing was written).
    fn append_locked(
        &self,
        inner: &mut Inner,
        drafts: Vec<Draft>,
    ) -> Result<(Vec<Option<u64>>, Option<u64>)> {
        let single = drafts.len() == 1;
        // A batch is checked against copies of the state, so that nothing changes when a later
        // event is refused; a single event is checked against the state itself, no copy.
        let mut scratch = (!single).then(|| (inner.lifecycle.clone(), inner.projector.clone()));
        let batch = scratch.is_some();
        let mut last_time = inner.last_time;
        let mut events = Vec::with_capacity(drafts.len());
        let mut seqs = Vec::with_capacity(drafts.len());
        for draft in drafts {
            let kind = draft.event.data.event_type();
            let (lifecycle, projector) = match &mut scratch {
                Some((l, p)) => (l, p),
                None => (&mut inner.lifecycle, &mut inner.projector),
            };
            if !self.keep_raw_chunks && kind == Some(EventType::AssistantChunk) {
                check_dropped(lifecycle, draft)?;
                seqs.push(None);
                continue;
            }
            let mut event = draft.event;
            if let Some(r) = &self.redact {
                r.redact_event(&mut event);
            }
            event.seq = lifecycle.len();
            check_given_seq(lifecycle, &event, draft.seq)?;
            event.time = draft.time.unwrap_or_else(|| now_ms().max(last_time));
            check_shape(&event)?;
            let facts = Facts::of(&event);
            lifecycle.check(&facts)?;
            if projector_wants(kind) {
                projector
                    .check(&event)
                    .map_err(|e| surface_error(lifecycle, &event, e))?;
            }
            if batch {
                lifecycle.apply(&facts);
                if projector_wants(kind) {
                    projector
                        .apply(&event)
                        .map_err(|e| surface_error(lifecycle, &event, e))?;
                }
            }
            last_time = last_time.max(event.time);
            seqs.push(Some(event.seq));
            events.push(event);
        }
        if events.is_empty() {
            return Ok((seqs, None));
        }
        // Encode every event into one buffer, each archive 16-byte aligned.
        let buf = &mut inner.buf;
        buf.clear();
        let mut spans = Vec::with_capacity(events.len());
        for e in &events {
            let start = encode_event(e, buf).map_err(|source| Error::Archive {
                seq: Some(e.seq),
                source,
            })?;
            // An archive ends where it was written up to: its root sits at its very end, so the
            // padding before the next archive must not be part of it.
            spans.push(start..buf.len());
        }
        let payloads: Vec<&[u8]> = spans.iter().map(|r| &buf[r.clone()]).collect();
        let range = if let [one] = payloads.as_slice() {
            self.log
                .append_with(one, Durability::Os)
                .map(|s| s..s + 1)?
        } else {
            self.log.append_batch(&payloads)?
        };
        debug_assert_eq!(range.start, events[0].seq);
        match scratch {
            Some((lifecycle, projector)) => {
                inner.lifecycle = lifecycle;
                inner.projector = projector;
            }
            None => {
                for event in &events {
                    inner.lifecycle.apply(&Facts::of(event));
                    if projector_wants(event.data.event_type()) {
                        // Checked above, against this very state.
                        let _ = inner.projector.apply(event);
                    }
                }
            }
        }
        inner.last_time = last_time;
        if self.subscribers.any() {
            self.notify(events);
        }
        Ok((seqs, Some(range.end)))
    }

    fn check_writable(&self) -> Result<()> {
        if self.writable.load(std::sync::atomic::Ordering::Acquire) {
            return Ok(());
        }
        let meta = lock(&self.meta);
        match meta.state {
            SessionState::Active => Ok(()),
            SessionState::Archived => Err(Error::Archived(meta.id.clone())),
            SessionState::Deleted => Err(Error::Deleted(meta.id.clone())),
        }
    }

    fn notify(&self, events: Vec<Event>) {
        let mut notices = Vec::with_capacity(events.len() * 2);
        for event in events {
            let facts_notice = match &event.data {
                EventData::TurnStart(d) => Some(Notice::TurnStarted {
                    turn: d.turn,
                    seq: event.seq,
                }),
                EventData::TurnEnd(d) if d.reason.kind == ReasonKind::Completed => {
                    Some(Notice::TurnCompleted {
                        turn: d.turn,
                        seq: event.seq,
                    })
                }
                EventData::TurnEnd(d) => Some(Notice::TurnFailed {
                    turn: d.turn,
                    reason: d.reason.kind,
                    seq: event.seq,
                }),
                EventData::ToolCall(d) => Some(Notice::ToolInvoked {
                    call_id: d.call_id.clone(),
                    name: d.name.clone(),
                    seq: event.seq,
                }),
                EventData::ApprovalRequest(d) => Some(Notice::AwaitingConfirmation {
                    call_id: d.call_id.clone(),
                    tool: d.tool.clone(),
                    seq: event.seq,
                }),
                _ => None,
            };
            notices.push(Notice::Appended(Arc::new(event)));
            notices.extend(facts_notice);
        }
        self.subscribers.send(&notices);
    }

    /// Appends the closers of docs/events.md §7 for whatever is open, so the derived history is
    /// valid for a provider again and new work can start: an error `tool/result`
    /// (`error.code = "TOOL_OUTCOME_UNKNOWN"`) for each unanswered call of the open turn, then
    /// `step/end`, then `turn/end` with `reason` (normally [`ReasonKind::Interrupted`]); and a
    /// `compact/end` with `ok: false` for a compaction a crash left open.
    ///
    /// Results must be appended inside a step: when calls of an already closed step are
    /// unanswered and no step is open, a step is opened for them first. Returns the seqs
    /// appended (empty when nothing was open).
    pub fn close_open_work(&self, reason: ReasonKind) -> Result<Vec<u64>> {
        let (work, lifecycle) = {
            let inner = lock(&self.inner);
            (inner.lifecycle.open_work(), inner.lifecycle.clone())
        };
        let mut drafts = Vec::new();
        let draft = |data: EventData, surface: bool, sources: Option<Vec<u64>>| Draft {
            event: Event {
                seq: 0,
                time: 0,
                data,
                surface_op: surface.then_some(SurfaceOp::Append),
                source_event_seqs: sources,
                extra: Map::new(),
            },
            seq: None,
            time: None,
        };
        if let Some((turn, _)) = work.turn {
            let mut step = work.step.map(|(s, _)| s);
            if step.is_none() && !work.unanswered_calls.is_empty() {
                let s = lifecycle.next_step().unwrap_or(1);
                drafts.push(draft(
                    EventData::StepStart(StepStart {
                        turn,
                        step: s,
                        request: Opt::Absent,
                        extra: Map::new(),
                    }),
                    false,
                    None,
                ));
                step = Some(s);
            }
            if let Some(step) = step {
                for call in &work.unanswered_calls {
                    drafts.push(draft(
                        EventData::ToolResult(ToolResult::outcome_unknown(
                            turn,
                            step,
                            call.name.clone(),
                            call.call_id.clone(),
                            "The session was interrupted before this tool reported a result; its \
                             outcome is unknown.",
                            "the session stopped before the tool reported a result",
                        )),
                        true,
                        Some(vec![call.seq]),
                    ));
                }
                drafts.push(draft(
                    EventData::StepEnd(StepEnd {
                        turn,
                        step,
                        extra: Map::new(),
                    }),
                    false,
                    None,
                ));
            }
            drafts.push(draft(
                EventData::TurnEnd(TurnEnd {
                    turn,
                    reason: TurnEndReason {
                        kind: reason,
                        error: Opt::Absent,
                        extra: Map::new(),
                    },
                    extra: Map::new(),
                }),
                false,
                None,
            ));
        }
        if work.compaction.is_some() {
            drafts.push(draft(
                EventData::CompactEnd(CompactEnd {
                    ok: false,
                    extra: Map::new(),
                }),
                false,
                None,
            ));
        }
        let seqs = self.append_drafts(drafts)?;
        Ok(seqs.into_iter().flatten().collect())
    }

    /// Makes every appended event durable (fdatasync).
    pub fn sync(&self) -> Result<()> {
        Ok(self.log.sync()?)
    }

    /// The number of group-commit fdatasyncs this handle's log has made
    /// ([`Log::group_syncs`](crate::log::Log::group_syncs)): the events made durable divided
    /// by this is how many each fdatasync covered.
    pub fn group_syncs(&self) -> u64 {
        self.log.group_syncs()
    }

    /// Archives the session: it stays readable, appends are refused until it is unarchived.
    pub fn archive(&self) -> Result<()> {
        self.update_meta(|m| m.state = SessionState::Archived)
    }

    /// Makes an archived session writable again.
    pub fn unarchive(&self) -> Result<()> {
        self.update_meta(|m| m.state = SessionState::Active)
    }

    /// The last event's time, epoch milliseconds.
    pub fn last_event_time(&self) -> Option<i64> {
        let inner = lock(&self.inner);
        (!inner.lifecycle.is_empty()).then_some(inner.last_time)
    }

    /// Closes the session cleanly (the log is synced and marked closed) and brings its
    /// checkpoint up to date (best effort: a checkpoint is a cache, and failing to write one
    /// loses nothing).
    pub fn close(self) -> Result<()> {
        self.write_checkpoint_now();
        Ok(self.log.close()?)
    }

    /// Closes the session cleanly without bringing its checkpoint up to date: for a session an
    /// import has just built in a hidden folder, where a checkpoint would cost a file (an inode,
    /// a sync, a rename) per session for a cache its readers can do without (they derive from
    /// the log; the session's next writer writes one when it closes).
    pub(crate) fn close_without_checkpoint(self) -> Result<()> {
        if let Some(t) = lock(&self.checkpoint).thread.take() {
            let _ = t.join();
        }
        Ok(self.log.close()?)
    }

    /// Writes the checkpoint for every event appended so far, waiting for one being written
    /// after a seal first. Best effort: a checkpoint is a cache.
    fn write_checkpoint_now(&self) {
        let mut task = lock(&self.checkpoint);
        if let Some(t) = task.thread.take() {
            let _ = t.join();
        }
        let reader = self.log.reader();
        let _ = super::checkpoint::refresh(&self.dir, &reader, reader.len());
    }

    /// After an append: when the log sealed a segment since the last checkpoint, writes one in
    /// the background for the events up to now (one at a time; a seal while one is being
    /// written is covered by the next).
    fn checkpoint_after_seal(&self) {
        let seals = self.log.seals();
        if seals == self.seals_seen.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let mut task = lock(&self.checkpoint);
        if seals == task.seals || task.thread.as_ref().is_some_and(|t| !t.is_finished()) {
            return;
        }
        self.seals_seen
            .store(seals, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = task.thread.take() {
            let _ = t.join();
        }
        task.seals = seals;
        let reader = self.log.reader();
        let to = reader.len();
        let dir = self.dir.clone();
        task.thread = std::thread::Builder::new()
            .name("agentlog-checkpoint".into())
            .spawn(move || {
                // Best effort: a checkpoint is a cache.
                let _ = super::checkpoint::refresh(&dir, &reader, to);
            })
            .ok();
    }
}

/// A projection refusal as a lifecycle error (the rule "surfaceOp valid against the surface", or
/// an unresolvable tool result).
fn surface_error(
    lifecycle: &Lifecycle,
    event: &Event,
    e: crate::projection::ProjectError,
) -> Error {
    let rule = match e {
        crate::projection::ProjectError::UnresolvedToolResult { .. } => {
            super::Rule::ResultAnswersCall
        }
        crate::projection::ProjectError::AlreadyAnswered { .. } => super::Rule::AnsweredOnce,
        _ => super::Rule::SurfaceOpValid,
    };
    Error::Lifecycle(Box::new(LifecycleError {
        rule,
        seq: event.seq,
        type_name: event.type_name().to_string(),
        open: lifecycle.open_state(),
        detail: e.to_string(),
    }))
}

/// The checks of an `assistant/chunk` the session does not keep
/// ([`SessionOptions::keep_raw_chunks`] off): it is refused where a kept one would be (a given
/// seq that is not the next one, no step open, another turn or step, a `sourceEventSeqs` that
/// names no earlier event), and written nowhere when it passes. It would have had the next seq.
fn check_dropped(lifecycle: &Lifecycle, draft: Draft) -> Result<()> {
    let mut event = draft.event;
    event.seq = lifecycle.len();
    check_given_seq(lifecycle, &event, draft.seq)?;
    lifecycle.check(&Facts::of(&event))?;
    Ok(())
}

/// A seq the caller gave (`draft.seq`) must be the next one, `event.seq`: another is refused
/// by the lifecycle rule that names it, checked as the event at the seq given.
#[inline]
fn check_given_seq(lifecycle: &Lifecycle, event: &Event, given: Option<u64>) -> Result<()> {
    if let Some(given) = given.filter(|&g| g != event.seq) {
        let f = Facts {
            seq: given,
            ..Facts::of(event)
        };
        lifecycle.check(&f)?;
    }
    Ok(())
}

/// The shape rules the types cannot state, for events built in code (the JSONL codec refuses
/// the same with the line and member): a `turn/end`'s `reason.error` is `{code?, message}`
/// (docs/events.md §3), so its `message` is required.
fn check_shape(event: &Event) -> Result<()> {
    if let EventData::TurnEnd(d) = &event.data {
        if let Opt::Present(error) = &d.reason.error {
            if !matches!(error.message, Opt::Present(_)) {
                return Err(Error::Invalid(format!(
                    "turn/end at seq {}: reason.error has no message (docs/events.md §3: error = \
                     {{code?, message}}); nothing was written",
                    event.seq
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::parse_draft_line;

    fn ev(s: &Session, json: &str) {
        let d = parse_draft_line(json).unwrap_or_else(|e| panic!("{json}: {e}"));
        s.append_draft(d).unwrap_or_else(|e| panic!("{json}: {e}"));
    }

    fn turn(s: &Session, t: u64, calls: u64) {
        ev(
            s,
            &format!(r#"{{"type":"turn/start","data":{{"turn":{t}}}}}"#),
        );
        ev(
            s,
            &format!(r#"{{"type":"step/start","data":{{"turn":{t},"step":1}}}}"#),
        );
        for c in 0..calls {
            ev(
                s,
                &format!(
                    r#"{{"type":"tool/call","data":{{"turn":{t},"step":1,"callId":"c{c}","name":"ls","arguments":"{{}}"}}}}"#
                ),
            );
        }
        for c in 0..calls {
            ev(
                s,
                &format!(
                    r#"{{"type":"tool/result","data":{{"turn":{t},"step":1,"message":{{"role":"tool","toolName":"ls","content":"ok","isError":false}},"callId":"c{c}"}},"surfaceOp":"append"}}"#
                ),
            );
        }
        ev(
            s,
            &format!(r#"{{"type":"step/end","data":{{"turn":{t},"step":1}}}}"#),
        );
        ev(
            s,
            &format!(
                r#"{{"type":"turn/end","data":{{"turn":{t},"reason":{{"kind":"completed"}}}}}}"#
            ),
        );
    }

    /// The calls a writer keeps do not grow with the number of calls: those of closed turns
    /// are read from the log when a result names one, after a create and after an open.
    #[test]
    fn a_writer_keeps_no_call_of_a_closed_turn() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let s =
            Session::create(&path, SessionMeta::new("s", 0), SessionOptions::default()).unwrap();
        for t in 1..=50 {
            turn(&s, t, 4);
        }
        {
            let inner = lock(&s.inner);
            assert_eq!(inner.lifecycle.kept_calls(), 0);
            assert_eq!(inner.projector.answered_len(), 0);
        }
        ev(&s, r#"{"type":"turn/start","data":{"turn":51}}"#);
        ev(&s, r#"{"type":"step/start","data":{"turn":51,"step":1}}"#);
        ev(
            &s,
            r#"{"type":"tool/call","data":{"turn":51,"step":1,"callId":"x","name":"ls","arguments":"{}"}}"#,
        );
        assert_eq!(
            lock(&s.inner).lifecycle.kept_calls(),
            1,
            "the open turn's call"
        );
        // A result naming (by sourceEventSeqs) a call of turn 1 is still refused: the call is
        // found in the log.
        let err = s
            .append_draft(
                parse_draft_line(r#"{"type":"tool/result","data":{"turn":51,"step":1,"message":{"role":"tool","toolName":"ls","content":"ok","isError":false}},"surfaceOp":"append","sourceEventSeqs":[2]}"#)
                    .unwrap(),
            )
            .unwrap_err();
        assert!(
            err.to_string().contains("names a tool/call of turn 1"),
            "{err}"
        );
        drop(s);
        // Dropped without close: the open replays from the last checkpoint (or the start).
        let s = Session::open(&path, SessionOptions::default()).unwrap();
        let inner = lock(&s.inner);
        assert_eq!(inner.lifecycle.kept_calls(), 1);
        assert_eq!(inner.projector.answered_len(), 0);
    }
}
