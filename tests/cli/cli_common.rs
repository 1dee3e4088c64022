//! Helpers for the command-line tests: a temporary store, running the built `agentlog` binary,
//! the example sessions.
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub const BIN: &str = env!("CARGO_BIN_EXE_agentlog");

/// The in-repo example sessions.
pub fn example(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/sessions")).join(name)
}

pub const EXAMPLES: [&str; 3] = ["coding-session", "fix-typo", "tools-and-approvals"];

/// A store in a temporary directory, and the binary run against it.
pub struct Cli {
    pub dir: tempfile::TempDir,
}

/// What a run printed and how it ended.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub raw: Vec<u8>,
}

impl Run {
    /// Asserts success and returns stdout.
    #[track_caller]
    pub fn ok(&self) -> &str {
        assert_eq!(
            self.code, 0,
            "exit {}\nstdout: {}\nstderr: {}",
            self.code, self.stdout, self.stderr
        );
        &self.stdout
    }

    /// Asserts exit code `code` with an `error: …` message and no panic; returns stderr.
    #[track_caller]
    pub fn fails(&self, code: i32) -> &str {
        assert_eq!(
            self.code, code,
            "expected exit {code}\nstdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        assert!(!self.stderr.contains("panicked"), "{}", self.stderr);
        assert!(!self.stderr.contains("RUST_BACKTRACE"), "{}", self.stderr);
        &self.stderr
    }
}

/// What a finished child printed and how it ended (-1: killed by a signal).
pub fn finish(out: Output) -> Run {
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        raw: out.stdout,
    }
}

impl Cli {
    pub fn new() -> Cli {
        Cli {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// A new store whose `agentlog.toml` is `toml`.
    #[allow(dead_code)] // not every test binary that includes this module uses it
    pub fn with_config(toml: &str) -> Cli {
        let cli = Cli::new();
        cli.configure(toml);
        cli
    }

    /// Writes the store's `agentlog.toml` (creating the store's folder if needed).
    #[allow(dead_code)]
    pub fn configure(&self, toml: &str) {
        std::fs::create_dir_all(self.store()).unwrap();
        std::fs::write(self.store().join("agentlog.toml"), toml).unwrap();
    }

    /// The store's root.
    pub fn store(&self) -> PathBuf {
        self.dir.path().join("store")
    }

    /// The directory of session `id`.
    pub fn session_dir(&self, id: &str) -> PathBuf {
        self.store().join("sessions").join(id)
    }

    /// `agentlog --store <store> args…`, with a clean environment for what agentlog reads.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.arg("--store")
            .arg(self.store())
            .args(args)
            .env_remove("AGENTLOG_STORE")
            .env_remove("NO_COLOR")
            .env_remove("RUST_BACKTRACE")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    pub fn run(&self, args: &[&str]) -> Run {
        finish(self.command(args).output().unwrap())
    }

    /// Runs with `input` on standard input.
    pub fn run_with(&self, args: &[&str], input: &[u8]) -> Run {
        let mut child = self.command(args).stdin(Stdio::piped()).spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let input = input.to_vec();
        // Written from a thread: a large input must not block on a full stdout pipe.
        let writer = std::thread::spawn(move || {
            let _ = stdin.write_all(&input);
        });
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap();
        finish(out)
    }

    /// Imports an example; returns its id.
    pub fn import_example(&self, name: &str, extra: &[&str]) -> String {
        let path = example(&format!("{name}.jsonl"));
        let mut args = vec!["import", path.to_str().unwrap()];
        args.extend_from_slice(extra);
        let run = self.run(&args);
        run.ok().trim_end().to_string()
    }

    /// The entries of the store's sessions folder, sorted (to see that nothing was left behind).
    pub fn session_entries(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.store().join("sessions"))
            .map(|rd| {
                rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }
}

pub use testkit::segments;

pub use testkit::flip;

/// Copies a session directory (its files; no subfolders are needed).
pub fn copy_session(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        if entry.file_type().unwrap().is_file() && entry.file_name() != "LOCK" {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}
