//! A real headless Chromium driven over the DevTools protocol (`--remote-debugging-pipe`: JSON
//! messages ended by a NUL byte, commands on the child's fd 3, answers and events on its fd 4),
//! for the tests of `agentlog view`'s page.
//!
//! A test that needs the browser and does not find it fails under `CI=true` (CI installs the
//! Debian package `chromium`); elsewhere it is skipped with a note on stderr.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// The browser binary (`$AGENTLOG_CHROMIUM`, else chromium / chromium-browser /
/// google-chrome on the PATH), or `None` (the test is then skipped) when missing outside CI.
pub fn chromium_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("AGENTLOG_CHROMIUM").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        for dir in dirs.iter().chain([&PathBuf::from("/usr/bin")]) {
            let path = dir.join(name);
            if path.is_file() {
                return Some(path);
            }
        }
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!(
            "chromium is not installed: the viewer's browser tests need it (Debian package \
             `chromium`; .ci/run installs it)"
        );
    }
    eprintln!("note: chromium not found; skipping this test (apt-get install chromium)");
    None
}

/// How long one DevTools command may take on a loaded machine.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(120);

/// A headless Chromium, killed when dropped.
pub struct Browser {
    child: Child,
    commands: std::io::PipeWriter,
    answers: mpsc::Receiver<Value>,
    next_id: u64,
    /// Every event received so far (`method`, `params`, `sessionId`), in order.
    pub events: Vec<Value>,
    _profile: tempfile::TempDir,
}

/// One page (a target attached with its own session).
pub struct Page {
    pub session: String,
    pub target: String,
}

