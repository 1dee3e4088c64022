//! Many machines: sessions shipped to a NATS JetStream stream, and restored from it anywhere
//! (the `nats` cargo feature; the command line turns it on).
//!
//! Each host keeps writing its sessions locally; [`Remote::ship`] publishes every event of a
//! session, in seq order, to the subject `agentlog.<session>.events` of a JetStream stream, its
//! payload the event's canonical JSON line (docs/events.md §4, without the newline), with the headers
//! `Agentlog-Session`, `Agentlog-Seq` and `Nats-Msg-Id` = `<session>:<seq>` (JetStream drops a
//! message whose id it has seen within its duplicate window). The session's metadata (its
//! `session.json` object: header, state, config) goes to `agentlog.<session>.meta` whenever it
//! changes (title, archive, delete). A `.` in a session id is written `~` in a subject (ids never
//! hold `~`); the headers carry the id as it is.
//!
//! A session's **ship cursor** (the next seq to ship) is kept in the store, in
//! `<store>/ship/<stream>/<session>`, written atomically (a temporary file, synced, renamed). It
//! moves past an event only once the stream has acknowledged it, so a crash, a lost network or
//! a restarted server never loses an event: the next ship starts again at the cursor. What was
//! acknowledged after the cursor's last write is found in the stream (its last seq of the
//! session, when the stream holds exactly the seqs before it), and anything published again
//! within the duplicate window is dropped by its `Nats-Msg-Id`: no gap, no duplicate.
//!
//! [`Remote::restore`] rebuilds sessions in a local store from the stream: the restored
//! session's `export --header` is the source's, byte for byte. [`Remote::follow`] and
//! [`Remote::restore_follow`] keep going: new appends and new sessions are shipped (restored) as
//! they come.
//!
//! The API is async (tokio). A program without a runtime of its own uses [`runtime`]:
//!
//! ```no_run
//! use agentlog::ship::{runtime, Remote, ShipOptions};
//! use agentlog::store::Store;
//!
//! # fn main() -> Result<(), agentlog::Error> {
//! let store = Store::open("/var/lib/agent/.agentlog")?;
//! let rt = runtime()?;
//! rt.block_on(async {
//!     let remote = Remote::connect("nats://127.0.0.1:4222", ShipOptions::default()).await?;
//!     for id in store.ids(agentlog::store::Deleted::Skip)? {
//!         let report = remote.ship(&store, &id).await?;
//!         println!("{id}: {} events shipped", report.shipped);
//!     }
//!     Ok(())
//! })
//! # }
//! ```

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fs::OpenOptions;
use std::future::Future;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, consumer, context::PublishAckFuture, stream};
use async_nats::HeaderMap;
use futures_util::StreamExt;

use crate::error::{Error, Result};
use crate::event::{parse_event_line, Draft, JsonlWriter};
use crate::session::{Session, SessionMeta, SessionReader, SessionState};
use crate::store::{ImportOptions, Store};

/// The stream used when none is named.
pub const DEFAULT_STREAM: &str = "AGENTLOG";
/// The first token of every subject.
pub const SUBJECT_PREFIX: &str = "agentlog";
/// The header naming the session of a message.
pub const HEADER_SESSION: &str = "Agentlog-Session";
/// The header giving the seq of an event message.
pub const HEADER_SEQ: &str = "Agentlog-Seq";
/// The folder of the ship cursors in a store.
pub const SHIP_DIR: &str = "ship";

/// How often [`Remote::follow`] looks at every session: new sessions, metadata changes (a
/// listing of the store and a read of each `session.json`) and new appends.
const FOLLOW_POLL: Duration = Duration::from_millis(50);
/// How often [`Remote::follow`] looks at the lengths of the sessions it shipped events of
/// lately (a refresh of an open reader: an atomic load in the appender's process, two `fstat`s
/// and a `stat` elsewhere), so that an agent's next append ships within a few ms instead of up
/// to [`FOLLOW_POLL`].
const FOLLOW_WAKE: Duration = Duration::from_millis(5);
/// How long a session counts as appended to lately (looked at every [`FOLLOW_WAKE`]) after it
/// last shipped an event.
const FOLLOW_HOT: Duration = Duration::from_secs(10);
/// How often [`Remote::follow`] writes a cursor while events keep coming.
const CURSOR_EVERY: u64 = 8192;

/// How to ship.
#[derive(Debug, Clone)]
pub struct ShipOptions {
    /// The stream's name (created when missing). Default: [`DEFAULT_STREAM`].
    pub stream: String,
    /// The replicas of a stream created here (1 to 5). Default: 1.
    pub replicas: usize,
    /// Publishes whose acknowledgement is awaited at most at once. Default: 1024.
    pub window: usize,
    /// How long a ship retries after the server or the network fails (reconnecting, publishing
    /// again from the last acknowledged event) before it gives up. Default: 60 s.
    pub retry_for: Duration,
}

impl Default for ShipOptions {
    fn default() -> Self {
        ShipOptions {
            stream: DEFAULT_STREAM.to_string(),
            replicas: 1,
            window: 1024,
            retry_for: Duration::from_secs(60),
        }
    }
}

/// What shipping a session did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShipReport {
    /// Events published and acknowledged by this call.
    pub shipped: u64,
    /// The session's cursor afterwards: every event before it is in the stream.
    pub cursor: u64,
    /// True when the session's metadata was published (new, or changed since the last ship).
    pub meta: bool,
}

/// What restoring did, per session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RestoreReport {
    /// The local session id.
    pub id: String,
    /// Events appended by this call.
    pub restored: u64,
    /// The local session's length afterwards.
    pub len: u64,
}

/// A session's shipping state in a store ([`status`], and with the stream's side
/// [`Remote::status`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShipStatus {
    /// The session id.
    pub id: String,
    /// Events shipped (acknowledged by the stream): the cursor.
    pub shipped: u64,
    /// Events in the local log (`None` when the session is deleted or cannot be read).
    pub local: Option<u64>,
    /// What the stream holds of the session ([`Remote::status`]; `None` from [`status`], which
    /// asks no server).
    pub stream: Option<RemoteState>,
}

/// What a stream holds of one session ([`Remote::remote_state`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteState {
    /// Event messages of the session in the stream.
    pub events: u64,
    /// The seq of the last one (`None` when there is none).
    pub last_seq: Option<u64>,
}

/// Which sessions to follow.
#[derive(Debug, Clone)]
pub enum Sessions {
    /// Every session, new ones too.
    All,
    /// These ids.
    Ids(Vec<String>),
}

impl Sessions {
    fn contains(&self, id: &str) -> bool {
        match self {
            Sessions::All => true,
            Sessions::Ids(ids) => ids.iter().any(|i| i == id),
        }
    }
}

/// A tokio runtime (one thread) for callers without one of their own.
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Remote(format!("cannot start the async runtime: {e}")))
}

fn remote(what: impl std::fmt::Display, e: impl std::fmt::Display) -> Error {
    Error::Remote(format!("{what}: {e}"))
}

