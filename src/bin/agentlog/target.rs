//! The store and the SESSION argument: an id in the store, or the path of a session directory.
//! Also the wording of library errors, with what to do about them.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Result};

use agentlog::log;
use agentlog::session::{validate_id, SessionOptions, SessionReader, META_FILE};
use agentlog::store::{Store, StoreConfig, CONFIG_FILE, SESSIONS_DIR};

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

    /// True when the store has a sessions folder (reading commands never create one).
    pub fn exists(&self) -> bool {
        self.root.join(SESSIONS_DIR).is_dir()
    }

    /// Opens the store, creating its folders when missing.
    pub fn open_store(&self) -> Result<Store> {
        Store::open(&self.root).map_err(|e| anyhow!("cannot open store {}: {e}", self.shown()))
    }

    /// Resolves a SESSION argument: a path when it contains `/`; otherwise the store's session
    /// of that id when there is one, else a session directory of that name in the current
    /// directory, else an error.
    pub fn resolve(&self, arg: &str) -> Result<Target> {
        let as_path = Path::new(arg);
        if !arg.contains('/') {
            let in_store = validate_id(arg).is_ok()
                && self
                    .root
                    .join(SESSIONS_DIR)
                    .join(arg)
                    .join(META_FILE)
                    .is_file();
            if in_store || !as_path.is_dir() {
                validate_id(arg).map_err(|e| anyhow!("{e}"))?;
                if !in_store {
                    return Err(anyhow!(
                        "no session {arg:?} in store {} (list sessions with `agentlog ls`; \
                         choose the store with --store DIR or $AGENTLOG_STORE)",
                        self.shown()
                    ));
                }
                return Ok(self.in_store(arg));
            }
        }
        if !as_path.join(META_FILE).is_file() {
            return Err(anyhow!(
                "no session at {arg:?}: not a session directory (one holds {META_FILE}), and no \
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
        let config = match &self.store {
            Some(root) if root.join(CONFIG_FILE).is_file() => {
                StoreConfig::load(root).map_err(|e| anyhow!("{e}"))?
            }
            _ => StoreConfig::default(),
        };
        Ok(config.session_options())
    }

    /// A library error about this session, worded with what to do about it.
    pub fn error(&self, e: agentlog::Error) -> anyhow::Error {
        explain(e, &self.label)
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
            "session {label} is damaged: {c}; see `agentlog verify {label}`, and \
             `agentlog recover --salvage {label}` to keep every valid event before the damage"
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