impl Browser {
    /// Starts the browser, or `None` when there is none (outside CI).
    pub fn launch() -> Option<Browser> {
        let bin = chromium_binary()?;
        let profile = tempfile::tempdir().unwrap();
        let (cmd_read, cmd_write) = std::io::pipe().unwrap();
        let (ans_read, ans_write) = std::io::pipe().unwrap();
        let (r, w) = (cmd_read.as_raw_fd(), ans_write.as_raw_fd());
        let mut command = Command::new(bin);
        command
            .args([
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--remote-debugging-pipe",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                "--window-size=1280,900",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: between fork and exec only async-signal-safe calls (fcntl, dup2) on fds this
        // process owns: the pipe ends become the child's fds 3 (commands) and 4 (answers).
        unsafe {
            command.pre_exec(move || {
                let r2 = libc::fcntl(r, libc::F_DUPFD, 10);
                let w2 = libc::fcntl(w, libc::F_DUPFD, 10);
                if r2 < 0 || w2 < 0 || libc::dup2(r2, 3) < 0 || libc::dup2(w2, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().unwrap();
        drop(cmd_read);
        drop(ans_write);
        let (tx, answers) = mpsc::channel();
        std::thread::spawn(move || {
            let mut input = BufReader::new(ans_read);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match input.read_until(0, &mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                if buf.last() == Some(&0) {
                    buf.pop();
                }
                let Ok(v) = serde_json::from_slice::<Value>(&buf) else {
                    continue;
                };
                if tx.send(v).is_err() {
                    return;
                }
            }
        });
        Some(Browser {
            child,
            commands: cmd_write,
            answers,
            next_id: 1,
            events: Vec::new(),
            _profile: profile,
        })
    }

    /// Sends a command (to a page's session, or to the browser) and returns its result; panics
    /// on a protocol error.
    pub fn call(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.commands.write_all(&bytes).unwrap();
        let deadline = Instant::now() + COMMAND_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let v = self
                .answers
                .recv_timeout(left)
                .unwrap_or_else(|e| panic!("no answer to {method} ({e})"));
            if v.get("id").and_then(Value::as_u64) == Some(id) {
                if let Some(err) = v.get("error") {
                    panic!("{method} failed: {err}");
                }
                return v["result"].clone();
            }
            if v.get("method").is_some() {
                self.events.push(v);
            }
        }
    }

    /// Takes the events that arrived without waiting for any.
    pub fn drain(&mut self) {
        while let Ok(v) = self.answers.try_recv() {
            if v.get("method").is_some() {
                self.events.push(v);
            }
        }
    }

    /// A new page (tab) with Page, Runtime, Log and Network events on, 1280×900.
    pub fn new_page(&mut self) -> Page {
        let t = self.call(None, "Target.createTarget", json!({"url": "about:blank"}));
        let target = t["targetId"].as_str().unwrap().to_string();
        let a = self.call(
            None,
            "Target.attachToTarget",
            json!({"targetId": target, "flatten": true}),
        );
        let session = a["sessionId"].as_str().unwrap().to_string();
        let s = Some(session.as_str());
        for domain in [
            "Page.enable",
            "Runtime.enable",
            "Log.enable",
            "Network.enable",
        ] {
            self.call(s, domain, json!({}));
        }
        self.call(
            s,
            "Emulation.setDeviceMetricsOverride",
            json!({"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": false}),
        );
        Page { session, target }
    }

    /// Evaluates `expr` in the page (awaiting a promise) and returns its value; panics on an
    /// exception.
    pub fn eval(&mut self, page: &Page, expr: &str) -> Value {
        let r = self.call(
            Some(&page.session),
            "Runtime.evaluate",
            json!({"expression": expr, "returnByValue": true, "awaitPromise": true}),
        );
        if let Some(ex) = r.get("exceptionDetails") {
            panic!("evaluating {expr:.200}: {ex}");
        }
        r["result"]["value"].clone()
    }

    /// Navigates and waits until `ready` (an expression) is true.
    pub fn open(&mut self, page: &Page, url: &str, ready: &str, timeout: Duration) {
        self.call(Some(&page.session), "Page.navigate", json!({"url": url}));
        let deadline = Instant::now() + timeout;
        loop {
            let v = self.eval(page, &format!("!!({ready})"));
            if v == json!(true) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{url} not ready ({ready}) within {timeout:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The events of one page's session.
    pub fn page_events<'a>(&'a self, page: &'a Page) -> impl Iterator<Item = &'a Value> + 'a {
        self.events
            .iter()
            .filter(move |e| e["sessionId"].as_str() == Some(page.session.as_str()))
    }

    /// The console errors, uncaught exceptions and error log entries of a page.
    pub fn errors(&mut self, page: &Page) -> Vec<String> {
        self.drain();
        self.page_events(page)
            .filter_map(|e| {
                let p = &e["params"];
                match e["method"].as_str()? {
                    "Runtime.exceptionThrown" => {
                        Some(format!("exception: {}", p["exceptionDetails"]))
                    }
                    "Runtime.consoleAPICalled"
                        if matches!(p["type"].as_str(), Some("error" | "assert")) =>
                    {
                        Some(format!("console.{}: {}", p["type"], p["args"]))
                    }
                    "Log.entryAdded" if p["entry"]["level"] == "error" => {
                        Some(format!("log: {}", p["entry"]))
                    }
                    _ => None,
                }
            })
            .collect()
    }

    /// The URLs of every network request a page made.
    pub fn requests(&mut self, page: &Page) -> Vec<String> {
        self.drain();
        self.page_events(page)
            .filter(|e| e["method"] == "Network.requestWillBeSent")
            .map(|e| {
                e["params"]["request"]["url"]
                    .as_str()
                    .unwrap_or("?")
                    .to_string()
            })
            .collect()
    }

    /// A PNG screenshot of the page's viewport (base64, as the protocol gives it).
    pub fn screenshot(&mut self, page: &Page) -> String {
        let r = self.call(
            Some(&page.session),
            "Page.captureScreenshot",
            json!({"format": "png"}),
        );
        r["data"].as_str().unwrap().to_string()
    }

    pub fn close_page(&mut self, page: Page) {
        self.call(None, "Target.closeTarget", json!({"targetId": page.target}));
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Decodes standard base64 (the screenshots), ignoring anything outside its alphabet.
pub fn base64_decode(s: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => continue,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

/// A JSON line as a `serde_json` value, parsed by agentlog (numbers keep their text there): a
/// number `serde_json` cannot hold (`1E+400`) becomes the string of its text.
pub fn parse_line(line: &str) -> Value {
    fn convert(v: &agentlog::event::Value) -> Value {
        use agentlog::event::Value as A;
        match v {
            A::Null => Value::Null,
            A::Bool(b) => Value::Bool(*b),
            A::Number(n) => serde_json::from_str::<Value>(n.as_str())
                .ok()
                .filter(|x| x.is_number())
                .unwrap_or_else(|| Value::String(n.as_str().to_string())),
            A::String(s) => Value::String(s.clone()),
            A::Array(a) => Value::Array(a.iter().map(convert).collect()),
            A::Object(m) => {
                Value::Object(m.iter().map(|(k, v)| (k.to_string(), convert(v))).collect())
            }
        }
    }
    convert(&agentlog::event::parse_json(line).unwrap())
}
