//! `agentlog.toml`: a store's configuration, with documented defaults.
//!
//! ```toml
//! # Size at which a session's segment is sealed and a new one started.
//! segment_size = "64MiB"        # bytes, or a string with a unit: B, KiB, MiB, GiB
//! # What an append waits for: "os" (survives kill -9), "sync" (survives power loss),
//! # or "periodic" (an fdatasync every sync_interval_ms).
//! durability = "os"
//! sync_interval_ms = 1000       # only for durability = "periodic"
//! # Store assistant/chunk events (false: they are dropped when appended live).
//! keep_raw_chunks = true
//! # The largest event accepted (its stored size).
//! max_event_size = "16MiB"
//! # Compress each sealed segment of a session being written (zstd, in blocks; readers read
//! # them transparently; docs/design.md, "Cold segments"). `archive` compresses every segment
//! # whatever this says.
//! compress_sealed = false
//! # Redaction at append (off by default: the default contract is lossless). docs/events.md §9.
//! [redact]
//! rules = ["credentials", "pii"]  # sets (credentials, pii) or single rule names
//! mode = "replace"                # "[REDACTED:<rule>]"; "hash": "[HASH:<rule>:<12 hex>]"
//! [redact.custom]                 # named custom rules (regular expressions), always on
//! ticket = "TICKET-[0-9]{6}"
//! ```
//!
//! Every key is optional; an unknown key or a bad value is an error naming it.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::log::{self, Durability};
use crate::redact::{Mode, Redactor};
use crate::session::SessionOptions;

/// The name of the configuration file in a store's root.
pub const CONFIG_FILE: &str = "agentlog.toml";

/// A store's configuration (`agentlog.toml`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreConfig {
    /// Size at which a segment is sealed. Default: 64 MiB.
    pub segment_size: u64,
    /// What an append waits for. Default: [`Durability::Os`].
    pub durability: Durability,
    /// Keep `assistant/chunk` events. Default: `true`.
    pub keep_raw_chunks: bool,
    /// The largest event accepted, in bytes. Default: 16 MiB.
    pub max_event_size: u64,
    /// Compress each sealed segment of a session being written (in the background, after the
    /// seal). Default: `false`.
    pub compress_sealed: bool,
    /// Redaction at append (`[redact]`). Default: `None`, off.
    pub redact: Option<RedactConfig>,
    /// `redact`, compiled (with the store's key in hash mode).
    compiled: Compiled,
}

/// The `[redact]` table of `agentlog.toml` (docs/events.md §9).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RedactConfig {
    /// Set names (`credentials`, `pii`) and rule names (`rules`).
    pub rules: Vec<String>,
    /// Named custom rules, `(name, regular expression)` (`[redact.custom]`), always on.
    pub custom: Vec<(String, String)>,
    /// What replaces a match (`mode`: `"replace"` or `"hash"`).
    pub mode: Mode,
}

impl RedactConfig {
    /// The redactor of this configuration (`key`: the store's hash key).
    pub fn redactor(&self, key: Option<[u8; 32]>) -> std::result::Result<Redactor, String> {
        Redactor::new(&self.rules, &self.custom, self.mode, key)
    }
}

/// The compiled redactor: compared through the configuration it was built from.
#[derive(Debug, Clone, Default)]
struct Compiled(Option<Arc<Redactor>>);

