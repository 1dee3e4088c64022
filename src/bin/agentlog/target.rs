//! The store and the SESSION argument: an id in the store, or the path of a session directory.
//! Also the wording of library errors, with what to do about them.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Result};

use agentlog::log;
use agentlog::session::{validate_id, SessionOptions, SessionReader, META_FILE};
use agentlog::store::{Store, StoreConfig, SESSIONS_DIR};

/// The store the command works on.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// Its root directory, as given (`--store`, `$AGENTLOG_STORE`, or `./.agentlog`).
    pub root: PathBuf,
}

/// A session the command names.
#[derive(Debug, Clone)]
pub struct Target {
    /// The session directory.
    pub dir: PathBuf,
    /// How to name it in messages and hints: the id, or the path given.
    pub label: String,
    /// The root of the store it is in, when known (for its `agentlog.toml`).
    store: Option<PathBuf>,
}

impl Ctx {
    /// [`explain`] for a session of this store: "no session" also names the store.
    pub fn explain(&self, e: agentlog::Error, label: &str) -> anyhow::Error {
        match e {
            agentlog::Error::NotFound(_) => anyhow!(
                "no session {label:?} in store {} (list sessions with `agentlog ls`; choose the \
                 store with --store DIR or $AGENTLOG_STORE)",
                self.shown()
            ),
            other => explain(other, label),
        }
    }

    /// The store named by `--store`, else `$AGENTLOG_STORE` (when not empty), else `./.agentlog`.
    pub fn new(store: Option<PathBuf>) -> Ctx {
        let root = store
            .or_else(|| {
                std::env::var_os("AGENTLOG_STORE")
                    .filter(|v| !v.is_empty())
                    .map(PathBuf::from)
            })
            .unwrap_or_else(|| PathBuf::from("./.agentlog"));
        Ctx { root }
    }

    /// The store's root for messages.
    pub fn shown(&self) -> String {
        self.root.display().to_string()
    }

