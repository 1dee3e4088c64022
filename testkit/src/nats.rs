//! A real `nats-server` with JetStream for the shipping tests and the `ship` bench: started on 127.0.0.1 on a port of
//! its choosing, with its store in a temporary directory, killed when dropped.
//!
//! A test that needs the server and does not find it fails under `CI=true` (CI installs the
//! Debian package `nats-server`); elsewhere it is skipped with a note on stderr.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// The `nats-server` binary on `PATH` (or in the usual system folders), if there is one.
pub fn find_binary() -> Option<PathBuf> {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain([
            "/usr/sbin".into(),
            "/usr/bin".into(),
            "/usr/local/bin".into(),
        ])
        .map(|d: PathBuf| d.join("nats-server"))
        .find(|p| p.is_file())
}

/// The `nats-server` binary, or `None` (the test is then skipped) when it is missing outside CI.
pub fn server_binary() -> Option<PathBuf> {
    if let Some(path) = find_binary() {
        return Some(path);
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!(
            "nats-server is not installed: the shipping tests need it (Debian package \
             `nats-server`; .ci/run installs it)"
        );
    }
    eprintln!("note: nats-server not found; skipping this test (apt-get install nats-server)");
    None
}

/// A running nats-server with JetStream.
pub struct NatsServer {
    bin: PathBuf,
    child: Option<Child>,
    pub port: u16,
    store_dir: PathBuf,
    extra: Vec<String>,
    /// The last lines the server logged (for a failing test to print).
    log: Arc<Mutex<VecDeque<String>>>,
}

/// How many of a server's last log lines are kept.
const LOG_LINES: usize = 300;

/// How long a server may take to start on a loaded machine.
const START: Duration = Duration::from_secs(30);

impl NatsServer {
    /// Starts a server keeping its JetStream files in `dir`, on a port it picks.
    pub fn start(bin: &Path, dir: &Path) -> NatsServer {
        Self::start_with(bin, dir, 0, Vec::new())
    }

    /// Starts a server on `port` (0: a port it picks) with `extra` arguments.
    pub fn start_with(bin: &Path, dir: &Path, port: u16, extra: Vec<String>) -> NatsServer {
        let mut s = NatsServer {
            bin: bin.to_path_buf(),
            child: None,
            port,
            store_dir: dir.to_path_buf(),
            extra,
            log: Arc::default(),
        };
        s.launch();
        s
    }

    fn launch(&mut self) {
        let port = if self.port == 0 {
            "-1".to_string()
        } else {
            self.port.to_string()
        };
        let mut child = Command::new(&self.bin)
            .args(["-a", "127.0.0.1", "-p", &port, "-js", "-sd"])
            .arg(&self.store_dir)
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start nats-server");
        let stderr = child.stderr.take().expect("nats-server stderr");
        let (tx, rx) = mpsc::channel();
        let log = Arc::clone(&self.log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Ok(mut log) = log.lock() {
                    if log.len() == LOG_LINES {
                        log.pop_front();
                    }
                    log.push_back(line.clone());
                }
                let _ = tx.send(line);
            }
        });
        self.child = Some(child);
        let deadline = Instant::now() + START;
        let mut seen = Vec::new();
        let mut ready = false;
        while Instant::now() < deadline {
            let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) else {
                if let Some(status) = self
                    .child
                    .as_mut()
                    .and_then(|c| c.try_wait().ok().flatten())
                {
                    panic!("nats-server exited ({status}):\n{}", seen.join("\n"));
                }
                continue;
            };
            if let Some(rest) = line.split("Listening for client connections on ").nth(1) {
                let port = rest.rsplit(':').next().and_then(|p| p.trim().parse().ok());
                self.port = port.unwrap_or_else(|| panic!("no port in {line:?}"));
            }
            ready |= line.contains("Server is ready");
            seen.push(line);
            if ready && self.port != 0 {
                break;
            }
        }
        assert!(
            ready && self.port != 0,
            "nats-server did not start:\n{}",
            seen.join("\n")
        );
        // Keep draining its log so that it never blocks on a full pipe.
        std::thread::spawn(move || while rx.recv().is_ok() {});
    }

    /// The client URL.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// The last lines the server logged, one per line.
    pub fn log_tail(&self) -> String {
        self.log
            .lock()
            .map(|l| l.iter().cloned().collect::<Vec<_>>().join("\n"))
            .unwrap_or_default()
    }

    /// Kills the server (SIGKILL).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again on the same port with the same files.
    pub fn restart(&mut self) {
        self.kill();
        self.launch();
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A free port on 127.0.0.1 (for the cluster ports, which must be known before start).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}
