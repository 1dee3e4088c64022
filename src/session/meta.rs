//! `session.json`: a session's identity and metadata, replaced atomically.
//!
//! The session header (docs/events.md §4) is kept whole, as `export --header` writes it, under its
//! own member `header`; the store's own bookkeeping sits beside it, so no member of the header can
//! collide with it:
//!
//! ```json
//! {"header":{"type":"session","version":1,"id":"…","createdAt":1755000000001,"title":"…",
//!            "cwd":"/home/dev/demo","parentSession":"…","seedLength":42, …unknown header members…},
//!  "state":"active","config":{…}, …unknown members of session.json…}
//! ```
//!
//! Inside `header`, an optional member is absent, `null` or a value, each kept as it was given;
//! unknown header members keep their order after the known ones. `state` and `config` (absent
//! when there is none) belong to the store and never reach the header.
//!
//! The layout written before (version 1 of agentlog's stores) is still read: a flat object
//! `{"id":…,"title"?,"createdAt":…,"cwd"?,"state":…,"parentSession"?,"seedLength"?,"config"?, …}`
//! recognised by its top-level `id`, which the current layout never writes. Its unknown members
//! were the header's (that is how they were exported), and are read as such. The next save
//! writes the current layout.
//!
//! The time of the last event is not stored: it is read from the log.
//!
//! # Checksum
//!
//! The file is two lines: the JSON object above, then `{"crc32":"xxxxxxxx"}`, the CRC-32 (IEEE,
//! as the log's records) of the first line's bytes (without its newline) in eight lowercase hex
//! digits. A file whose checksum line is there but damaged, or does not match, is damage
//! ([`Error::BrokenMeta`]). A file without the line (one JSON object, as agentlog wrote before)
//! is still read; the next save adds it.
//!
//! # Rebuilding
//!
//! When a session is created (store create, import, fork), what rebuilding `session.json` needs
//! (this JSON object as it was then, with the state `active`) is written once into the log's
//! `LOGMETA` ([`crate::log::write_meta`]). [`SessionMeta::repair`] rebuilds a missing, invalid
//! or checksum-failing `session.json` from it.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::event::{parse_header_line, parse_json, Map, Opt, SessionHeader, Value};
use crate::log;

/// The name of the metadata file in a session directory.
pub const META_FILE: &str = "session.json";

/// Where a metadata write is prepared before it is renamed over [`META_FILE`].
pub const META_TMP_FILE: &str = "session.json.tmp";

/// The members of `session.json` that belong to the store (the current layout).
const STORE_MEMBERS: [&str; 3] = ["header", "state", "config"];

/// How the checksum line starts; eight hex digits and `"}` follow.
const CHECKSUM_PREFIX: &str = "{\"crc32\":\"";

/// What [`SessionMeta::repair`] found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetaRepair {
    /// What was wrong with `session.json` (`None`: it was sound).
    pub problem: Option<String>,
    /// `session.json` was rebuilt from `LOGMETA` (with the state `active`, and the header and
    /// configuration the session was created with).
    pub rebuilt: bool,
    /// Where the damaged `session.json` was kept (`session.json.damaged`, or with a number).
    pub kept: Option<PathBuf>,
    /// `session.json` had no checksum (an older agentlog wrote it) and was written again with
    /// one.
    pub checksum_added: bool,
    /// `LOGMETA` was written from the sound `session.json`: the session had none (an older
    /// agentlog created it), or it was damaged (`logmeta_problem` says how).
    pub logmeta_written: bool,
    /// What is wrong with the `LOGMETA` there was: damaged (then written again, see
    /// `logmeta_written` and `logmeta_kept`), or unreadable (left as it is: `session.json` was
    /// sound, so nothing was lost, but it could not be rebuilt if it broke).
    pub logmeta_problem: Option<String>,
    /// Where the damaged `LOGMETA` was kept (`LOGMETA.damaged`, or with a number).
    pub logmeta_kept: Option<PathBuf>,
}

/// Whether a session takes appends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SessionState {
    /// Takes appends.
    #[default]
    Active,
    /// Read-only until unarchived.
    Archived,
    /// Hidden from listings; removed for good by garbage collection.
    Deleted,
}