    /// True when the store has a sessions folder (reading commands never create one). A store
    /// that cannot be looked at (permission denied, …) is an error naming the path, never
    /// taken for a missing or empty store.
    ///
    /// A root that is not a directory (a file, `--store /etc/passwd`) is always an error.
    pub fn exists(&self) -> Result<bool> {
        match std::fs::metadata(&self.root) {
            Ok(m) if !m.is_dir() => return Err(self.not_a_store()),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            // A parent that is a file (`--store /etc/passwd/x`).
            Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {
                return Err(self.not_a_store())
            }
            Err(e) => return Err(io_error("cannot read store", &self.root, &e)),
        }
        let dir = self.root.join(SESSIONS_DIR);
        match std::fs::metadata(&dir) {
            Ok(m) => Ok(m.is_dir()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(io_error("cannot read store", &dir, &e)),
        }
    }

    /// The store must exist: reading commands never create one, and a missing store (a typo in
    /// `--store`) is an error, never an empty store.
    pub fn require(&self) -> Result<()> {
        if self.exists()? {
            return Ok(());
        }
        Err(anyhow!(
            "no store at {}: it holds no {SESSIONS_DIR}/ folder (choose the store with --store DIR \
             or $AGENTLOG_STORE; `agentlog create` or `agentlog import` makes one)",
            self.shown()
        ))
    }

    /// The error of a store path that is not a directory.
    fn not_a_store(&self) -> anyhow::Error {
        anyhow!(
            "{} is not a store directory (it, or a path above it, is a file); choose the store \
             with --store DIR or $AGENTLOG_STORE",
            self.shown()
        )
    }

    /// Opens the store, creating its folders when missing.
    pub fn open_store(&self) -> Result<Store> {
        // A file where the store should be: said plainly, before trying to create folders in it.
        self.exists()?;
        Store::open(&self.root).map_err(|e| self.error("cannot open store", e))
    }

    /// A library error of a store-wide command: `WHAT STORE: …`, or "permission denied" with
    /// the path that could not be read.
    pub fn error(&self, what: &str, e: agentlog::Error) -> anyhow::Error {
        match e {
            agentlog::Error::Io { op, path, source }
                if source.kind() == std::io::ErrorKind::PermissionDenied =>
            {
                anyhow!(
                    "{what} {}: {:#}",
                    self.shown(),
                    io_error(&format!("cannot {op}"), &path, &source)
                )
            }
            other => anyhow!("{what} {}: {other}", self.shown()),
        }
    }

    /// Resolves a SESSION argument: a path when it contains `/`; otherwise the store's session
    /// of that id when there is one, else a session directory of that name in the current
    /// directory, else an error.
    pub fn resolve(&self, arg: &str) -> Result<Target> {
        // A store path that is a file is an error whatever the argument.
        self.exists()?;
        let as_path = Path::new(arg);
        if !arg.contains('/') {
            let in_store =
                validate_id(arg).is_ok() && is_session(&self.root.join(SESSIONS_DIR).join(arg))?;
            if in_store || !is_dir(as_path)? {
                validate_id(arg).map_err(|e| anyhow!("{e}"))?;
                if !in_store {
                    // No store there at all (a typo in --store): said so, as `ls` says it.
                    self.require()?;
                    return Err(anyhow!(
                        "no session {arg:?} in store {} (list sessions with `agentlog ls`; \
                         choose the store with --store DIR or $AGENTLOG_STORE)",
                        self.shown()
                    ));
                }
                return Ok(self.in_store(arg));
            }
        }
        if std::fs::metadata(as_path).is_ok_and(|m| m.is_file()) {
            return Err(anyhow!(
                "{arg} is a file, not a session: a SESSION is an id in the store or the path of a \
                 session directory (to read a JSONL file into the store: agentlog import {arg})"
            ));
        }
        if !is_session(as_path)? {
            return Err(anyhow!(
                "no session at {arg:?}: not a session directory (one holds {META_FILE}, or a \
                 log whose {META_FILE} is lost), and no \
                 session of that id in store {}; a SESSION is an id in the store (1 to 128 \
                 characters from A-Z a-z 0-9 . _ -) or the path of a session directory",
                self.shown()
            ));
        }
        let store = as_path
            .parent()
            .filter(|p| p.file_name().is_some_and(|n| n == SESSIONS_DIR))
            .and_then(Path::parent)
            .map(Path::to_path_buf);
        Ok(Target {
            dir: as_path.to_path_buf(),
            label: arg.to_string(),
            store,
        })
    }

    /// The store's session `id` (an id the store listed: never looked up as a path).
    pub fn in_store(&self, id: &str) -> Target {
        Target {
            dir: self.root.join(SESSIONS_DIR).join(id),
            label: id.to_string(),
            store: Some(self.root.clone()),
        }
    }
}

impl Target {
    /// Opens the session for reading (works while another process writes).
    pub fn reader(&self) -> Result<SessionReader> {
        SessionReader::open(&self.dir).map_err(|e| self.error(e))
    }

    /// The session options of its store's `agentlog.toml` (defaults for a session outside a
    /// store, or a store without one).
    pub fn options(&self) -> Result<SessionOptions> {
        // A missing agentlog.toml is the defaults; one that cannot be read is an error.
        let config = match &self.store {
            Some(root) => StoreConfig::load(root).map_err(|e| match e {
                agentlog::Error::Io { path, source, .. } => io_error("cannot read", &path, &source),
                other => anyhow!("{other}"),
            })?,
            None => StoreConfig::default(),
        };
        Ok(config.session_options())
    }

