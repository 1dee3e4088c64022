//! The store: many sessions in one directory.
//!
//! ```text
//! <store>/
//!     agentlog.toml               configuration (optional; see StoreConfig)
//!     sessions/<session-id>/      one session: session.json, segments, indexes, LOCK
//! ```
//!
//! Create (unique, time-sortable ids), open, read, list with metadata, archive (appends are then
//! refused) and unarchive, delete (hidden at once, removed for good by [`Store::gc`]), archive
//! sessions idle longer than an age, import JSONL (all or nothing), search the sessions
//! ([`Store::search`]) and sum their statistics ([`Store::stats`]).
//!
//! ```
//! use agentlog::store::{NewSession, Store};
//!
//! let dir = tempfile::tempdir()?;
//! let store = Store::open(dir.path())?;
//! let session = store.create(NewSession::default().title("demo"))?;
//! let id = session.id();
//! drop(session);
//! let listed = store.list()?;
//! assert_eq!(listed.len(), 1);
//! assert_eq!(listed[0].id, id);
//! assert_eq!(listed[0].title.as_deref(), Some("demo"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod config;
mod fork;
mod import;
mod rewrite;
mod search;

use std::path::{Path, PathBuf};
use std::sync::mpsc::Receiver;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::event::Value;
use crate::log;
use crate::session::{
    create_private_dir, is_session_dir, new_id, remove_stale_tmp, validate_id, MetaRepair, Session,
    SessionMeta, SessionReader, SessionState, Subscribers, META_TMP_FILE,
};
use crate::util::now_ms;

pub use config::{RedactConfig, StoreConfig, CONFIG_FILE};
pub use fork::{ForkPoint, ForkReport};
pub use import::{ImportLimit, ImportOptions, ImportReport};
pub use rewrite::{
    DamagedFinding, PurgeRange, RewriteReport, SecretFinding, PURGE_AUDIT_TYPE, TOMBSTONE_TYPE,
};
pub use search::StoreStats;
// The search and statistics types, here too: a store search is where most callers start.
pub use crate::session::{HeaderLine, Query, SearchStats, SessionStats, TextMatcher, TypeFilter};

/// Whether [`Store::ids`] lists the deleted sessions too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deleted {
    /// Only the sessions not deleted (active and archived).
    Skip,
    /// Every session, the deleted ones (not yet collected by `gc`) too.
    Include,
}

/// The folder of the sessions inside a store.
pub const SESSIONS_DIR: &str = "sessions";

/// Something that happened to the store's sessions.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreNotice {
    /// A session was created (or imported).
    Created(String),
    /// A session was archived.
    Archived(String),
    /// A session was unarchived.
    Unarchived(String),
    /// A session was deleted (hidden; removed by the next garbage collection).
    Deleted(String),
    /// A deleted session's files were removed.
    Removed(String),
}

/// What to create a session with.
#[derive(Debug, Clone, Default)]
pub struct NewSession {
    /// The id; a new unique, time-sortable one when `None`.
    pub id: Option<String>,
    /// A human title.
    pub title: Option<String>,
    /// The working directory of the agent.
    pub cwd: Option<String>,
    /// The agent's configuration, kept verbatim in `session.json`.
    pub config: Option<Value>,
    /// The durability of the returned session's appends, instead of the store's
    /// (`agentlog.toml`). It holds for this handle: a later open uses the store's again.
    /// Default: `None` (the store's).
    pub durability: Option<log::Durability>,
}

impl NewSession {
    /// Sets the id.
    #[must_use]
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Sets the title.
    #[must_use]
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// Sets the working directory.
    #[must_use]
    pub fn cwd(mut self, cwd: impl Into<String>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }

    /// Sets the durability of the new session's appends (see [`NewSession::durability`]).
    #[must_use]
    pub fn durability(mut self, durability: log::Durability) -> Self {
        self.durability = Some(durability);
        self
    }
}