impl SessionState {
    /// The state as written in `session.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionState::Active => "active",
            SessionState::Archived => "archived",
            SessionState::Deleted => "deleted",
        }
    }

    /// The state named `s`.
    pub fn from_name(s: &str) -> Option<Self> {
        match s {
            "active" => Some(SessionState::Active),
            "archived" => Some(SessionState::Archived),
            "deleted" => Some(SessionState::Deleted),
            _ => None,
        }
    }
}

/// A session's metadata (`session.json`): the session header's members, then the store's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionMeta {
    /// The session id.
    pub id: String,
    /// A human title: absent, `null` or a string, as the header gave it.
    pub title: Opt<String>,
    /// Creation time, epoch milliseconds.
    pub created_at: i64,
    /// The working directory the agent ran in (absent, `null` or a string).
    pub cwd: Opt<String>,
    /// Active, archived or deleted (the store's; never in the header).
    pub state: SessionState,
    /// The session this one was forked from (absent, `null` or an id).
    pub parent_session: Opt<String>,
    /// How many events were copied from the parent when forking (absent, `null` or a count).
    pub seed_length: Opt<u64>,
    /// The agent's configuration for this session, kept verbatim (the store's; never in the
    /// header).
    pub config: Option<Value>,
    /// Unknown members of the session header, in order: exported after the known ones by
    /// [`SessionMeta::to_header`]. Any name is allowed (`state` and `config` too).
    pub header_extra: Map,
    /// Unknown members of `session.json` itself (a newer agentlog's, say), in order: kept, never
    /// exported. A member named like one of the store's own (`header`, `state`, `config`) is
    /// not written.
    pub store_extra: Map,
}

impl SessionMeta {
    /// Metadata for a new session.
    pub fn new(id: impl Into<String>, created_at: i64) -> Self {
        SessionMeta {
            id: id.into(),
            title: Opt::Absent,
            created_at,
            cwd: Opt::Absent,
            state: SessionState::Active,
            parent_session: Opt::Absent,
            seed_length: Opt::Absent,
            config: None,
            header_extra: Map::new(),
            store_extra: Map::new(),
        }
    }

    /// Metadata from an imported header line: every member kept as given (`null` stays `null`).
    pub fn from_header(h: &SessionHeader) -> Self {
        SessionMeta {
            id: h.id.clone(),
            title: h.title.clone(),
            created_at: h.created_at,
            cwd: h.cwd.clone(),
            state: SessionState::Active,
            parent_session: h.parent_session.clone(),
            seed_length: h.seed_length.clone(),
            config: None,
            header_extra: h.extra.clone(),
            store_extra: Map::new(),
        }
    }

    /// The header line `export --header` writes: the imported header's members as they were.
    pub fn to_header(&self) -> SessionHeader {
        SessionHeader {
            version: 1,
            id: self.id.clone(),
            created_at: self.created_at,
            title: self.title.clone(),
            cwd: self.cwd.clone(),
            parent_session: self.parent_session.clone(),
            seed_length: self.seed_length.clone(),
            extra: self.header_extra.clone(),
        }
    }

    /// The JSON text of `session.json` (the current layout: see the module docs).
    pub fn to_json(&self) -> String {
        let mut out = String::from("{\"header\":");
        out.push_str(&self.to_header().to_canonical_string());
        out.push_str(",\"state\":");
        out.push_str(&Value::String(self.state.as_str().into()).to_string());
        if let Some(c) = &self.config {
            out.push_str(",\"config\":");
            out.push_str(&c.to_string());
        }
        for (k, v) in self.store_extra.iter() {
            if STORE_MEMBERS.contains(&k) {
                continue;
            }
            out.push(',');
            out.push_str(&Value::String(k.to_owned()).to_string());
            out.push(':');
            out.push_str(&v.to_string());
        }
        out.push('}');
        out
    }