    /// A library error about this session, worded with what to do about it.
    pub fn error(&self, e: agentlog::Error) -> anyhow::Error {
        explain(e, &self.label)
    }
}

/// Whether `dir` is a session directory (with its session.json, or a log whose session.json is
/// lost). A path that cannot be looked at is an error, never "no".
fn is_session(dir: &Path) -> Result<bool> {
    agentlog::session::is_session_dir(dir).map_err(|e| match e {
        agentlog::Error::Io { path, source, .. } => io_error("cannot read", &path, &source),
        other => anyhow!("{other}"),
    })
}

/// Whether `path` is a directory; "not found" is no, any other error (permission denied) an
/// error naming the path.
fn is_dir(path: &Path) -> Result<bool> {
    match std::fs::metadata(path) {
        Ok(m) => Ok(m.is_dir()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io_error("cannot read", path, &e)),
    }
}

/// An I/O error on `path`: "permission denied" said plainly, with the path.
pub fn io_error(what: &str, path: &Path, e: &std::io::Error) -> anyhow::Error {
    if e.kind() == std::io::ErrorKind::PermissionDenied {
        anyhow!(
            "permission denied: {what} {} ({e}); run as a user allowed to, or change its \
             permissions",
            path.display()
        )
    } else {
        anyhow!("{what} {}: {e}", path.display())
    }
}

/// [`explain`] of an error kept for later (a damaged session.json and permission errors are
/// worded as [`explain`] words them; other errors as they display).
pub fn explain_ref(e: &agentlog::Error, label: &str) -> Option<anyhow::Error> {
    match e {
        agentlog::Error::BrokenMeta { path, reason } => Some(explain(
            agentlog::Error::BrokenMeta {
                path: path.clone(),
                reason: reason.clone(),
            },
            label,
        )),
        agentlog::Error::Io { op, path, source }
            if source.kind() == std::io::ErrorKind::PermissionDenied =>
        {
            Some(anyhow!(
                "session {label}: {:#}",
                io_error(&format!("cannot {op}"), path, source)
            ))
        }
        _ => None,
    }
}

/// Words a library error about session `label` with what to do about it.
pub fn explain(e: agentlog::Error, label: &str) -> anyhow::Error {
    let e = match e {
        // A closed stdout: kept as the I/O error, so that main can tell it apart.
        agentlog::Error::Io { source, .. } if source.kind() == std::io::ErrorKind::BrokenPipe => {
            return anyhow::Error::new(source)
        }
        other => other,
    };
    match &e {
        agentlog::Error::Io { op, path, source }
            if source.kind() == std::io::ErrorKind::PermissionDenied =>
        {
            anyhow!(
                "session {label}: {:#}",
                io_error(&format!("cannot {op}"), path, source)
            )
        }
        agentlog::Error::Log(log::Error::Io { op, path, source })
            if source.kind() == std::io::ErrorKind::PermissionDenied =>
        {
            anyhow!(
                "session {label}: {:#}",
                io_error(&format!("cannot {op}"), path, source)
            )
        }
        agentlog::Error::BrokenMeta { path, reason } => {
            let logmeta = path.with_file_name(log::LOGMETA_FILE);
            let hint = if logmeta.exists() {
                format!(
                    "`agentlog recover {label}` rebuilds it from {}",
                    logmeta.display()
                )
            } else {
                format!(
                    "it has no {} to rebuild it from (an older agentlog created it): \
                     `agentlog recover {label}` says what to do",
                    log::LOGMETA_FILE
                )
            };
            let what = match reason.strip_prefix("missing") {
                Some(rest) => format!("is missing{rest}"),
                None => format!("is damaged: {reason}"),
            };
            anyhow!(
                "session {label}: its metadata file {} {what}; its events are not affected; \
                 {hint}",
                path.display()
            )
        }
        agentlog::Error::Log(log::Error::Locked { path, holder }) => anyhow!(
            "session {label} is open for writing by another process: its lock {} is held{}; stop \
             the other writer (or wait for it to finish) and retry",
            path.display(),
            holder
                .as_deref()
                .map(|h| format!(" by {h}"))
                .unwrap_or_default()
        ),
        agentlog::Error::Log(log::Error::Corrupt(c)) => anyhow!(
            "session {label} is damaged: {c}; `agentlog verify {label}` tells a torn tail, which \
             `agentlog recover {label}` cuts, from damage, for which `agentlog recover --salvage \
             {label}` keeps every valid event before it (and writes those after it to damaged/)"
        ),
        agentlog::Error::Log(log::Error::Incompatible { .. }) => {
            anyhow!("session {label}: {e} (written by another version of agentlog)")
        }
        agentlog::Error::NotFound(_) => anyhow!(
            "no session {label:?} (list sessions with `agentlog ls`; choose the store with \
             --store DIR or $AGENTLOG_STORE)"
        ),
        agentlog::Error::Archived(_) => anyhow!(
            "session {label} is archived and refuses appends; `agentlog unarchive {label}` makes \
             it writable again"
        ),
        agentlog::Error::Deleted(_) => anyhow!(
            "session {label} is deleted (its files go at the next `agentlog gc`); `agentlog \
             unarchive {label}` brings it back"
        ),
        // The error names the session already.
        agentlog::Error::Exists(_) => anyhow!("{e}"),
        _ => anyhow!("session {label}: {e}"),
    }
}
