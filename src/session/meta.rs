//! `session.json`: a session's identity and metadata, replaced atomically.
//!
//! The session header (EVENTS.md §4) is kept whole, as `export --header` writes it, under its own
//! member `header`; the store's own bookkeeping sits beside it, so no member of the header can
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

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::event::{parse_header_line, parse_json, Map, Opt, SessionHeader, Value};

/// The name of the metadata file in a session directory.
pub const META_FILE: &str = "session.json";

/// The members of `session.json` that belong to the store (the current layout).
const STORE_MEMBERS: [&str; 3] = ["header", "state", "config"];

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

    /// Reads `<dir>/session.json`.
    pub fn load(dir: &Path) -> Result<SessionMeta> {
        let path = dir.join(META_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Error::NotFound(dir.display().to_string())
            } else {
                Error::io("read", &path, e)
            }
        })?;
        SessionMeta::from_json(&text).map_err(|reason| Error::BadFile { path, reason })
    }

    /// Writes `<dir>/session.json` atomically (a temporary file, synced, renamed over it, the
    /// directory synced), mode 0600.
    pub fn save(&self, dir: &Path) -> Result<()> {
        write_atomic(&dir.join(META_FILE), self.to_json().as_bytes())
    }
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

/// Replaces `path` with `bytes` atomically and durably.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp: PathBuf = path.with_extension("json.tmp");
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| Error::io("create", &tmp, e))?;
    f.write_all(bytes)
        .and_then(|()| f.write_all(b"\n"))
        .and_then(|()| f.sync_all())
        .map_err(|e| Error::io("write", &tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io("rename", &tmp, e))?;
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
}