    /// Reads `session.json` text, in the current layout or the one written before (a top-level
    /// `id`).
    pub fn from_json(text: &str) -> std::result::Result<SessionMeta, String> {
        let v = parse_json(text).map_err(|e| e.to_string())?;
        let Value::Object(map) = v else {
            return Err("expected a JSON object".into());
        };
        if map.get("id").is_some() {
            return from_flat_json(map);
        }
        let mut header = None;
        let mut state = SessionState::Active;
        let mut config = None;
        let mut store_extra = Map::new();
        for member in map.into_members() {
            let (k, v) = (member.key, member.value);
            match k.as_str() {
                "header" => {
                    if !matches!(v, Value::Object(_)) {
                        return Err(format!("header must be an object, found {}", v.kind()));
                    }
                    let h =
                        parse_header_line(&v.to_string()).map_err(|e| format!("header: {e}"))?;
                    if h.version != 1 {
                        return Err(format!(
                            "header: version {} is not supported (this build reads version 1)",
                            h.version
                        ));
                    }
                    header = Some(h);
                }
                "state" => state = state_named(&v)?,
                "config" => config = Some(v),
                _ => {
                    let _ = store_extra.push(k, v);
                }
            }
        }
        let header =
            header.ok_or("the member \"header\" (or, in the older layout, \"id\") is missing")?;
        let mut meta = SessionMeta::from_header(&header);
        meta.state = state;
        meta.config = config;
        meta.store_extra = store_extra;
        Ok(meta)
    }

    /// The text of the `session.json` file: [`SessionMeta::to_json`], then its checksum line
    /// (see the module docs), each ending with a newline.
    pub fn to_file_text(&self) -> String {
        let json = self.to_json();
        let crc = crc32fast::hash(json.as_bytes());
        format!("{json}\n{CHECKSUM_PREFIX}{crc:08x}\"}}\n")
    }

    /// Reads the text of a `session.json` file: the metadata, and whether the file carried a
    /// checksum (one written by an older agentlog does not).
    pub fn from_file_text(text: &str) -> std::result::Result<(SessionMeta, bool), String> {
        let body = text.strip_suffix('\n').unwrap_or(text);
        if let Some((json, last)) = body.rsplit_once('\n') {
            if last.starts_with(CHECKSUM_PREFIX) {
                let stored = checksum_of_line(last).ok_or_else(|| {
                    format!(
                        "the checksum line is damaged: {:?} is not {CHECKSUM_PREFIX}XXXXXXXX\"}}",
                        last.chars().take(40).collect::<String>()
                    )
                })?;
                let got = crc32fast::hash(json.as_bytes());
                if stored != got {
                    return Err(format!(
                        "checksum mismatch (stored {stored:#010x}, computed {got:#010x}): the \
                         file was changed or damaged after it was written"
                    ));
                }
                return Ok((SessionMeta::from_json(json)?, true));
            }
        }
        // A checksum line that is not the last: what follows it is the damage (said so, rather
        // than the parser's complaint about the checksum line itself).
        if let Some(at) = body
            .lines()
            .position(|l| l.starts_with(CHECKSUM_PREFIX))
            .filter(|&at| at + 1 < body.lines().count())
        {
            return Err(format!(
                "line {}: unexpected text after the checksum line (a session.json is one JSON \
                 object, then its checksum line)",
                at + 2
            ));
        }
        match SessionMeta::from_json(text) {
            Ok(meta) => Ok((meta, false)),
            Err(e) if body.contains('\n') => Err(format!(
                "{e} (a session.json is one JSON object, then its checksum line)"
            )),
            Err(e) => Err(e),
        }
    }

    /// Reads `<dir>/session.json`.
    ///
    /// A missing file is [`Error::NotFound`] when the directory holds no log either, and
    /// [`Error::BrokenMeta`] when it does (the session is there, its metadata is not); an
    /// invalid file, or one whose checksum fails, is [`Error::BrokenMeta`].
    pub fn load(dir: &Path) -> Result<SessionMeta> {
        SessionMeta::load_checked(dir).map(|(meta, _)| meta)
    }