/// The JetStream error codes with which a stream refuses a message for good: retrying the
/// publish gives the same answer until someone changes the stream or the account. The stream
/// is full and discards new messages, or its store failed (10077: "maximum messages exceeded",
/// "maximum bytes exceeded", …); the message or its headers exceed the stream's limit (10054,
/// 10097); the account's storage or memory is used up (10002, 10047, 10028).
const REFUSED_FOR_GOOD: [jetstream::ErrorCode; 6] = [
    jetstream::ErrorCode::STREAM_STORE_FAILED,
    jetstream::ErrorCode::STREAM_MESSAGE_EXCEEDS_MAXIMUM,
    jetstream::ErrorCode::STREAM_HEADER_EXCEEDS_MAXIMUM,
    jetstream::ErrorCode::ACCOUNT_RESOURCES_EXCEEDED,
    jetstream::ErrorCode::STORAGE_RESOURCES_EXCEEDED,
    jetstream::ErrorCode::MEMORY_RESOURCES_EXCEEDED,
];

/// A failed publish of `what` to stream `stream`: [`Error::Invalid`] when the stream refused
/// the message for good ([`REFUSED_FOR_GOOD`]; not retried), else [`Error::Remote`] (the
/// server or the network: retried for [`ShipOptions::retry_for`]).
fn publish_error(
    what: impl std::fmt::Display,
    stream: &str,
    e: jetstream::context::PublishError,
) -> Error {
    let refusal = std::error::Error::source(&e)
        .and_then(|s| s.downcast_ref::<jetstream::Error>())
        .filter(|j| REFUSED_FOR_GOOD.contains(&j.error_code()));
    match refusal {
        Some(j) => Error::Invalid(format!(
            "{what}: stream {stream} refused it: {j}; publishing again would not help: make room \
             in the stream (its limits, `discard`) or the account, then ship again"
        )),
        None => remote(what, e),
    }
}

/// True when one of a stream's subject filters takes every subject `agentlog.<token>.<tail>`
/// (a session's events or metadata: [`events_subject`], [`meta_subject`]).
fn takes_all(filters: &[String], tail: &str) -> bool {
    filters.iter().any(|filter| {
        let tokens: Vec<&str> = filter.split('.').collect();
        let want = [Some(SUBJECT_PREFIX), None, Some(tail)];
        for (i, w) in want.iter().enumerate() {
            match tokens.get(i).copied() {
                Some(">") => return true,
                Some("*") => {}
                Some(t) if *w == Some(t) => {}
                _ => return false,
            }
        }
        tokens.len() == want.len()
    })
}

/// The subject token of a session id (`.` is written `~`).
pub fn subject_token(id: &str) -> String {
    id.replace('.', "~")
}

/// The subject of a session's events.
pub fn events_subject(id: &str) -> String {
    format!("{SUBJECT_PREFIX}.{}.events", subject_token(id))
}

/// The subject of a session's metadata.
pub fn meta_subject(id: &str) -> String {
    format!("{SUBJECT_PREFIX}.{}.meta", subject_token(id))
}

fn check_stream_name(name: &str) -> Result<()> {
    if name.is_empty()
        || name.len() > 64
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(Error::Invalid(format!(
            "invalid stream name {name:?}: 1 to 64 characters from A-Z a-z 0-9 _ -"
        )));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The cursor

/// A session's ship cursor, as kept in `<store>/ship/<stream>/<session>`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Cursor {
    /// The next seq to ship.
    shipped: u64,
    /// How many metadata messages were published (the id of the next is
    /// `<session>:meta:<n+1>:<checksum>`).
    meta_version: u64,
    /// The checksum of the metadata last published.
    meta_crc: Option<u32>,
    /// The id of the local log the events were shipped from (hex; `None` in a cursor written
    /// before it was kept). Another log under the session's id (recreated, or rewritten by
    /// `redact` or `purge`) is not shipped onto the stream's copy of the first.
    log: Option<String>,
}

const CURSOR_MAGIC: &str = "agentlog ship cursor 1";

fn cursor_path(store: &Store, stream: &str, id: &str) -> Result<PathBuf> {
    // The id is checked (never a path).
    store.session_dir(id)?;
    Ok(store.root().join(SHIP_DIR).join(stream).join(id))
}

impl Cursor {
    fn load(path: &Path) -> Result<Option<Cursor>> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("read", path, e)),
        };
        let bad = |reason: &str| Error::BadFile {
            path: path.to_path_buf(),
            reason: format!("not a ship cursor ({reason}); remove it to ship the session again"),
        };
        let mut lines = text.lines();
        if lines.next() != Some(CURSOR_MAGIC) {
            return Err(bad("first line"));
        }
        let shipped = lines
            .next()
            .and_then(|l| l.strip_prefix("shipped "))
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| bad("shipped"))?;
        let meta = lines
            .next()
            .and_then(|l| l.strip_prefix("meta "))
            .ok_or_else(|| bad("meta"))?;
        let (version, crc) = meta.split_once(' ').ok_or_else(|| bad("meta"))?;
        let meta_version = version.parse().map_err(|_| bad("meta version"))?;
        let meta_crc = match crc {
            "-" => None,
            c => Some(u32::from_str_radix(c, 16).map_err(|_| bad("meta checksum"))?),
        };
        let log = lines
            .next()
            .and_then(|l| l.strip_prefix("log "))
            .map(str::to_string);
        Ok(Some(Cursor {
            shipped,
            meta_version,
            meta_crc,
            log,
        }))
    }

    /// Writes the cursor atomically: a temporary file beside it, synced, renamed over it, the
    /// folder synced.
    fn save(&self, path: &Path) -> Result<()> {
        let dir = path
            .parent()
            .ok_or_else(|| Error::Invalid(format!("{}: no folder", path.display())))?;
        std::fs::create_dir_all(dir).map_err(|e| Error::io("create", dir, e))?;
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let tmp = dir.join(format!(".{}.tmp", name.unwrap_or_default()));
        let crc = self
            .meta_crc
            .map_or_else(|| "-".to_string(), |c| format!("{c:08x}"));
        let mut text = format!(
            "{CURSOR_MAGIC}\nshipped {}\nmeta {} {crc}\n",
            self.shipped, self.meta_version
        );
        if let Some(log) = &self.log {
            text.push_str(&format!("log {log}\n"));
        }
        let written = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .and_then(|mut f| {
                f.write_all(text.as_bytes())?;
                f.sync_all()
            })
            .map_err(|e| Error::io("write", &tmp, e))
            .and_then(|()| std::fs::rename(&tmp, path).map_err(|e| Error::io("rename", &tmp, e)));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| Error::io("sync directory", dir, e))
    }
}

