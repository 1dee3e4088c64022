//! `session.json`: a session's identity and metadata, replaced atomically.
//!
//! ```json
//! {"id":"…","title":"…","createdAt":1755000000001,"cwd":"/home/dev/demo","state":"active",
//!  "parentSession":"…","seedLength":42,"config":{…}, …unknown members kept…}
//! ```
//!
//! Absent optional members are left out. The time of the last event is not stored: it is read
//! from the log.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::event::{parse_json, Map, Number, SessionHeader, Value};

/// The name of the metadata file in a session directory.
pub const META_FILE: &str = "session.json";

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

/// A session's metadata (`session.json`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionMeta {
    /// The session id.
    pub id: String,
    /// A human title.
    pub title: Option<String>,
    /// Creation time, epoch milliseconds.
    pub created_at: i64,
    /// The working directory the agent ran in.
    pub cwd: Option<String>,
    /// Active, archived or deleted.
    pub state: SessionState,
    /// The session this one was forked from.
    pub parent_session: Option<String>,
    /// How many events were copied from the parent when forking.
    pub seed_length: Option<u64>,
    /// The agent's configuration for this session, kept verbatim.
    pub config: Option<Value>,
    /// Unknown members (of `session.json`, or of an imported session header), in order.
    pub extra: Map,
}

impl SessionMeta {
    /// Metadata for a new session.
    pub fn new(id: impl Into<String>, created_at: i64) -> Self {
        SessionMeta {
            id: id.into(),
            title: None,
            created_at,
            cwd: None,
            state: SessionState::Active,
            parent_session: None,
            seed_length: None,
            config: None,
            extra: Map::new(),
        }
    }

    /// Metadata from an imported header line.
    pub fn from_header(h: &SessionHeader) -> Self {
        SessionMeta {
            id: h.id.clone(),
            title: h.title.present().cloned(),
            created_at: h.created_at,
            cwd: h.cwd.present().cloned(),
            state: SessionState::Active,
            parent_session: h.parent_session.present().cloned(),
            seed_length: h.seed_length.present().copied(),
            config: None,
            extra: h.extra.clone(),
        }
    }

    /// The header line `export --header` writes.
    pub fn to_header(&self) -> SessionHeader {
        SessionHeader {
            version: 1,
            id: self.id.clone(),
            created_at: self.created_at,
            title: self.title.clone().into(),
            cwd: self.cwd.clone().into(),
            parent_session: self.parent_session.clone().into(),
            seed_length: self.seed_length.into(),
            extra: self.extra.clone(),
        }
    }

    /// The JSON text of `session.json`.
    pub fn to_json(&self) -> String {
        let mut m = Map::new();
        let mut put = |k: &str, v: Value| {
            // Known members come first and are unique; an unknown member of the same name is
            // dropped below.
            let _ = m.push(k, v);
        };
        put("id", Value::String(self.id.clone()));
        if let Some(t) = &self.title {
            put("title", Value::String(t.clone()));
        }
        put(
            "createdAt",
            Value::Number(Number::from_i64(self.created_at)),
        );
        if let Some(c) = &self.cwd {
            put("cwd", Value::String(c.clone()));
        }
        put("state", Value::String(self.state.as_str().into()));
        if let Some(p) = &self.parent_session {
            put("parentSession", Value::String(p.clone()));
        }
        if let Some(n) = self.seed_length {
            put("seedLength", Value::Number(Number::from_u64(n)));
        }
        if let Some(c) = &self.config {
            put("config", c.clone());
        }
        for (k, v) in self.extra.iter() {
            let _ = m.push(k, v.clone());
        }
        Value::Object(m).to_string()
    }

    /// Reads `session.json` text.
    pub fn from_json(text: &str) -> std::result::Result<SessionMeta, String> {
        let v = parse_json(text).map_err(|e| e.to_string())?;
        let Value::Object(map) = v else {
            return Err("expected a JSON object".into());
        };
        let mut meta = SessionMeta::new(String::new(), 0);
        let mut have_id = false;
        let mut have_created = false;
        for member in map.into_members() {
            let (k, v) = (member.key, member.value);
            let string = |v: &Value| match v {
                Value::String(s) => Ok(s.clone()),
                other => Err(format!("{k} must be a string, found {}", other.kind())),
            };
            match k.as_str() {
                "id" => {
                    meta.id = string(&v)?;
                    have_id = true;
                }
                "title" => meta.title = opt_string(&k, &v)?,
                "createdAt" => {
                    meta.created_at = match &v {
                        Value::Number(n) => n.as_i64(),
                        _ => None,
                    }
                    .ok_or("createdAt must be an integer")?;
                    have_created = true;
                }
                "cwd" => meta.cwd = opt_string(&k, &v)?,
                "state" => {
                    let s = string(&v)?;
                    meta.state = SessionState::from_name(&s).ok_or_else(|| {
                        format!(
                            "state must be \"active\", \"archived\" or \"deleted\", found {s:?}"
                        )
                    })?;
                }
                "parentSession" => meta.parent_session = opt_string(&k, &v)?,
                "seedLength" => {
                    meta.seed_length = match &v {
                        Value::Null => None,
                        Value::Number(n) => {
                            Some(n.as_u64().ok_or("seedLength must be an integer")?)
                        }
                        _ => return Err("seedLength must be an integer".into()),
                    }
                }
                "config" => meta.config = Some(v),
                _ => {
                    let _ = meta.extra.push(k, v);
                }
            }
        }
        if !have_id {
            return Err("the member \"id\" is missing".into());
        }
        if !have_created {
            return Err("the member \"createdAt\" is missing".into());
        }
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

fn opt_string(k: &str, v: &Value) -> std::result::Result<Option<String>, String> {
    match v {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
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
        let text = r#"{"id":"s1","title":"t","createdAt":5,"state":"archived","seedLength":3,"config":{"b":1.0,"a":null},"x":[1]}"#;
        let m = SessionMeta::from_json(text).unwrap();
        assert_eq!(m.state, SessionState::Archived);
        assert_eq!(m.seed_length, Some(3));
        assert_eq!(m.to_json(), text);
    }

    #[test]
    fn refuses_bad_members() {
        assert!(SessionMeta::from_json(r#"{"createdAt":1}"#)
            .unwrap_err()
            .contains("id"));
        assert!(
            SessionMeta::from_json(r#"{"id":"a","createdAt":1,"state":"gone"}"#)
                .unwrap_err()
                .contains("state")
        );
        assert!(SessionMeta::from_json(r#"{"id":"a","createdAt":"1"}"#).is_err());
        assert!(SessionMeta::from_json("[1]").is_err());
    }
}