/// A session as listed: its metadata and what its log says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionInfo {
    /// The id.
    pub id: String,
    /// The title (`None` when absent or `null`).
    pub title: Option<String>,
    /// Active, archived (or deleted, when deleted sessions are listed).
    pub state: SessionState,
    /// Events in the log.
    pub events: u64,
    /// Bytes of the session's files.
    pub bytes: u64,
    /// Creation time, epoch milliseconds.
    pub created_at: i64,
    /// The time of the last event, epoch milliseconds.
    pub last_event_time: Option<i64>,
    /// The session it was forked from (`None` when absent or `null`).
    pub parent_session: Option<String>,
    /// Events copied from the parent when forking (`None` when absent or `null`).
    pub seed_length: Option<u64>,
}

/// The latest modification time (epoch milliseconds) of the segment and index files in session
/// directory `dir`: the time of its last append (or of the import or fork that wrote them).
/// `None` when it has none.
fn last_write_ms(dir: &Path) -> Result<Option<i64>> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io("read directory", dir, e))?;
    let mut last: Option<i64> = None;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("read directory", dir, e))?;
        let path = entry.path();
        if !path.extension().is_some_and(|e| e == "seg" || e == "idx") {
            continue;
        }
        let modified = entry
            .metadata()
            .and_then(|m| m.modified())
            .map_err(|e| Error::io("read the modification time of", &path, e))?;
        let ms = modified
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        last = Some(last.map_or(ms, |l| l.max(ms)));
    }
    Ok(last)
}

/// A directory of sessions.
#[derive(Debug)]
pub struct Store {
    root: PathBuf,
    config: StoreConfig,
    subscribers: Subscribers<StoreNotice>,
}