    /// [`SessionMeta::load`], also saying whether the file carried a checksum.
    pub fn load_checked(dir: &Path) -> Result<(SessionMeta, bool)> {
        let path = dir.join(META_FILE);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(if holds_log(dir)? {
                    Error::BrokenMeta {
                        path,
                        reason: "missing (the session's log is there)".into(),
                    }
                } else {
                    Error::NotFound(dir.display().to_string())
                });
            }
            Err(e) => return Err(Error::io("read", &path, e)),
        };
        let text = String::from_utf8(bytes).map_err(|e| Error::BrokenMeta {
            path: path.clone(),
            reason: format!(
                "not UTF-8 text (byte offset {})",
                e.utf8_error().valid_up_to()
            ),
        })?;
        SessionMeta::from_file_text(&text).map_err(|reason| Error::BrokenMeta { path, reason })
    }

    /// Writes `<dir>/session.json` atomically (a temporary file, synced, renamed over it, the
    /// directory synced), mode 0600, with its checksum line. A failure (a full disk, say) leaves
    /// the file as it was and no temporary file behind.
    pub fn save(&self, dir: &Path) -> Result<()> {
        write_atomic(&dir.join(META_FILE), self.to_file_text().as_bytes())
    }

    /// What `LOGMETA` keeps of this metadata: the JSON object of `session.json` with the state
    /// `active`.
    fn logmeta_blob(&self) -> String {
        let mut m = self.clone();
        m.state = SessionState::Active;
        m.to_json()
    }

    /// Writes what rebuilding `session.json` needs into the log's `LOGMETA` (once: see
    /// [`crate::log::write_meta`]). `log_id` is the log's, when it has segments.
    pub fn write_logmeta(&self, dir: &Path, log_id: Option<log::LogId>) -> Result<()> {
        log::write_meta(dir, log_id, self.logmeta_blob().as_bytes())?;
        Ok(())
    }

    /// The metadata kept in the log's `LOGMETA`, as a session created with it starts (state
    /// `active`): `None` when the session has no `LOGMETA`.
    pub fn from_logmeta(dir: &Path) -> Result<Option<SessionMeta>> {
        let Some(blob) = log::read_meta(dir)? else {
            return Ok(None);
        };
        let path = dir.join(log::LOGMETA_FILE);
        let text = String::from_utf8(blob).map_err(|e| Error::BadFile {
            path: path.clone(),
            reason: format!("its metadata is not UTF-8 text: {e}"),
        })?;
        let mut meta = SessionMeta::from_json(&text).map_err(|reason| Error::BadFile {
            path,
            reason: format!("its metadata is not a session's: {reason}"),
        })?;
        meta.state = SessionState::Active;
        Ok(Some(meta))
    }

    /// Checks `<dir>/session.json` and repairs what can be: a missing, invalid or
    /// checksum-failing file, or another session's (its id is not the one `LOGMETA` names), is
    /// rebuilt from `LOGMETA` (the header and configuration the session was created with, state
    /// `active`; the damaged file is kept beside it as `session.json.damaged`); a sound file
    /// without a checksum is written again with one; a session without `LOGMETA` gets one from
    /// its sound `session.json`. It holds the session's writer lock while it works (no writer
    /// may be at work), and fails with [`log::Error::Locked`](crate::log::Error::Locked) while a writer has the session open.
    ///
    /// Fails with [`Error::BrokenMeta`] saying so when `session.json` is broken and there is no
    /// readable `LOGMETA` to rebuild it from.
    pub fn repair(dir: &Path) -> Result<MetaRepair> {
        let _lock = log::lock_dir(dir)?;
        let mut report = MetaRepair::default();
        let loaded = SessionMeta::load_checked(dir).and_then(|(meta, checksummed)| {
            match foreign_meta(dir, &meta) {
                Some(reason) => Err(Error::BrokenMeta {
                    path: dir.join(META_FILE),
                    reason,
                }),
                None => Ok((meta, checksummed)),
            }
        });
        match loaded {
            Ok((meta, checksummed)) => {
                if !checksummed {
                    meta.save(dir)?;
                    report.checksum_added = true;
                }
                match log::read_meta(dir) {
                    Ok(Some(_)) => {}
                    Ok(None) => {
                        meta.write_logmeta(dir, log_id_of(dir))?;
                        report.logmeta_written = true;
                    }
                    // Damaged (not unreadable): written again from the sound session.json,
                    // the damaged file kept beside it.
                    Err(e @ log::Error::Corrupt(_)) => {
                        report.logmeta_problem = Some(e.to_string());
                        report.logmeta_kept = keep_damaged(&dir.join(log::LOGMETA_FILE))?;
                        meta.write_logmeta(dir, log_id_of(dir))?;
                        report.logmeta_written = true;
                    }
                    Err(e) => report.logmeta_problem = Some(e.to_string()),
                }
                Ok(report)
            }
            Err(Error::BrokenMeta { path, reason }) => {
                let meta = match SessionMeta::from_logmeta(dir) {
                    Ok(Some(m)) => m,
                    Ok(None) => {
                        return Err(Error::BrokenMeta {
                            path,
                            reason: format!(
                                "{reason}; it cannot be rebuilt: the session has no {} (an \
                                 agentlog older than that file created it)",
                                log::LOGMETA_FILE
                            ),
                        })
                    }
                    Err(e) => {
                        return Err(Error::BrokenMeta {
                            path,
                            reason: format!(
                                "{reason}; it cannot be rebuilt: {} cannot be read either: {e}",
                                log::LOGMETA_FILE
                            ),
                        })
                    }
                };
                report.kept = keep_damaged(&path)?;
                meta.save(dir)?;
                report.problem = Some(reason);
                report.rebuilt = true;
                Ok(report)
            }
            Err(e) => Err(e),
        }
    }

    /// The metadata to write when a session whose `session.json` is broken is deleted: rebuilt
    /// from `LOGMETA` where it can be, else the least that names it (the folder's name as id, the
    /// time of its first event, or 0, as creation time). The damaged file is kept beside it.
    pub(crate) fn for_broken(dir: &Path, id: &str) -> Result<SessionMeta> {
        let meta = match SessionMeta::from_logmeta(dir) {
            Ok(Some(m)) => m,
            Ok(None) | Err(_) => {
                let first_time = log::LogReader::open(dir).ok().and_then(|r| {
                    let rec = r.iter().next()?.ok()?;
                    crate::event::access_event(rec.payload)
                        .ok()
                        .map(|e| e.time())
                });
                SessionMeta::new(id, first_time.unwrap_or(0))
            }
        };
        keep_damaged(&dir.join(META_FILE))?;
        Ok(meta)
    }
}

