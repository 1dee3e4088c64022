//! A tree of Codex rollouts and Claude Code transcripts for the import benchmarks: copies of the
//! six real samples of `tests/data/import/` (the same files as `shared/samples/import/`), each
//! copy a session of its own. A Codex copy gets a thread id of its own (every occurrence of the
//! sample's id, the `session_meta` id included, is replaced by a new one); a Claude
//! Code copy gets a file name of its own (the session id) and its lines' `sessionId` replaced the
//! same way. Nothing else changes: the lines are the samples' bytes.

// Shared by the bench and `make_import_tree`: each uses part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// Which samples a tree is made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    /// Codex and Claude Code samples.
    Both,
    /// The Codex rollouts only.
    Codex,
    /// The Claude Code transcripts only.
    ClaudeCode,
}

impl Which {
    pub fn from_name(s: &str) -> Option<Which> {
        match s {
            "both" | "auto" => Some(Which::Both),
            "codex" => Some(Which::Codex),
            "claude-code" => Some(Which::ClaudeCode),
            _ => None,
        }
    }

    fn subs(self) -> &'static [&'static str] {
        match self {
            Which::Both => &["codex", "claude-code"],
            Which::Codex => &["codex"],
            Which::ClaudeCode => &["claude-code"],
        }
    }
}

/// The samples directory (`tests/data/import` of the repository).
pub fn samples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/import")
}

/// The samples of one format (`codex` or `claude-code`), sorted, with their bytes.
fn samples(sub: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(samples_dir().join(sub))
        .expect("the samples directory")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|f| {
            let text = std::fs::read(&f).expect("a sample");
            (f, text)
        })
        .collect()
}

/// The bytes of one copy of the samples of `which`.
pub fn copy_bytes(which: Which) -> u64 {
    which
        .subs()
        .iter()
        .flat_map(|sub| samples(sub))
        .map(|(_, t)| t.len() as u64)
        .sum()
}

/// The id a sample's sessions are known by: a Codex rollout's `session_meta` id (first line), a
/// Claude Code transcript's first `sessionId`.
fn source_id(sub: &str, text: &[u8]) -> Option<String> {
    for line in text.split(|&b| b == b'\n').take(64) {
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(line) else {
            continue;
        };
        let id = if sub == "codex" {
            v["payload"]["id"].as_str().or_else(|| v["id"].as_str())
        } else {
            v["sessionId"].as_str()
        };
        if let Some(id) = id {
            return Some(id.to_owned());
        }
    }
    None
}

/// `old` replaced by `new` everywhere in `text`.
fn replace_all(text: &[u8], old: &[u8], new: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.windows(old.len()).position(|w| w == old) {
        out.extend_from_slice(&rest[..i]);
        out.extend_from_slice(new);
        rest = &rest[i + old.len()..];
    }
    out.extend_from_slice(rest);
    out
}

/// A new id of the form of a UUID (36 characters) for copy `copy` of sample `k` of `sub`.
fn new_id(sub: &str, copy: usize, k: usize) -> String {
    let tag = if sub == "codex" { 0xc0de } else { 0xc1a0 };
    format!("{copy:08x}-{tag:04x}-7000-8000-{k:012x}")
}

/// Writes `copies` copies of the samples of `which` under `root` (`<format>/<copy>/<file>`),
/// each a session of its own; returns the files and the bytes written.
pub fn make_tree(root: &Path, copies: usize, which: Which) -> (u64, u64) {
    let (mut files_written, mut bytes) = (0u64, 0u64);
    for sub in which.subs() {
        let files = samples(sub);
        for copy in 0..copies {
            let dir = root.join(sub).join(copy.to_string());
            std::fs::create_dir_all(&dir).expect("a tree directory");
            for (k, (_, text)) in files.iter().enumerate() {
                let new = new_id(sub, copy, k);
                let text = match source_id(sub, text) {
                    Some(old) => replace_all(text, old.as_bytes(), new.as_bytes()),
                    None => text.clone(),
                };
                let name = if *sub == "codex" {
                    format!("rollout-{new}.jsonl")
                } else {
                    format!("{new}.jsonl")
                };
                bytes += text.len() as u64;
                files_written += 1;
                std::fs::write(dir.join(name), text).expect("a tree file");
            }
        }
    }
    (files_written, bytes)
}