/// Whether the existing folder `dir` is a session's, given a moment to become one: a `create`
/// of the same id makes the folder first and its log and `session.json` a moment later, and
/// that is a session that exists, not a stray folder.
fn becomes_session_dir(dir: &Path) -> Result<bool> {
    for _ in 0..20 {
        if is_session_dir(dir)? {
            return Ok(true);
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    is_session_dir(dir)
}

impl Store {
    /// Opens the store in `root`, creating its folders (mode 0700) when missing, and reads its
    /// `agentlog.toml`.
    pub fn open(root: impl AsRef<Path>) -> Result<Store> {
        let root = root.as_ref().to_path_buf();
        create_private_dir(&root.join(SESSIONS_DIR))?;
        let config = StoreConfig::load(&root)?;
        Ok(Store {
            root,
            config,
            subscribers: Subscribers::new(),
        })
    }

    /// The store's root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The configuration read from `agentlog.toml`.
    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    /// Replaces the configuration used from now on (the file is not changed).
    pub fn set_config(&mut self, config: StoreConfig) {
        self.config = config;
    }

    /// Receives the store's notices (created, archived, unarchived, deleted, removed).
    pub fn subscribe(&self) -> Receiver<StoreNotice> {
        self.subscribers.subscribe()
    }

    /// The directory of session `id` (the id is checked: never a path).
    pub fn session_dir(&self, id: &str) -> Result<PathBuf> {
        validate_id(id)?;
        Ok(self.root.join(SESSIONS_DIR).join(id))
    }

    /// The directory of session `id`, which must be a session's: one holding `session.json`,
    /// or a log without it (a damaged session, whose commands then name the missing file). A
    /// directory that cannot be read is an error, never "no session".
    fn existing_dir(&self, id: &str) -> Result<PathBuf> {
        let dir = self.session_dir(id)?;
        // A session folder that is a link to somewhere else (another store's session) is
        // never written through.
        log::refuse_symlink(&dir).map_err(|e| Error::io("open session", &dir, e))?;
        if is_session_dir(&dir)? {
            Ok(dir)
        } else {
            Err(Error::NotFound(id.to_string()))
        }
    }

    /// Creates a new session. [`Error::Exists`] when the id is taken, also when another
    /// thread or process creates it at the same moment: of creates of one id, exactly one
    /// succeeds.
    pub fn create(&self, new: NewSession) -> Result<Session> {
        let id = match new.id {
            Some(id) => id,
            None => new_id(),
        };
        let dir = self.session_dir(&id)?;
        if dir.exists() {
            return Err(Error::Exists(id));
        }
        let mut meta = SessionMeta::new(id.clone(), now_ms());
        meta.title = new.title.into();
        meta.cwd = new.cwd.into();
        meta.config = new.config;
        let mut options = self.config.session_options();
        if let Some(d) = new.durability {
            options.log.durability = d;
        }
        let session = Session::create(&dir, meta, options)?;
        self.subscribers.send(&[StoreNotice::Created(id)]);
        Ok(session)
    }

    /// Builds a new session `id` in a hidden folder of the store with `build` (given the folder,
    /// which does not exist yet), then moves it into place: all or nothing. A failure, or an id
    /// taken meanwhile, leaves nothing behind.
    pub(crate) fn build_session<T>(
        &self,
        id: &str,
        prefix: &str,
        build: impl FnOnce(&Path) -> Result<T>,
    ) -> Result<T> {
        let dir = self.session_dir(id)?;
        if dir.exists() && !becomes_session_dir(&dir)? {
            return Err(Error::BadFile {
                path: dir,
                reason: "a folder of that name is in the store and is not a session (it holds no \
                         session.json): remove it, or choose another id"
                    .into(),
            });
        }
        if dir.exists() {
            return Err(Error::Exists(id.to_string()));
        }
        let sessions = self.root.join(SESSIONS_DIR);
        // What imports and forks killed half-way left behind (best effort: a failure to remove
        // it does not stop this one; `gc` reports it).
        let _ = import::remove_leftovers(&sessions);
        let value = self.build_and_rename(id, &dir, prefix, build)?;
        std::fs::File::open(&sessions)
            .and_then(|d| d.sync_all())
            .map_err(|e| Error::io("sync directory", &sessions, e))?;
        self.subscribers
            .send(&[StoreNotice::Created(id.to_string())]);
        Ok(value)
    }

    /// The part of [`Store::build_session`] that every way of building a session shares: `build`
    /// fills a hidden folder of the store, which is then renamed to `dir` (the session `id`'s
    /// folder). A failure, or an id taken meanwhile, removes the hidden folder.
    fn build_and_rename<T>(
        &self,
        id: &str,
        dir: &Path,
        prefix: &str,
        build: impl FnOnce(&Path) -> Result<T>,
    ) -> Result<T> {
        let temp = self.root.join(SESSIONS_DIR).join(import::temp_name(prefix));
        let value = match build(&temp) {
            Ok(v) => v,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&temp);
                return Err(e);
            }
        };
        if dir.exists() {
            let _ = std::fs::remove_dir_all(&temp);
            return Err(Error::Exists(id.to_string()));
        }
        // Never onto a folder that appeared meanwhile (a `create` of the same id claims its
        // folder by making it, empty at first, which a plain rename would replace).
        if let Err(e) = crate::util::rename_noreplace(&temp, dir) {
            let _ = std::fs::remove_dir_all(&temp);
            return Err(if e.kind() == std::io::ErrorKind::AlreadyExists {
                Error::Exists(id.to_string())
            } else {
                Error::io("rename", &temp, e)
            });
        }
        Ok(value)
    }

    /// Opens session `id` for writing (recovering it after a crash as the configuration allows;
    /// what opening found is the session's [`open_report`](Session::open_report)).
    pub fn open_session(&self, id: &str) -> Result<Session> {
        let dir = self.existing_dir(id)?;
        Session::open(dir, self.config.session_options())
    }

    /// Opens session `id` for reading (works while a writer appends): the reading counterpart
    /// of [`Store::open_session`].
    pub fn open_reader(&self, id: &str) -> Result<SessionReader> {
        SessionReader::open(self.existing_dir(id)?)
    }

    /// The former name of [`Store::open_reader`].
    #[deprecated(note = "renamed: use `Store::open_reader`")]
    pub fn reader(&self, id: &str) -> Result<SessionReader> {
        self.open_reader(id)
    }

    /// The ids of the sessions (deleted ones too with [`Deleted::Include`]), sorted. A session
    /// whose `session.json` is missing (its log is there) or broken is listed: opening it names
    /// what is wrong ([`Error::BrokenMeta`]), so callers never skip it silently.
    pub fn ids(&self, deleted: Deleted) -> Result<Vec<String>> {
        let dir = self.root.join(SESSIONS_DIR);
        let rd = std::fs::read_dir(&dir).map_err(|e| Error::io("read directory", &dir, e))?;
        let mut ids = Vec::new();
        for entry in rd {
            let entry = entry.map_err(|e| Error::io("read directory", &dir, e))?;
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if validate_id(&name).is_err() {
                continue;
            }
            let path = entry.path();
            // A link is listed when it leads to a session: opening it names the refusal.
            if !entry
                .file_type()
                .is_ok_and(|t| t.is_dir() || t.is_symlink())
            {
                continue;
            }
            // A folder that cannot be looked into (permission denied) is listed: opening it
            // names the error, and the other sessions are still served.
            if let Ok(false) = is_session_dir(&path) {
                continue;
            }
            if deleted == Deleted::Skip {
                match SessionMeta::load(&entry.path()) {
                    Ok(m) if m.state == SessionState::Deleted => continue,
                    _ => {}
                }
            }
            ids.push(name);
        }
        ids.sort();
        Ok(ids)
    }

    /// What is known of session `id` (metadata, events, bytes, last event time).
    pub fn info(&self, id: &str) -> Result<SessionInfo> {
        let r = self.open_reader(id)?;
        let m = r.meta();
        Ok(SessionInfo {
            // The folder's name: the id the session is opened by, even if its session.json
            // was edited to say otherwise.
            id: id.to_string(),
            title: m.title.present().cloned(),
            state: m.state,
            events: r.len(),
            bytes: r.bytes_on_disk(),
            created_at: m.created_at,
            last_event_time: r.last_event_time()?,
            parent_session: m.parent_session.present().cloned(),
            seed_length: m.seed_length.present().copied(),
        })
    }

    /// The sessions that are not deleted, with their metadata, sorted by id (so by creation time
    /// for generated ids).
    pub fn list(&self) -> Result<Vec<SessionInfo>> {
        self.ids(Deleted::Skip)?
            .iter()
            .map(|id| self.info(id))
            .collect()
    }

    /// Changes the state in `session.json` under the session's lock (so no writer is active).
    /// Deleting needs no readable `session.json`: a broken one is kept beside as
    /// `session.json.damaged` and replaced (see [`Store::delete`]).
    fn set_state(&self, id: &str, state: SessionState) -> Result<()> {
        let dir = self.existing_dir(id)?;
        let _lock = log::lock_dir(&dir)?;
        if state == SessionState::Archived {
            // A damaged log is not archived: compressing the segments around the damage would
            // drop their indexes, the evidence `recover` reads.
            log::refuse_corruption(&dir)?;
        }
        self.set_state_locked(&dir, id, state)?;
        if state == SessionState::Archived {
            // Every segment of an archived session is compressed (docs/design.md, "Cold
            // segments"); one a killed writer left unsealed stays plain until a writer opens
            // the session again.
            log::cold::compress_locked(&dir, &log::OsStorage, true)?;
        }
        Ok(())
    }

    fn set_state_locked(&self, dir: &Path, id: &str, state: SessionState) -> Result<()> {
        let dir = dir.to_path_buf();
        let mut meta = match SessionMeta::load(&dir) {
            Ok(m) => m,
            Err(Error::BrokenMeta { .. }) if state == SessionState::Deleted => {
                SessionMeta::for_broken(&dir, id)?
            }
            Err(e) => return Err(e),
        };
        // A deleted session is brought back only by `unarchive`: archiving it would resurrect
        // it (and `gc` would no longer remove it).
        if meta.state == SessionState::Deleted && state == SessionState::Archived {
            return Err(Error::Deleted(id.to_string()));
        }
        meta.state = state;
        meta.save(&dir)
    }

    /// Checks session `id`'s `session.json` under its lock and repairs what can be
    /// ([`SessionMeta::repair`]: rebuilt from `LOGMETA` when missing or broken, a checksum added
    /// to an older file, a missing `LOGMETA` written). Fails while a writer has it open.
    pub fn repair_meta(&self, id: &str) -> Result<MetaRepair> {
        let dir = self.existing_dir(id)?;
        let _lock = log::lock_dir(&dir)?;
        SessionMeta::repair(&dir)
    }

    /// Archives session `id`: it stays readable, appends are refused until it is unarchived,
    /// and every segment of its log is compressed (cold segments: zstd in independently
    /// decodable blocks, read transparently by every reader; `export` stays byte-identical).
    /// Archiving an archived session compresses what is not compressed yet. Fails while a
    /// writer has it open.
    pub fn archive(&self, id: &str) -> Result<()> {
        self.set_state(id, SessionState::Archived)?;
        self.subscribers
            .send(&[StoreNotice::Archived(id.to_string())]);
        Ok(())
    }

    /// Makes an archived session writable again. Its compressed segments stay compressed:
    /// appends go to a new (plain) segment after them.
    pub fn unarchive(&self, id: &str) -> Result<()> {
        self.set_state(id, SessionState::Active)?;
        self.subscribers
            .send(&[StoreNotice::Unarchived(id.to_string())]);
        Ok(())
    }

    /// Deletes session `id`: hidden from listings at once, its files removed by [`Store::gc`].
    ///
    /// Works when the session's `session.json` is missing or broken ([`Error::BrokenMeta`]): it
    /// is kept as `session.json.damaged` and replaced by one rebuilt from `LOGMETA`, or, for a
    /// session without one, by the least that names it (the id, the time of its first event),
    /// with the state `deleted`.
    pub fn delete(&self, id: &str) -> Result<()> {
        self.set_state(id, SessionState::Deleted)?;
        self.subscribers
            .send(&[StoreNotice::Deleted(id.to_string())]);
        Ok(())
    }

    /// Removes session `id`, which its caller has just created and wrote no event to (a
    /// restore that found the stream lacking the session's first events): nothing of a
    /// half-made session is left behind. Refused while a writer has it open.
    #[cfg(feature = "nats")]
    pub(crate) fn remove_new(&self, id: &str) -> Result<()> {
        let dir = self.session_dir(id)?;
        let lock = log::lock_dir(&dir)?;
        std::fs::remove_dir_all(&dir).map_err(|e| Error::io("remove", &dir, e))?;
        drop(lock);
        self.subscribers
            .send(&[StoreNotice::Removed(id.to_string())]);
        Ok(())
    }

    /// Garbage collection: removes the files of deleted sessions (and what an interrupted import
    /// left behind), and the `session.json.tmp` a failed metadata write left in any session.
    /// Returns the ids removed; a deleted session with a writer open is skipped. A session whose
    /// `session.json` cannot be read stops it with that error; [`Store::gc_skipping`] goes on.
    pub fn gc(&self) -> Result<Vec<String>> {
        self.gc_skipping(|_, e| Err(e))
    }

    /// [`Store::gc`], handing the error of a session whose state cannot be read (a missing or
    /// broken `session.json`) to `on_error` with its id: `Ok(())` leaves that session as it is
    /// and goes on, `Err` stops with that error.
    pub fn gc_skipping<G>(&self, mut on_error: G) -> Result<Vec<String>>
    where
        G: FnMut(&str, Error) -> Result<()>,
    {
        let sessions = self.root.join(SESSIONS_DIR);
        let mut removed = Vec::new();
        for id in self.ids(Deleted::Include)? {
            let dir = sessions.join(&id);
            let state = match SessionMeta::load(&dir) {
                Ok(meta) => meta.state,
                Err(e) => {
                    on_error(&id, e)?;
                    continue;
                }
            };
            if state != SessionState::Deleted {
                // A temporary file a failed metadata write left; the lock is taken only then
                // (a writer holding it may be writing that file).
                if dir.join(META_TMP_FILE).exists() || dir.join(log::LOGMETA_TMP_FILE).exists() {
                    if let Ok(_lock) = log::lock_dir(&dir) {
                        remove_stale_tmp(&dir)?;
                    }
                }
                continue;
            }
            let Ok(lock) = log::lock_dir(&dir) else {
                continue;
            };
            std::fs::remove_dir_all(&dir).map_err(|e| Error::io("remove", &dir, e))?;
            drop(lock);
            self.subscribers.send(&[StoreNotice::Removed(id.clone())]);
            removed.push(id);
        }
        import::remove_leftovers(&sessions)?;
        Ok(removed)
    }

    /// Archives every active session whose last append is older than `age` (judged by the
    /// modification time of its log's files, so an import of old events is not idle; see
    /// [`Store::idle_skipping`]). Returns the ids archived; sessions with a writer open are
    /// skipped. A session that cannot be read stops it with that error;
    /// [`Store::archive_idle_skipping`] goes on.
    pub fn archive_idle(&self, age: Duration) -> Result<Vec<String>> {
        self.archive_idle_skipping(age, |_, e| Err(e))
    }

    /// The active sessions whose last append is older than `age`, sorted by id, without changing
    /// them (what [`Store::archive_idle`] would archive). The last append is the latest
    /// modification time of the log's segment and index files (written at every append and at
    /// import or fork, whatever the events' own times say). A session that cannot be read is
    /// handed to `on_error` with its id: `Ok(())` leaves it out and goes on, `Err` stops with
    /// that error.
    pub fn idle_skipping<G>(&self, age: Duration, mut on_error: G) -> Result<Vec<String>>
    where
        G: FnMut(&str, Error) -> Result<()>,
    {
        let cutoff = now_ms().saturating_sub(i64::try_from(age.as_millis()).unwrap_or(i64::MAX));
        let mut idle = Vec::new();
        for id in self.ids(Deleted::Skip)? {
            let info = match self.info(&id) {
                Ok(info) => info,
                Err(e) => {
                    on_error(&id, e)?;
                    continue;
                }
            };
            if info.state != SessionState::Active {
                continue;
            }
            let last = match last_write_ms(&self.root.join(SESSIONS_DIR).join(&id)) {
                Ok(last) => last,
                Err(e) => {
                    on_error(&id, e)?;
                    continue;
                }
            };
            if last.unwrap_or(info.created_at) < cutoff {
                idle.push(info.id);
            }
        }
        Ok(idle)
    }

    /// [`Store::archive_idle`], handing the error of a session that cannot be read (a broken
    /// `session.json`, a damaged log) to `on_error` with its id: `Ok(())` leaves it as it is and
    /// goes on, `Err` stops with that error.
    pub fn archive_idle_skipping<G>(&self, age: Duration, on_error: G) -> Result<Vec<String>>
    where
        G: FnMut(&str, Error) -> Result<()>,
    {
        let mut archived = Vec::new();
        for id in self.idle_skipping(age, on_error)? {
            match self.archive(&id) {
                Ok(()) => archived.push(id),
                // A writer opened it meanwhile: it is not idle.
                Err(Error::Log(log::Error::Locked { .. })) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(archived)
    }
}