/// Why `meta` (a sound `session.json` of `dir`) is another session's: the session `LOGMETA`
/// names (written when the session was created) has another id. `None` when they agree, or
/// there is no readable `LOGMETA` to tell.
pub(crate) fn foreign_meta(dir: &Path, meta: &SessionMeta) -> Option<String> {
    let created = SessionMeta::from_logmeta(dir).ok()??;
    (created.id != meta.id).then(|| {
        format!(
            "it names session {:?} and {} (written when this session was created) names {:?}: \
             it is another session's",
            meta.id,
            log::LOGMETA_FILE,
            created.id
        )
    })
}

/// The checksum a checksum line holds, if it is exactly one.
fn checksum_of_line(line: &str) -> Option<u32> {
    let hex = line.strip_prefix(CHECKSUM_PREFIX)?.strip_suffix("\"}")?;
    if hex.len() != 8 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    u32::from_str_radix(hex, 16).ok()
}

/// The log id of the segments in `dir`, when they can be read.
fn log_id_of(dir: &Path) -> Option<log::LogId> {
    log::LogReader::open(dir).ok().and_then(|r| r.log_id())
}

/// Renames a damaged file (`session.json`, `LOGMETA`) to the first free `<name>.damaged[.N]`;
/// `None` when there was no file.
fn keep_damaged(path: &Path) -> Result<Option<PathBuf>> {
    if std::fs::symlink_metadata(path).is_err() {
        return Ok(None);
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    for n in 0..1000u32 {
        let kept = if n == 0 {
            path.with_file_name(format!("{name}.damaged"))
        } else {
            path.with_file_name(format!("{name}.damaged.{n}"))
        };
        if std::fs::symlink_metadata(&kept).is_ok() {
            continue;
        }
        std::fs::rename(path, &kept).map_err(|e| Error::io("rename", path, e))?;
        return Ok(Some(kept));
    }
    Err(Error::BadFile {
        path: path.to_path_buf(),
        reason: "a thousand damaged copies are kept beside it already: remove some".into(),
    })
}

/// True when `dir` holds a log (a segment file or `LOGMETA`): a session directory even without
/// its `session.json`. A directory that does not exist holds none; one that cannot be read is an
/// error (never taken for empty).
fn holds_log(dir: &Path) -> Result<bool> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(Error::io("read directory", dir, e)),
    };
    for entry in rd {
        let entry = entry.map_err(|e| Error::io("read directory", dir, e))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name == log::LOGMETA_FILE || name.ends_with(".seg") {
            return Ok(true);
        }
    }
    Ok(false)
}