/// Per session: where shipping stands, from the store's cursors, against the local logs. Needs
/// no server. Every session of the store is listed, and every session with a cursor (a deleted
/// one too).
pub fn status(store: &Store, stream: &str) -> Result<Vec<ShipStatus>> {
    check_stream_name(stream)?;
    let mut ids: Vec<String> = store.ids(crate::store::Deleted::Skip)?;
    let dir = store.root().join(SHIP_DIR).join(stream);
    match std::fs::read_dir(&dir) {
        Ok(rd) => {
            for entry in rd {
                let entry = entry.map_err(|e| Error::io("read directory", &dir, e))?;
                if let Some(name) = entry.file_name().to_str() {
                    if crate::session::validate_id(name).is_ok() && !ids.iter().any(|i| i == name) {
                        ids.push(name.to_string());
                    }
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io("read directory", &dir, e)),
    }
    ids.sort();
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let cursor = Cursor::load(&cursor_path(store, stream, &id)?)?.unwrap_or_default();
        let local = store.open_reader(&id).ok().map(|r| r.len());
        out.push(ShipStatus {
            id,
            shipped: cursor.shipped,
            local,
            stream: None,
        });
    }
    Ok(out)
}

/// Where the followers that go on past a session's failure report it
/// ([`Remote::follow_skipping`], [`Remote::restore_follow_skipping`]); `None`: the failure
/// stops them.
type OnSkip<'a> = Option<&'a mut dyn FnMut(&str, &Error)>;

/// An error of session `id` while following: the server's or the network's, or any error when
/// nothing takes skipped sessions, is returned (it stops the follow); else the session is
/// reported to `on_skip` and added to `skipped`.
fn skip(e: Error, id: &str, on_skip: &mut OnSkip<'_>, skipped: &mut HashSet<String>) -> Result<()> {
    match on_skip {
        Some(f) if !matches!(e, Error::Remote(_)) => {
            f(id, &e);
            skipped.insert(id.to_string());
            Ok(())
        }
        _ => Err(e),
    }
}

/// Drops what following held for session `id`, left out ([`skip`]).
fn forget(id: &str, states: &mut HashMap<String, Shipping>, hot: &mut HashMap<String, Instant>) {
    states.remove(id);
    hot.remove(id);
}

// ---------------------------------------------------------------------------------------------
// The connection

/// A connection to a NATS server and its JetStream stream.
#[derive(Debug, Clone)]
pub struct Remote {
    js: jetstream::Context,
    stream: stream::Stream,
    options: ShipOptions,
}

/// One session being shipped: its cursor and an open reader.
struct Shipping {
    path: PathBuf,
    cursor: Cursor,
    saved: u64,
    /// When the cursor was last written.
    saved_at: Instant,
    /// A step's end writes the cursor only when it was last written this long ago (zero for a
    /// plain ship; [`FOLLOW_POLL`] when following, where a step may end every few ms: the
    /// cursor written then is at most that much behind, and the stream's end is found again
    /// on restart). A failing step always writes it.
    save_every: Duration,
    reader: Option<SessionReader>,
    reconciled: bool,
}

impl Shipping {
    /// Writes the cursor.
    fn save(&mut self) -> Result<()> {
        self.cursor.save(&self.path)?;
        self.saved = self.cursor.shipped;
        self.saved_at = Instant::now();
        Ok(())
    }
}

/// A shipping session's reader (`Shipping::reader`), opened the first time and brought up to
/// date after.
fn open_reader<'a>(slot: &'a mut Option<SessionReader>, dir: &Path) -> Result<&'a SessionReader> {
    let reader = match slot.take() {
        Some(mut r) => {
            r.refresh()?;
            r
        }
        None => SessionReader::open(dir)?,
    };
    Ok(slot.insert(reader))
}

/// The line `ship` publishes for event `seq` of `reader` (canonical JSONL, without the
/// newline), in `line`.
fn event_line(reader: &SessionReader, seq: u64, line: &mut Vec<u8>) -> Result<()> {
    line.clear();
    JsonlWriter::new(&mut *line)
        .write_archived(reader.get(seq)?)
        .map_err(|e| Error::io("encode", format!("seq {seq}"), e))?;
    if line.last() == Some(&b'\n') {
        line.pop();
    }
    Ok(())
}

impl Remote {
    /// Connects to `url` and opens the stream `options.stream`, creating it when missing (file
    /// storage, `options.replicas` replicas, subjects `agentlog.>`).
    pub async fn connect(url: &str, options: ShipOptions) -> Result<Remote> {
        Self::connect_to(url, options, true).await
    }

    /// Connects to `url` and opens the stream `options.stream`, which must exist (what a
    /// restore needs: a missing stream is an error, never created empty).
    pub async fn open(url: &str, options: ShipOptions) -> Result<Remote> {
        Self::connect_to(url, options, false).await
    }

    async fn connect_to(url: &str, options: ShipOptions, create: bool) -> Result<Remote> {
        check_stream_name(&options.stream)?;
        if !(1..=5).contains(&options.replicas) {
            return Err(Error::Invalid(format!(
                "--replicas {}: a stream has 1 to 5 replicas",
                options.replicas
            )));
        }
        let client = async_nats::ConnectOptions::new()
            .connection_timeout(Duration::from_secs(5))
            .connect(url)
            .await
            .map_err(|e| remote(format_args!("cannot connect to {url}"), e))?;
        let js = jetstream::ContextBuilder::new()
            .timeout(Duration::from_secs(5))
            .ack_timeout(Duration::from_secs(5))
            .max_ack_inflight(options.window.max(1) * 2)
            .backpressure_on_inflight(true)
            .build(client);
        let stream = match js.get_stream(&options.stream).await {
            Ok(s) => s,
            Err(e)
                if matches!(
                    e.kind(),
                    jetstream::context::GetStreamErrorKind::JetStream(j)
                        if j.error_code() == jetstream::ErrorCode::STREAM_NOT_FOUND
                ) =>
            {
                if !create {
                    return Err(Error::Remote(format!(
                        "no stream {} on {url} (nothing was shipped to it)",
                        options.stream
                    )));
                }
                js.get_or_create_stream(stream::Config {
                    name: options.stream.clone(),
                    subjects: vec![format!("{SUBJECT_PREFIX}.>")],
                    storage: stream::StorageType::File,
                    num_replicas: options.replicas,
                    ..Default::default()
                })
                .await
                .map_err(|e| remote(format_args!("create stream {}", options.stream), e))?
            }
            Err(e) => return Err(remote(format_args!("open stream {}", options.stream), e)),
        };
        if create {
            // A stream that does not take every session's subjects would answer some publishes
            // with "no responders", which looks like a server that is not ready: said at once.
            let subjects = &stream.cached_info().config.subjects;
            if !(takes_all(subjects, "events") && takes_all(subjects, "meta")) {
                return Err(Error::Invalid(format!(
                    "stream {} takes the subjects {subjects:?}, not every \
                     {SUBJECT_PREFIX}.<session>.events and .meta: ship to another stream \
                     (--stream NAME; one that does not exist is created) or add \
                     \"{SUBJECT_PREFIX}.>\" to its subjects",
                    options.stream
                )));
            }
        }
        Ok(Remote {
            js,
            stream,
            options,
        })
    }

    /// The options this connection was made with.
    pub fn options(&self) -> &ShipOptions {
        &self.options
    }

    /// What the stream holds of session `id`: its event messages and the last seq.
    pub async fn remote_state(&self, id: &str) -> Result<RemoteState> {
        Ok(match self.stream_tail(id).await? {
            Some((last, events, _)) => RemoteState {
                events,
                last_seq: Some(last),
            },
            None => RemoteState {
                events: 0,
                last_seq: None,
            },
        })
    }