impl PartialEq for Compiled {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for Compiled {}

fn redact_table(v: &toml::Value) -> std::result::Result<RedactConfig, String> {
    let t = v
        .as_table()
        .ok_or_else(|| format!("redact: expected a table, found {}", v.type_str()))?;
    let mut c = RedactConfig::default();
    for (key, v) in t {
        match key.as_str() {
            "rules" => {
                let list = v.as_array().ok_or_else(|| {
                    format!(
                        "redact.rules: expected a list of names, found {}",
                        v.type_str()
                    )
                })?;
                for item in list {
                    c.rules.push(
                        item.as_str()
                            .ok_or_else(|| {
                                format!("redact.rules: expected names, found {}", item.type_str())
                            })?
                            .to_string(),
                    );
                }
            }
            "mode" => {
                c.mode = match v.as_str() {
                    Some("replace") => Mode::Replace,
                    Some("hash") => Mode::Hash,
                    _ => {
                        return Err(format!(
                            "redact.mode: expected \"replace\" or \"hash\", found {v:?}"
                        ))
                    }
                }
            }
            "custom" => {
                let t = v.as_table().ok_or_else(|| {
                    format!(
                        "redact.custom: expected a table of name = \"regex\", found {}",
                        v.type_str()
                    )
                })?;
                for (name, pattern) in t {
                    let p = pattern.as_str().ok_or_else(|| {
                        format!(
                            "redact.custom.{name}: expected a regular expression string, found {}",
                            pattern.type_str()
                        )
                    })?;
                    c.custom.push((name.clone(), p.to_string()));
                }
            }
            other => {
                return Err(format!(
                    "unknown key redact.{other} (known: rules, mode, custom)"
                ))
            }
        }
    }
    c.redactor(None).map_err(|e| format!("redact: {e}"))?;
    Ok(c)
}

impl Default for StoreConfig {
    fn default() -> Self {
        let log = log::Options::default();
        StoreConfig {
            segment_size: log.segment_size,
            durability: log.durability,
            keep_raw_chunks: true,
            max_event_size: log.max_event_size,
            compress_sealed: log.compress_sealed,
            redact: None,
            compiled: Compiled(None),
        }
    }
}

fn size(key: &str, v: &toml::Value) -> std::result::Result<u64, String> {
    match v {
        toml::Value::Integer(n) if *n > 0 => Ok(*n as u64),
        toml::Value::Integer(n) => Err(format!("{key} = {n}: a size must be greater than 0")),
        toml::Value::String(s) => parse_size(s).ok_or_else(|| {
            format!(
                "{key} = {s:?}: expected a size such as 65536, \"64KiB\", \"64MiB\" or \"1GiB\""
            )
        }),
        other => Err(format!(
            "{key}: expected a size, found {}",
            other.type_str()
        )),
    }
}

/// Parses `"64MiB"`, `"64 MiB"`, `"4096"`, `"1GiB"`, `"16KB"` (units are powers of 1024).
pub(crate) fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().ok()?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(mult).filter(|&n| n > 0)
}

impl StoreConfig {
    /// Reads `<root>/agentlog.toml`; the defaults when the file does not exist.
    pub fn load(root: &Path) -> Result<StoreConfig> {
        let path = root.join(CONFIG_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                let mut c = StoreConfig::parse(&text).map_err(|reason| Error::BadFile {
                    path: path.clone(),
                    reason,
                })?;
                if let Some(r) = &c.redact {
                    if r.mode == Mode::Hash {
                        let key = crate::redact::load_or_create_key(root)?;
                        let compiled = r
                            .redactor(Some(key))
                            .map_err(|reason| Error::BadFile { path, reason })?;
                        c.compiled = Compiled(Some(Arc::new(compiled)));
                    }
                }
                Ok(c)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(StoreConfig::default()),
            Err(e) => Err(Error::io("read", &path, e)),
        }
    }