/// True when `dir` is a session directory: it holds `session.json`, or a log without one (a
/// damaged session). Errors other than "not found" are returned, never taken for "no".
pub fn is_session_dir(dir: &Path) -> Result<bool> {
    match std::fs::symlink_metadata(dir.join(META_FILE)) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => holds_log(dir),
        Err(e) => Err(Error::io("read", dir.join(META_FILE), e)),
    }
}

/// Removes the `session.json.tmp` (and `LOGMETA.tmp`) a failed or killed metadata write left
/// (the caller holds the session's lock, so no write is under way). True when one was removed.
pub(crate) fn remove_stale_tmp(dir: &Path) -> Result<bool> {
    let mut removed = false;
    for name in [META_TMP_FILE, log::LOGMETA_TMP_FILE] {
        let tmp = dir.join(name);
        match std::fs::remove_file(&tmp) {
            Ok(()) => removed = true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("remove", &tmp, e)),
        }
    }
    Ok(removed)
}

/// Reads the layout written before: one flat object, its unknown members the header's.
fn from_flat_json(map: Map) -> std::result::Result<SessionMeta, String> {
    let mut meta = SessionMeta::new(String::new(), 0);
    let mut have_created = false;
    for member in map.into_members() {
        let (k, v) = (member.key, member.value);
        match k.as_str() {
            "id" => {
                meta.id = match v {
                    Value::String(s) => s,
                    other => return Err(format!("id must be a string, found {}", other.kind())),
                }
            }
            "title" => meta.title = opt_string(&k, v)?,
            "createdAt" => {
                meta.created_at = match &v {
                    Value::Number(n) => n.as_i64(),
                    _ => None,
                }
                .ok_or("createdAt must be an integer")?;
                have_created = true;
            }
            "cwd" => meta.cwd = opt_string(&k, v)?,
            "state" => meta.state = state_named(&v)?,
            "parentSession" => meta.parent_session = opt_string(&k, v)?,
            "seedLength" => {
                meta.seed_length = match &v {
                    Value::Null => Opt::Null,
                    Value::Number(n) => {
                        Opt::Present(n.as_u64().ok_or("seedLength must be an integer")?)
                    }
                    _ => return Err("seedLength must be an integer".into()),
                }
            }
            "config" => meta.config = Some(v),
            _ => {
                let _ = meta.header_extra.push(k, v);
            }
        }
    }
    if !have_created {
        return Err("the member \"createdAt\" is missing".into());
    }
    Ok(meta)
}

fn state_named(v: &Value) -> std::result::Result<SessionState, String> {
    let Value::String(s) = v else {
        return Err(format!("state must be a string, found {}", v.kind()));
    };
    SessionState::from_name(s).ok_or_else(|| {
        format!("state must be \"active\", \"archived\" or \"deleted\", found {s:?}")
    })
}

fn opt_string(k: &str, v: Value) -> std::result::Result<Opt<String>, String> {
    match v {
        Value::Null => Ok(Opt::Null),
        Value::String(s) => Ok(Opt::Present(s)),
        other => Err(format!("{k} must be a string, found {}", other.kind())),
    }
}