    /// [`status`] with the stream's side: per session of the store (and per session with a
    /// cursor), the local length, the shipped cursor and what the stream holds of it (its
    /// event messages and the last seq, from the stream's last message on
    /// `agentlog.<session>.events`).
    pub async fn status(&self, store: &Store) -> Result<Vec<ShipStatus>> {
        let mut rows = status(store, &self.options.stream)?;
        // One request for the counts of every session's subject, then one per session the
        // stream holds events of.
        let counts = self
            .subject_counts(&format!("{SUBJECT_PREFIX}.*.events"))
            .await?;
        for row in &mut rows {
            let subject = events_subject(&row.id);
            let events = counts.get(&subject).copied().unwrap_or(0);
            row.stream = Some(self.remote_state_of(&subject, events).await?);
        }
        Ok(rows)
    }

    /// The message count of each subject of the stream matching `filter`.
    async fn subject_counts(&self, filter: &str) -> Result<HashMap<String, u64>> {
        let mut info = self
            .stream
            .info_builder()
            .subjects(filter.to_string())
            .fetch()
            .await
            .map_err(|e| remote("stream info", e))?;
        let mut counts = HashMap::new();
        while let Some(item) = info.next().await {
            let (s, n) = item.map_err(|e| remote("stream info", e))?;
            counts.insert(s, n as u64);
        }
        Ok(counts)
    }

    /// The state of the events subject `subject`, which holds `events` messages.
    async fn remote_state_of(&self, subject: &str, events: u64) -> Result<RemoteState> {
        if events == 0 {
            return Ok(RemoteState {
                events,
                last_seq: None,
            });
        }
        let (seq, _) = self.last_event_message(subject).await?;
        Ok(RemoteState {
            events,
            last_seq: Some(seq),
        })
    }

    /// The last message of the events subject `subject` (which holds some): its seq and its
    /// payload (the event's line).
    async fn last_event_message(&self, subject: &str) -> Result<(u64, Vec<u8>)> {
        let last = self
            .stream
            .get_last_raw_message_by_subject(subject)
            .await
            .map_err(|e| remote(format_args!("last message of {subject}"), e))?;
        let seq = last
            .headers
            .get(HEADER_SEQ)
            .and_then(|v| v.as_str().parse::<u64>().ok())
            .ok_or_else(|| {
                Error::Remote(format!(
                    "the last message of {subject} has no {HEADER_SEQ} header"
                ))
            })?;
        Ok((seq, last.payload.to_vec()))
    }

    fn shipping(&self, store: &Store, id: &str) -> Result<Shipping> {
        let path = cursor_path(store, &self.options.stream, id)?;
        let cursor = Cursor::load(&path)?.unwrap_or_default();
        Ok(Shipping {
            path,
            saved: cursor.shipped,
            saved_at: Instant::now(),
            save_every: Duration::ZERO,
            cursor,
            reader: None,
            reconciled: false,
        })
    }

    /// The stream's last event message of session `id`: (its seq, the subject's message count,
    /// its payload), `None` when the stream holds no event of it.
    async fn stream_tail(&self, id: &str) -> Result<Option<(u64, u64, Vec<u8>)>> {
        let subject = events_subject(id);
        let counts = self.subject_counts(&subject).await?;
        let events = counts.get(&subject).copied().unwrap_or(0);
        if events == 0 {
            return Ok(None);
        }
        let (seq, payload) = self.last_event_message(&subject).await?;
        Ok(Some((seq, events, payload)))
    }

    /// Refuses to ship session `id` onto a copy in the stream that is not its own history:
    /// the stream's last event is not the local event of that seq (another host appended to
    /// it after a restore, or the session was recreated under this id), or the local log is
    /// not the one the cursor shipped from (recreated, or rewritten by `redact` or `purge`,
    /// whose changes would never reach the stream). Shipping on would mix two histories in
    /// the stream (events of the same seq are dropped as duplicates). Not for a deleted
    /// session, whose log is not read.
    fn check_same_history(
        &self,
        store: &Store,
        id: &str,
        dir: &Path,
        st: &mut Shipping,
        tail: Option<&(u64, u64, Vec<u8>)>,
    ) -> Result<()> {
        // The reader shipping goes on with (opened once).
        let reader = open_reader(&mut st.reader, dir)?;
        let local = reader.log().log_id().map(|l| l.to_string());
        let stream = &self.options.stream;
        let cursor = cursor_path(store, stream, id)?;
        let remedy = format!(
            "nothing was shipped; to replace the stream's copy, purge it from the stream (`nats \
             stream purge {stream} --subject '{SUBJECT_PREFIX}.{id}.>'`) and remove {}; to keep \
             it, restore it under another id (`agentlog restore --id NEW {id}`)",
            cursor.display()
        );
        if let (Some(shipped_from), Some(now)) = (&st.cursor.log, &local) {
            if shipped_from != now && st.cursor.shipped > 0 {
                return Err(Error::Invalid(format!(
                    "session {id} is another log than the one shipped to stream {stream} (it was \
                     rewritten by redact or purge, or recreated under this id): the stream still \
                     holds the earlier events; {remedy}"
                )));
            }
        }
        if let Some((last, _, payload)) = tail {
            let differs = if *last >= reader.len() {
                true
            } else {
                let mut line = Vec::with_capacity(payload.len() + 1);
                event_line(reader, *last, &mut line)?;
                line != *payload
            };
            if differs {
                return Err(Error::Invalid(format!(
                    "the stream {stream} holds another history of session {id}: its event of seq \
                     {last} is {} (another host appended to the session after restoring it, or \
                     the session was recreated under this id); {remedy}",
                    if *last >= reader.len() {
                        format!("past the local log's {} events", reader.len())
                    } else {
                        "not the local one".to_string()
                    }
                )));
            }
        }
        st.cursor.log = local;
        Ok(())
    }

    /// Ships what session `id` holds beyond its cursor (and its metadata when it changed),
    /// retrying through server or network failures for `options.retry_for`.
    pub async fn ship(&self, store: &Store, id: &str) -> Result<ShipReport> {
        let mut st = self.shipping(store, id)?;
        self.ship_retrying(store, id, &mut st).await
    }

    /// One look at session `id` while following: ships what it has, marks it hot when it
    /// shipped events and tells `on_ship`. A session removed (gc) meanwhile, or being created
    /// (its log is written before its session.json), is looked at again next time.
    async fn follow_one(
        &self,
        store: &Store,
        id: &str,
        st: &mut Shipping,
        hot: &mut HashMap<String, Instant>,
        on_ship: &mut impl FnMut(&str, &ShipReport),
    ) -> Result<()> {
        let report = match self.ship_retrying(store, id, st).await {
            Ok(r) => r,
            Err(Error::NotFound(_) | Error::BrokenMeta { .. }) => return Ok(()),
            Err(e) => return Err(e),
        };
        if report.shipped > 0 {
            hot.insert(id.to_string(), Instant::now());
        }
        if report.shipped > 0 || report.meta {
            on_ship(id, &report);
        }
        Ok(())
    }