    /// Parses the text of an `agentlog.toml`.
    pub fn parse(text: &str) -> std::result::Result<StoreConfig, String> {
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| e.to_string())?;
        let mut c = StoreConfig::default();
        let mut interval = None;
        let mut mode = None;
        for (key, v) in &table {
            match key.as_str() {
                "segment_size" => c.segment_size = size(key, v)?,
                "max_event_size" => c.max_event_size = size(key, v)?,
                "compress_sealed" => {
                    c.compress_sealed = v.as_bool().ok_or_else(|| {
                        format!(
                            "compress_sealed: expected true or false, found {}",
                            v.type_str()
                        )
                    })?
                }
                "keep_raw_chunks" => {
                    c.keep_raw_chunks = v.as_bool().ok_or_else(|| {
                        format!(
                            "keep_raw_chunks: expected true or false, found {}",
                            v.type_str()
                        )
                    })?
                }
                "redact" => c.redact = Some(redact_table(v)?),
                "durability" => {
                    let s = v.as_str().ok_or_else(|| {
                        format!(
                            "durability: expected \"os\", \"sync\" or \"periodic\", found {}",
                            v.type_str()
                        )
                    })?;
                    mode = Some(s.to_string());
                }
                "sync_interval_ms" => {
                    let ms = v.as_integer().filter(|&n| n > 0).ok_or_else(|| {
                        format!(
                            "sync_interval_ms: expected a positive integer, found {}",
                            v.type_str()
                        )
                    })?;
                    interval = Some(Duration::from_millis(ms as u64));
                }
                other => {
                    return Err(format!(
                        "unknown key {other:?} (known: segment_size, durability, \
                         sync_interval_ms, keep_raw_chunks, max_event_size, compress_sealed, \
                         redact)"
                    ))
                }
            }
        }
        c.durability = match mode.as_deref() {
            None | Some("os") => Durability::Os,
            Some("sync") => Durability::Sync,
            Some("periodic") => Durability::Periodic(interval.unwrap_or(Duration::from_secs(1))),
            Some(other) => {
                return Err(format!(
                    "durability = {other:?}: expected \"os\", \"sync\" or \"periodic\""
                ))
            }
        };
        if let Some(r) = &c.redact {
            c.compiled = Compiled(Some(Arc::new(r.redactor(None)?)));
        }
        c.session_options()
            .log
            .validate()
            .map_err(|e| e.to_string())?;
        Ok(c)
    }

    /// The options sessions of this store are opened with.
    pub fn session_options(&self) -> SessionOptions {
        SessionOptions {
            log: log::Options::default()
                .segment_size(self.segment_size)
                .max_event_size(self.max_event_size)
                .durability(self.durability)
                .compress_sealed(self.compress_sealed),
            keep_raw_chunks: self.keep_raw_chunks,
            redact: self.compiled.0.clone(),
        }
    }

    /// The redactor of `[redact]` (with the store's key in hash mode), when it is on.
    pub fn redactor(&self) -> Option<&Arc<Redactor>> {
        self.compiled.0.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_full_file() {
        assert_eq!(StoreConfig::parse("").unwrap(), StoreConfig::default());
        let c = StoreConfig::parse(
            "segment_size = \"8MiB\"\ndurability = \"periodic\"\nsync_interval_ms = 250\n\
             keep_raw_chunks = false\nmax_event_size = 1048576\n",
        )
        .unwrap();
        assert_eq!(c.segment_size, 8 << 20);
        assert_eq!(
            c.durability,
            Durability::Periodic(Duration::from_millis(250))
        );
        assert!(!c.keep_raw_chunks);
        assert_eq!(c.max_event_size, 1 << 20);
    }

    #[test]
    fn mistakes_name_the_key() {
        for (text, needle) in [
            ("segmnt_size = 1", "segmnt_size"),
            ("durability = \"fast\"", "durability"),
            ("segment_size = \"lots\"", "segment_size"),
            ("keep_raw_chunks = 1", "keep_raw_chunks"),
            ("segment_size = 10", "segment_size"),
            ("x = ", "line 1"),
        ] {
            let e = StoreConfig::parse(text).unwrap_err();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64MiB"), Some(64 << 20));
        assert_eq!(parse_size("64 mb"), Some(64 << 20));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("1GiB"), Some(1 << 30));
        assert_eq!(parse_size("1.5GiB"), None);
        assert_eq!(parse_size("0"), None);
    }
}