/// Replaces `path` with `bytes` atomically and durably. A failure removes the temporary file
/// (a full disk leaves no empty `session.json.tmp` behind).
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp: PathBuf = path.with_extension("json.tmp");
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(&tmp)
        .map_err(|e| Error::io("create", &tmp, e))?;
    let written = f
        .write_all(bytes)
        .and_then(|()| f.sync_all())
        .map_err(|e| Error::io("write", &tmp, e))
        .and_then(|()| std::fs::rename(&tmp, path).map_err(|e| Error::io("rename", &tmp, e)));
    if let Err(e) = written {
        drop(f);
        // Best effort: the error that matters is the write's.
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| Error::io("sync directory", dir, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_with_unknown_members() {
        let text = concat!(
            r#"{"header":{"type":"session","version":1,"id":"s1","createdAt":5,"title":"t","#,
            r#""seedLength":3,"state":"h","config":[1],"header":2},"#,
            r#""state":"archived","config":{"b":1.0,"a":null},"x":[1]}"#
        );
        let m = SessionMeta::from_json(text).unwrap();
        assert_eq!(m.state, SessionState::Archived);
        assert_eq!(m.seed_length, Opt::Present(3));
        assert_eq!(
            m.config.as_ref().unwrap().to_string(),
            r#"{"b":1.0,"a":null}"#
        );
        assert_eq!(
            m.header_extra.to_string(),
            r#"{"state":"h","config":[1],"header":2}"#
        );
        assert_eq!(m.store_extra.to_string(), r#"{"x":[1]}"#);
        assert_eq!(m.to_json(), text);
    }

    #[test]
    fn keeps_nulls_apart_from_absence() {
        let mut m = SessionMeta::new("s", 1);
        m.title = Opt::Null;
        m.seed_length = Opt::Null;
        m.cwd = Opt::Present("/w".into());
        let text = m.to_json();
        assert_eq!(
            text,
            r#"{"header":{"type":"session","version":1,"id":"s","createdAt":1,"title":null,"cwd":"/w","seedLength":null},"state":"active"}"#
        );
        assert_eq!(SessionMeta::from_json(&text).unwrap(), m);
    }

    #[test]
    fn reads_the_older_flat_layout() {
        let text = r#"{"id":"s1","title":"t","createdAt":5,"cwd":null,"state":"archived","seedLength":3,"config":{"b":1.0,"a":null},"x":[1]}"#;
        let m = SessionMeta::from_json(text).unwrap();
        assert_eq!(m.id, "s1");
        assert_eq!(m.title, Opt::Present("t".into()));
        assert_eq!(m.cwd, Opt::Null);
        assert_eq!(m.parent_session, Opt::Absent);
        assert_eq!(m.state, SessionState::Archived);
        assert_eq!(m.seed_length, Opt::Present(3));
        assert!(m.config.is_some());
        // Its unknown members were the header's.
        assert_eq!(m.header_extra.to_string(), r#"{"x":[1]}"#);
        assert!(m.store_extra.is_empty());
        // Written again in the current layout, it reads back the same.
        assert_eq!(SessionMeta::from_json(&m.to_json()).unwrap(), m);
    }

    #[test]
    fn store_members_in_store_extra_are_not_written_twice() {
        let mut m = SessionMeta::new("s", 1);
        for k in ["header", "state", "config", "y"] {
            let _ = m.store_extra.push(k, Value::Bool(true));
        }
        let text = m.to_json();
        assert!(text.ends_with(r#""state":"active","y":true}"#), "{text}");
        assert!(SessionMeta::from_json(&text).is_ok());
    }

    #[test]
    fn refuses_bad_members() {
        for (text, needle) in [
            (r#"{"createdAt":1}"#, "header"),
            (r#"{"id":"a","title":1,"createdAt":1}"#, "title"),
            (r#"{"id":"a","createdAt":1,"state":"gone"}"#, "state"),
            (r#"{"id":"a","createdAt":"1"}"#, "createdAt"),
            (r#"{"id":"a"}"#, "createdAt"),
            (r#"{"id":1,"createdAt":1}"#, "id"),
            ("[1]", "object"),
            (r#"{"header":[]}"#, "header"),
            (
                r#"{"header":{"type":"session","version":1,"createdAt":1}}"#,
                "id",
            ),
            (
                r#"{"header":{"type":"session","version":2,"id":"a","createdAt":1}}"#,
                "version",
            ),
            (
                r#"{"header":{"type":"session","version":1,"id":"a","createdAt":1,"title":2}}"#,
                "title",
            ),
            (
                r#"{"header":{"type":"session","version":1,"id":"a","createdAt":1},"state":3}"#,
                "state",
            ),
        ] {
            let err = SessionMeta::from_json(text).unwrap_err();
            assert!(err.contains(needle), "{text}: {err}");
        }
    }

    fn sample() -> SessionMeta {
        let mut m = SessionMeta::new("s1", 1_755_000_000_001);
        m.title = Opt::Present("flip test".into());
        m.cwd = Opt::Present("/home/dev".into());
        m.config = Some(Value::Bool(true));
        m
    }

    /// session.json had no checksum: 49 of 231 single-bit flips went unnoticed and changed what
    /// `export --header` printed (a title became "fliq test"). Now every single-bit flip of the
    /// file is damage, named with the file's path.
    #[test]
    fn every_bit_flip_of_session_json_is_damage() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let m = sample();
        m.save(dir).unwrap();
        let path = dir.join(META_FILE);
        let good = std::fs::read(&path).unwrap();
        assert_eq!(SessionMeta::load_checked(dir).unwrap(), (m, true));
        for bit in 0..good.len() * 8 {
            let mut b = good.clone();
            b[bit / 8] ^= 1 << (bit % 8);
            std::fs::write(&path, &b).unwrap();
            match SessionMeta::load(dir) {
                Err(Error::BrokenMeta { path: p, .. }) => assert_eq!(p, path),
                other => panic!("bit {bit} ({:?}): {other:?}", String::from_utf8_lossy(&b)),
            }
        }
    }

    /// Text after the checksum line is named by its line: the error said "line 2, column 1:
    /// unexpected text", the parser's complaint about the checksum line, when the garbage was on
    /// line 3 (QA pass).
    #[test]
    fn text_after_the_checksum_line_is_named_by_its_line() {
        let text = format!("{}garbage\n", sample().to_file_text());
        let err = SessionMeta::from_file_text(&text).unwrap_err();
        assert!(
            err.starts_with("line 3: unexpected text after the checksum line"),
            "{err}"
        );
    }

    /// A file an older agentlog wrote (one JSON object, no checksum line) is still read, as
    /// unchecksummed; the next save adds the checksum.
    #[test]
    fn reads_a_file_without_checksum_and_the_next_save_adds_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let m = sample();
        std::fs::write(dir.join(META_FILE), format!("{}\n", m.to_json())).unwrap();
        assert_eq!(SessionMeta::load_checked(dir).unwrap(), (m.clone(), false));
        let report = SessionMeta::repair(dir).unwrap();
        assert!(
            report.checksum_added && report.logmeta_written,
            "{report:?}"
        );
        assert_eq!(SessionMeta::load_checked(dir).unwrap(), (m.clone(), true));
        // And LOGMETA, written from it, rebuilds it.
        assert_eq!(SessionMeta::from_logmeta(dir).unwrap(), Some(m));
    }

    /// A missing, invalid or checksum-failing session.json is rebuilt from LOGMETA (state
    /// active, the damaged file kept); without LOGMETA the error says it cannot be rebuilt and
    /// why.
    #[test]
    fn repair_rebuilds_from_logmeta_or_says_why_not() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let mut m = sample();
        m.write_logmeta(dir, None).unwrap();
        m.state = SessionState::Archived;
        m.save(dir).unwrap();
        std::fs::write(dir.join(META_FILE), b"{\"header\":").unwrap();
        let report = SessionMeta::repair(dir).unwrap();
        assert!(report.rebuilt, "{report:?}");
        assert_eq!(report.kept, Some(dir.join("session.json.damaged")));
        let rebuilt = SessionMeta::load_checked(dir).unwrap();
        m.state = SessionState::Active;
        assert_eq!(rebuilt, (m, true));
        // Missing, beside a log: damage, not "no session".
        std::fs::remove_file(dir.join(META_FILE)).unwrap();
        assert!(matches!(
            SessionMeta::load(dir),
            Err(Error::BrokenMeta { .. })
        ));
        assert!(SessionMeta::repair(dir).unwrap().rebuilt);
        // Without LOGMETA it cannot be rebuilt, and says so.
        std::fs::remove_file(dir.join(log::LOGMETA_FILE)).unwrap();
        std::fs::write(dir.join(META_FILE), b"[").unwrap();
        std::fs::write(dir.join("00000000000000000000.seg"), b"").unwrap();
        let err = SessionMeta::repair(dir).unwrap_err().to_string();
        assert!(err.contains("no LOGMETA"), "{err}");
        // A directory without session.json and without a log is no session at all.
        let empty = tmp.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        assert!(matches!(SessionMeta::load(&empty), Err(Error::NotFound(_))));
    }

    /// A metadata write that fails left its temporary file behind (an empty session.json.tmp
    /// after a full disk); now the failure removes it and session.json is unchanged.
    #[test]
    fn a_failed_save_leaves_no_temporary_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        // session.json is a directory that is not empty: the rename over it fails.
        std::fs::create_dir_all(dir.join(META_FILE).join("x")).unwrap();
        let err = sample().save(dir).unwrap_err();
        assert!(err.to_string().contains("rename"), "{err}");
        assert!(!dir.join(META_TMP_FILE).exists());
        assert!(dir.join(META_FILE).join("x").is_dir());
    }
}