    async fn ship_retrying(
        &self,
        store: &Store,
        id: &str,
        st: &mut Shipping,
    ) -> Result<ShipReport> {
        let start = Instant::now();
        let mut total = ShipReport::default();
        loop {
            match self.step(store, id, st, &mut total).await {
                Ok(()) => return Ok(total),
                Err(Error::Remote(e)) if start.elapsed() < self.options.retry_for => {
                    // The server or the network failed: what was acknowledged is in the
                    // cursor; publish again from there (duplicates are dropped by their id).
                    let _ = e;
                    st.reconciled = false;
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Brings the stream's copy of session `id` up to the local log once: the metadata if it
    /// changed, then every event from the cursor on. The cursor is written when done (or when
    /// failing, with what was acknowledged).
    async fn step(
        &self,
        store: &Store,
        id: &str,
        st: &mut Shipping,
        report: &mut ShipReport,
    ) -> Result<()> {
        let result = self.step_inner(store, id, st, report).await;
        if st.cursor.shipped != st.saved
            && (result.is_err() || st.saved_at.elapsed() >= st.save_every)
        {
            st.save()?;
        }
        report.cursor = st.cursor.shipped;
        result
    }

    async fn step_inner(
        &self,
        store: &Store,
        id: &str,
        st: &mut Shipping,
        report: &mut ShipReport,
    ) -> Result<()> {
        let dir = store.session_dir(id)?;
        let meta = SessionMeta::load(&dir)?;
        if !st.reconciled {
            let tail = self.stream_tail(id).await?;
            // A deleted session's log is not read (its events were shipped while it lived).
            if meta.state != SessionState::Deleted {
                self.check_same_history(store, id, &dir, st, tail.as_ref())?;
            }
            // Acknowledged after the cursor's last write (a crash in between): the stream holds
            // seqs 0..=last exactly when it holds last+1 of them (one shipper per session,
            // publishing in order).
            if let Some((last, events, _)) = tail {
                if events == last + 1 && last + 1 > st.cursor.shipped {
                    st.cursor.shipped = last + 1;
                }
            }
            st.reconciled = true;
        }
        let meta_text = meta.to_json();
        let crc = crc32fast::hash(meta_text.as_bytes());
        if st.cursor.meta_crc != Some(crc) {
            let version = st.cursor.meta_version + 1;
            let mut headers = HeaderMap::new();
            headers.insert(HEADER_SESSION, id);
            // The version and the checksum: a repeat after a crash is dropped, and so is nothing
            // else (another host's first version of a changed session has another checksum).
            headers.insert(
                async_nats::header::NATS_MESSAGE_ID,
                format!("{id}:meta:{version}:{crc:08x}").as_str(),
            );
            let ack = self
                .js
                .publish_with_headers(meta_subject(id), headers, meta_text.into_bytes().into())
                .await
                .map_err(|e| {
                    publish_error(
                        format_args!("publish the metadata of {id}"),
                        &self.options.stream,
                        e,
                    )
                })?;
            ack.await.map_err(|e| {
                publish_error(
                    format_args!("publish the metadata of {id}"),
                    &self.options.stream,
                    e,
                )
            })?;
            st.cursor.meta_version = version;
            st.cursor.meta_crc = Some(crc);
            st.save()?;
            report.meta = true;
        }
        if meta.state == SessionState::Deleted {
            // Its events were shipped while it lived; a deleted log is not read.
            return Ok(());
        }
        let reader = open_reader(&mut st.reader, &dir)?;
        let len = reader.len();
        if st.cursor.shipped >= len {
            return Ok(());
        }
        let window = self.options.window.max(1);
        let mut pending: VecDeque<(u64, PublishAckFuture)> = VecDeque::with_capacity(window);
        let mut line = Vec::with_capacity(1024);
        let mut seq = st.cursor.shipped;
        while seq < len || !pending.is_empty() {
            if seq < len && pending.len() < window {
                event_line(reader, seq, &mut line)?;
                let mut headers = HeaderMap::new();
                headers.insert(HEADER_SESSION, id);
                headers.insert(HEADER_SEQ, seq.to_string().as_str());
                headers.insert(
                    async_nats::header::NATS_MESSAGE_ID,
                    format!("{id}:{seq}").as_str(),
                );
                let ack = self
                    .js
                    .publish_with_headers(events_subject(id), headers, line.clone().into())
                    .await
                    .map_err(|e| {
                        publish_error(
                            format_args!("publish {id} seq {seq}"),
                            &self.options.stream,
                            e,
                        )
                    })?;
                pending.push_back((seq, ack));
                seq += 1;
                continue;
            }
            if let Some((acked, ack)) = pending.pop_front() {
                let ack = ack.await.map_err(|e| {
                    publish_error(
                        format_args!("publish {id} seq {acked}"),
                        &self.options.stream,
                        e,
                    )
                })?;
                if ack.stream != self.options.stream {
                    return Err(Error::Remote(format!(
                        "{id} seq {acked} was stored by stream {}, not {}: another stream \
                         takes subjects agentlog.>",
                        ack.stream, self.options.stream
                    )));
                }
                // Acknowledged: the cursor may move past it.
                st.cursor.shipped = acked + 1;
                report.shipped += 1;
                if st.cursor.shipped - st.saved >= CURSOR_EVERY {
                    // (The fields, not `st.save()`: the reader borrows `st`.)
                    st.cursor.save(&st.path)?;
                    st.saved = st.cursor.shipped;
                    st.saved_at = Instant::now();
                }
            }
        }
        Ok(())
    }

    /// Ships `sessions` and keeps shipping: new appends and, with [`Sessions::All`], new
    /// sessions, until `stop` completes. Metadata changes (title, archive, delete) are shipped
    /// too. `on_ship` is called after each session's step that shipped something.
    ///
    /// Every session is looked at every 50 ms; a session that shipped events in the last 10 s
    /// also every 5 ms (the length of its log, which costs a few system calls), so that its
    /// next append ships within a few ms.
    ///
    /// Any error stops it, one session's too (another history in the stream, a damaged log):
    /// [`Remote::follow_skipping`] leaves such a session out and goes on with the others.
    pub async fn follow(
        &self,
        store: &Store,
        sessions: Sessions,
        stop: impl Future<Output = ()>,
        on_ship: impl FnMut(&str, &ShipReport),
    ) -> Result<()> {
        self.follow_inner(store, sessions, stop, on_ship, None)
            .await
    }

    /// [`Remote::follow`], except that a session that cannot be shipped for a reason of its
    /// own is passed to `on_skip` with the error and left out until this returns, while the
    /// others are shipped on: the stream holds another history of it, or its log or cursor
    /// cannot be read (damaged, unreadable). Only errors of the server or the network
    /// ([`Error::Remote`], once [`ShipOptions::retry_for`] has passed) and a store whose
    /// sessions cannot be listed stop it. What `ship --follow --all` runs.
    pub async fn follow_skipping(
        &self,
        store: &Store,
        sessions: Sessions,
        stop: impl Future<Output = ()>,
        on_ship: impl FnMut(&str, &ShipReport),
        mut on_skip: impl FnMut(&str, &Error),
    ) -> Result<()> {
        self.follow_inner(store, sessions, stop, on_ship, Some(&mut on_skip))
            .await
    }

    async fn follow_inner(
        &self,
        store: &Store,
        sessions: Sessions,
        stop: impl Future<Output = ()>,
        mut on_ship: impl FnMut(&str, &ShipReport),
        mut on_skip: OnSkip<'_>,
    ) -> Result<()> {
        let mut states: HashMap<String, Shipping> = HashMap::new();
        // The sessions that shipped events lately, and when they last did.
        let mut hot: HashMap<String, Instant> = HashMap::new();
        // The sessions left out ([`Remote::follow_skipping`]).
        let mut skipped: HashSet<String> = HashSet::new();
        tokio::pin!(stop);
        loop {
            let pass = Instant::now();
            let ids = match &sessions {
                Sessions::All => store.ids(crate::store::Deleted::Include)?,
                Sessions::Ids(ids) => ids.clone(),
            };
            for id in ids {
                if skipped.contains(&id) {
                    continue;
                }
                let result = match states.entry(id.clone()) {
                    std::collections::hash_map::Entry::Occupied(o) => Ok(o.into_mut()),
                    std::collections::hash_map::Entry::Vacant(v) => {
                        self.shipping(store, &id).map(|mut st| {
                            st.save_every = FOLLOW_POLL;
                            v.insert(st)
                        })
                    }
                };
                let result = match result {
                    Ok(st) => {
                        self.follow_one(store, &id, st, &mut hot, &mut on_ship)
                            .await
                    }
                    Err(e) => Err(e),
                };
                if let Err(e) = result {
                    skip(e, &id, &mut on_skip, &mut skipped)?;
                    forget(&id, &mut states, &mut hot);
                }
            }
            // Until the next full pass: the lengths of the hot sessions.
            loop {
                let stopped = tokio::select! {
                    () = &mut stop => true,
                    () = tokio::time::sleep(FOLLOW_WAKE) => false,
                };
                if stopped {
                    // The cursors not written yet (a step ended less than FOLLOW_POLL after
                    // the last write).
                    for st in states.values_mut() {
                        if st.cursor.shipped != st.saved {
                            st.save()?;
                        }
                    }
                    return Ok(());
                }
                if pass.elapsed() >= FOLLOW_POLL {
                    break;
                }
                hot.retain(|_, at| at.elapsed() < FOLLOW_HOT);
                let grown: Vec<String> = hot
                    .keys()
                    .filter(|id| {
                        states.get_mut(id.as_str()).is_some_and(|st| {
                            let shipped = st.cursor.shipped;
                            // An error is left to the next full pass.
                            st.reader
                                .as_mut()
                                .is_some_and(|r| r.refresh().is_ok_and(|len| len > shipped))
                        })
                    })
                    .cloned()
                    .collect();
                for id in grown {
                    let Some(st) = states.get_mut(&id) else {
                        continue;
                    };
                    if let Err(e) = self
                        .follow_one(store, &id, st, &mut hot, &mut on_ship)
                        .await
                    {
                        skip(e, &id, &mut on_skip, &mut skipped)?;
                        forget(&id, &mut states, &mut hot);
                    }
                }
            }
        }
    }

    // -----------------------------------------------------------------------------------------
    // Restore

    /// Restores session `id` from the stream into `store` (as `new_id` when given): the whole
    /// session when it is not in the store, else the events it lacks and its current metadata.
    pub async fn restore(
        &self,
        store: &Store,
        id: &str,
        new_id: Option<&str>,
    ) -> Result<RestoreReport> {
        let mut renames = HashMap::new();
        if let Some(n) = new_id {
            store.session_dir(n)?;
            renames.insert(id.to_string(), n.to_string());
        }
        let reports = self
            .restore_many(
                store,
                &Sessions::Ids(vec![id.to_string()]),
                renames,
                None::<std::future::Pending<()>>,
                |_| {},
                None,
            )
            .await?;
        reports
            .into_iter()
            .next()
            .ok_or_else(|| Error::NotFound(format!("{id} (in stream {})", self.options.stream)))
    }

    /// Restores every session of the stream (see [`Remote::restore`]).
    pub async fn restore_all(&self, store: &Store) -> Result<Vec<RestoreReport>> {
        self.restore_many(
            store,
            &Sessions::All,
            HashMap::new(),
            None::<std::future::Pending<()>>,
            |_| {},
            None,
        )
        .await
    }

    /// Restores `sessions` and keeps the store in step with the stream until `stop` completes:
    /// new events and new sessions (with [`Sessions::All`]) are appended as they arrive.
    /// `on_restore` is called after each message that changed the store.
    pub async fn restore_follow(
        &self,
        store: &Store,
        sessions: Sessions,
        stop: impl Future<Output = ()>,
        on_restore: impl FnMut(&RestoreReport),
    ) -> Result<()> {
        self.restore_many(
            store,
            &sessions,
            HashMap::new(),
            Some(stop),
            on_restore,
            None,
        )
        .await
        .map(|_| ())
    }

    /// [`Remote::restore_follow`], except that a session that cannot be restored for a reason
    /// of its own is passed to `on_skip` with the error and left out until this returns, while
    /// the others are kept in step: a local session of the same id that is not the stream's
    /// ([`Error::Exists`]), a gap in the stream's events of it, a local log that refuses an
    /// event. [`Remote::restore_follow`] stops at the first. Only errors of the server or the
    /// network ([`Error::Remote`]) and of the store as a whole stop it. What `restore --follow
    /// --all` runs.
    pub async fn restore_follow_skipping(
        &self,
        store: &Store,
        sessions: Sessions,
        stop: impl Future<Output = ()>,
        on_restore: impl FnMut(&RestoreReport),
        mut on_skip: impl FnMut(&str, &Error),
    ) -> Result<()> {
        self.restore_many(
            store,
            &sessions,
            HashMap::new(),
            Some(stop),
            on_restore,
            Some(&mut on_skip),
        )
        .await
        .map(|_| ())
    }

    async fn restore_many<F: Future<Output = ()>>(
        &self,
        store: &Store,
        sessions: &Sessions,
        renames: HashMap<String, String>,
        stop: Option<F>,
        mut on_restore: impl FnMut(&RestoreReport),
        mut on_skip: OnSkip<'_>,
    ) -> Result<Vec<RestoreReport>> {
        let follow = stop.is_some();
        let filter = match sessions {
            Sessions::Ids(ids) if ids.len() == 1 => {
                format!("{SUBJECT_PREFIX}.{}.>", subject_token(&ids[0]))
            }
            _ => format!("{SUBJECT_PREFIX}.>"),
        };
        let mut restorer = Restorer {
            store,
            renames,
            open: HashMap::new(),
            lens: HashMap::new(),
            waiting: HashMap::new(),
            states: HashMap::new(),
            checked: HashSet::new(),
            created: HashSet::new(),
            reports: Vec::new(),
        };
        if !follow {
            // Nothing to wait for when the stream holds nothing of these sessions.
            let mut info = self
                .stream
                .info_builder()
                .subjects(filter.clone())
                .fetch()
                .await
                .map_err(|e| remote("stream info", e))?;
            let mut any = false;
            while let Some(item) = info.next().await {
                let (_, n) = item.map_err(|e| remote("stream info", e))?;
                any |= n > 0;
            }
            if !any {
                return self.restore_missing(sessions, &restorer.renames, restorer.reports);
            }
        }
        let mut messages = self.ordered_messages(&filter, None).await?;
        // The stream sequence of the last message read: a consumer the server lost (it
        // restarted) is created again from the one after it.
        let mut read_up_to: Option<u64> = None;
        let stop = async move {
            match stop {
                Some(s) => s.await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(stop);
        // With every session asked for, a local session of the same id that is not the
        // stream's is left out (the others are restored); named in the error at the end, or
        // while following, to `on_skip` (which takes any error of one session).
        let mut refused: BTreeMap<String, String> = BTreeMap::new();
        let many = matches!(sessions, Sessions::All) && !follow;
        loop {
            let next = tokio::select! {
                () = &mut stop => break,
                m = messages.next() => m,
            };
            let message = match next {
                Some(Ok(m)) => m,
                // While following, a server that went away (restarted, or a cluster that lost
                // its leader) is waited for, and reading goes on after the last message read.
                Some(Err(_)) if follow => {
                    messages = self
                        .ordered_messages(&filter, read_up_to.map(|s| s + 1))
                        .await?;
                    continue;
                }
                Some(Err(e)) => {
                    return Err(remote(
                        format_args!("read stream {}", self.options.stream),
                        e,
                    ))
                }
                None => break,
            };
            let info = message
                .info()
                .map_err(|e| remote("a message without its stream info", e))?;
            let pending = info.pending;
            read_up_to = Some(info.stream_sequence);
            let id: Option<String> = message
                .headers
                .as_ref()
                .and_then(|h| h.get(HEADER_SESSION))
                .map(|v| v.as_str().to_string())
                .filter(|id: &String| sessions.contains(id.as_str()));
            if let Some(id) = id {
                let is_meta = message.subject.ends_with(".meta");
                let seq = message
                    .headers
                    .as_ref()
                    .and_then(|h| h.get(HEADER_SEQ))
                    .and_then(|v| v.as_str().parse::<u64>().ok());
                if let std::collections::btree_map::Entry::Vacant(slot) = refused.entry(id) {
                    match restorer.apply(slot.key(), is_meta, seq, &message.payload) {
                        Ok(Some(i)) => on_restore(&restorer.reports[i]),
                        Ok(None) => {}
                        Err(Error::Exists(why)) if many => {
                            slot.insert(why);
                        }
                        Err(e) => match on_skip.as_mut() {
                            Some(f) if !matches!(e, Error::Remote(_)) => {
                                f(slot.key(), &e);
                                restorer.forget(slot.key())?;
                                slot.insert(e.to_string());
                            }
                            _ => return Err(e),
                        },
                    }
                }
            }
            if pending == 0 {
                // Caught up: the states the metadata gives hold now.
                restorer.apply_states()?;
                if !follow {
                    break;
                }
            }
        }
        let renames = restorer.renames.clone();
        let reports = restorer.finish()?;
        if follow {
            return Ok(reports);
        }
        if !refused.is_empty() {
            let restored: Vec<&str> = reports.iter().map(|r| r.id.as_str()).collect();
            let why: Vec<String> = refused.into_values().collect();
            return Err(Error::Invalid(format!(
                "not restored, a local session of the same id exists: {}; restore each under \
                 another id with `restore --id NEW ID`; the other sessions were restored ({})",
                why.join("; "),
                if restored.is_empty() {
                    "none".to_string()
                } else {
                    restored.join(", ")
                }
            )));
        }
        self.restore_missing(sessions, &renames, reports)
    }

    /// An ordered consumer of the stream's messages on `filter`, from stream sequence `from`
    /// (the first when `None`). A cluster that lost a server, or a server starting again, may
    /// take a while to place it: retried for `retry_for`.
    async fn ordered_messages(
        &self,
        filter: &str,
        from: Option<u64>,
    ) -> Result<consumer::pull::Ordered> {
        let start = Instant::now();
        loop {
            let attempt = async {
                self.stream
                    .create_consumer(consumer::pull::OrderedConfig {
                        filter_subject: filter.to_string(),
                        deliver_policy: match from {
                            Some(start_sequence) => {
                                consumer::DeliverPolicy::ByStartSequence { start_sequence }
                            }
                            None => consumer::DeliverPolicy::All,
                        },
                        ..Default::default()
                    })
                    .await
                    .map_err(|e| remote(format_args!("read stream {}", self.options.stream), e))?
                    .messages()
                    .await
                    .map_err(|e| remote(format_args!("read stream {}", self.options.stream), e))
            };
            match attempt.await {
                Ok(m) => return Ok(m),
                Err(_) if start.elapsed() < self.options.retry_for => {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Fails when a session asked for by id was not found in the stream.
    fn restore_missing(
        &self,
        sessions: &Sessions,
        renames: &HashMap<String, String>,
        reports: Vec<RestoreReport>,
    ) -> Result<Vec<RestoreReport>> {
        if let Sessions::Ids(ids) = sessions {
            for id in ids {
                let local = renames.get(id).unwrap_or(id);
                if !reports.iter().any(|r| &r.id == local) {
                    return Err(Error::Invalid(format!(
                        "no session {id:?} in stream {}",
                        self.options.stream
                    )));
                }
            }
        }
        Ok(reports)
    }
}

/// Applies stream messages to a store.
struct Restorer<'a> {
    store: &'a Store,
    renames: HashMap<String, String>,
    /// Sessions open for appending, by local id.
    open: HashMap<String, Session>,
    /// The local length of the sessions met, by local id.
    lens: HashMap<String, u64>,
    /// Events that came before an earlier one (a publish repeated after a failure is stored
    /// after the ones that followed it), by local id and seq: appended once their turn comes.
    waiting: HashMap<String, BTreeMap<u64, Vec<u8>>>,
    /// The state (active, archived, deleted) the stream's latest metadata gives, by local id:
    /// applied once the events before it are in (an archived session refuses appends).
    states: HashMap<String, SessionState>,
    /// Local sessions found to match the stream's (by header) or created by this restore.
    checked: HashSet<String>,
    /// Local sessions created by this restore.
    created: HashSet<String>,
    reports: Vec<RestoreReport>,
}

impl Restorer<'_> {
    fn local_id(&self, id: &str) -> String {
        self.renames
            .get(id)
            .cloned()
            .unwrap_or_else(|| id.to_string())
    }

    fn report_index(&mut self, local: &str) -> usize {
        match self.reports.iter().position(|r| r.id == local) {
            Some(i) => i,
            None => {
                self.reports.push(RestoreReport {
                    id: local.to_string(),
                    ..Default::default()
                });
                self.reports.len() - 1
            }
        }
    }

    fn options(&self) -> crate::session::SessionOptions {
        let mut opts = self.store.config().session_options();
        // The stream's seqs are kept: chunks are never dropped on restore.
        opts.keep_raw_chunks = true;
        opts
    }

    /// Applies one message; returns the index of the report it changed.
    fn apply(
        &mut self,
        id: &str,
        is_meta: bool,
        seq: Option<u64>,
        payload: &[u8],
    ) -> Result<Option<usize>> {
        let local = self.local_id(id);
        let text = std::str::from_utf8(payload)
            .map_err(|_| Error::Remote(format!("a message of session {id} is not UTF-8")))?;
        if is_meta {
            let meta = SessionMeta::from_json(text).map_err(|e| {
                Error::Remote(format!("the metadata of session {id} in the stream: {e}"))
            })?;
            self.apply_meta(&local, meta)?;
            return Ok(Some(self.report_index(&local)));
        }
        let seq = seq.ok_or_else(|| {
            Error::Remote(format!(
                "an event of session {id} without its {HEADER_SEQ} header"
            ))
        })?;
        if !self.checked.contains(&local) {
            return Err(Error::Remote(format!(
                "events of session {id} came before its metadata (was it shipped by agentlog?)"
            )));
        }
        let len = match self.lens.get(&local) {
            Some(&len) => len,
            None => {
                let len = SessionReader::open(self.store.session_dir(&local)?)?.len();
                self.lens.insert(local.clone(), len);
                len
            }
        };
        if seq < len {
            // Restored already (or a repeat).
            return Ok(None);
        }
        if seq > len {
            self.waiting
                .entry(local)
                .or_default()
                .insert(seq, payload.to_vec());
            return Ok(None);
        }
        self.append(&local, id, seq, text)?;
        let mut next = seq + 1;
        while let Some(p) = self.waiting.get_mut(&local).and_then(|w| w.remove(&next)) {
            let text = String::from_utf8(p)
                .map_err(|_| Error::Remote(format!("a message of session {id} is not UTF-8")))?;
            self.append(&local, id, next, &text)?;
            next += 1;
        }
        Ok(Some(self.report_index(&local)))
    }

    /// Gives session `local` the state the stream's metadata gave it, if it differs.
    fn apply_state(&mut self, local: &str) -> Result<()> {
        let Some(state) = self.states.remove(local) else {
            return Ok(());
        };
        let store = self.store;
        let current = SessionMeta::load(&store.session_dir(local)?)?.state;
        if current == state {
            return Ok(());
        }
        // A change of state needs no writer open.
        if let Some(session) = self.open.remove(local) {
            session.close()?;
        }
        match state {
            SessionState::Active => store.unarchive(local),
            SessionState::Archived => store.archive(local),
            SessionState::Deleted => store.delete(local),
        }
    }

    /// Drops what is held for session `id` of the stream (left out while following): its
    /// waiting events and the state its metadata gave are never applied, and its writer, if
    /// one is open, is closed.
    fn forget(&mut self, id: &str) -> Result<()> {
        let local = self.local_id(id);
        self.waiting.remove(&local);
        self.states.remove(&local);
        if let Some(session) = self.open.remove(&local) {
            session.close()?;
        }
        Ok(())
    }

    /// Applies the states of every session met (the consumer caught up with the stream).
    fn apply_states(&mut self) -> Result<()> {
        let locals: Vec<String> = self.states.keys().cloned().collect();
        for local in locals {
            self.apply_state(&local)?;
        }
        Ok(())
    }

    /// Appends event `seq` (the next of the local log) to session `local`.
    fn append(&mut self, local: &str, id: &str, seq: u64, text: &str) -> Result<()> {
        if !self.open.contains_key(local) {
            if self.states.get(local) == Some(&SessionState::Active) {
                // Unarchived in the stream before this event was appended.
                self.apply_state(local)?;
            }
            let session = Session::open(self.store.session_dir(local)?, self.options())?;
            self.open.insert(local.to_string(), session);
        }
        let Some(session) = self.open.get(local) else {
            return Ok(());
        };
        let event = parse_event_line(text)
            .map_err(|e| Error::Remote(format!("session {id} seq {seq} in the stream: {e}")))?;
        let time = event.time;
        session.append_draft(Draft {
            event,
            seq: Some(seq),
            time: Some(time),
        })?;
        self.lens.insert(local.to_string(), seq + 1);
        let i = self.report_index(local);
        let r = &mut self.reports[i];
        r.restored += 1;
        r.len = seq + 1;
        Ok(())
    }

    fn apply_meta(&mut self, local: &str, meta: SessionMeta) -> Result<()> {
        let store = self.store;
        let dir = store.session_dir(local)?;
        let exists = crate::session::is_session_dir(&dir)?;
        let mut header = meta.to_header();
        header.id = local.to_string();
        if !exists {
            let line = format!("{}\n", header.to_canonical_string());
            store.import(
                line.as_bytes(),
                ImportOptions {
                    id: Some(local.to_string()),
                    title: None,
                },
                |_| {},
            )?;
            self.checked.insert(local.to_string());
            self.created.insert(local.to_string());
        } else if !self.checked.contains(local) {
            let have = SessionMeta::load(&dir)?;
            if have.created_at != meta.created_at {
                return Err(Error::Exists(format!(
                    "{local} (the local session is not the stream's: created at {}, the stream's at {})",
                    have.created_at, meta.created_at
                )));
            }
            self.checked.insert(local.to_string());
        }
        // The header members and config as the stream has them now.
        let apply = |m: &mut SessionMeta| {
            let state = m.state;
            let store_extra = std::mem::take(&mut m.store_extra);
            *m = SessionMeta::from_header(&header);
            m.config = meta.config.clone();
            m.state = state;
            m.store_extra = store_extra;
        };
        let current = SessionMeta::load(&dir)?;
        let mut wanted = current.clone();
        apply(&mut wanted);
        if wanted != current {
            if let Some(session) = self.open.get(local) {
                session.update_meta(apply)?;
            } else {
                wanted.save(&dir)?;
            }
        }
        self.states.insert(local.to_string(), meta.state);
        let i = self.report_index(local);
        if self.reports[i].len == 0 {
            self.reports[i].len = store.open_reader(local).map(|r| r.len()).unwrap_or(0);
        }
        Ok(())
    }

    fn finish(mut self) -> Result<Vec<RestoreReport>> {
        self.apply_states()?;
        for (_, session) in self.open.drain() {
            session.sync()?;
            session.close()?;
        }
        let mut gaps = Vec::new();
        let mut waiting: Vec<_> = self.waiting.iter().collect();
        waiting.sort_by(|a, b| a.0.cmp(b.0));
        for (local, events) in waiting {
            let Some((&first, _)) = events.iter().next() else {
                continue;
            };
            let len = self.lens.get(local).copied().unwrap_or(0);
            let mut gap = format!(
                "session {local}: the stream lacks seq {len} (it holds seq {first} and later)"
            );
            if len == 0 && self.created.contains(local) {
                // Created by this restore from its metadata, and not one event of it could
                // follow: an empty session would pass for the stream's copy.
                self.store.remove_new(local)?;
                gap.push_str(", so it was not created");
            }
            gaps.push(gap);
        }
        if !gaps.is_empty() {
            return Err(Error::Remote(format!(
                "{}: events are missing from the stream (deleted, or expired by its limits)",
                gaps.join("; ")
            )));
        }
        Ok(self.reports)
    }
}
