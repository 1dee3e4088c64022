//! Shared by the search and statistics tests: a seeded generator of valid sessions (several
//! tools, errors, approvals, turns, unicode text, unknown types, compactions), a store holding
//! the examples and generated sessions, and the *reference*: a straightforward computation of
//! every filter and statistic over the sessions exported as JSONL and parsed with serde_json,
//! written independently of the library.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashSet};
use std::io::BufReader;
use std::path::PathBuf;

use agentlog::store::{ImportOptions, NewSession, Query, Store};
use serde_json::{json, Value};

pub use crate::Rng;

/// The search tests' vocabulary on the shared generator.
impl Rng {
    /// Words, with mixed case and non-ASCII text. No Greek capital sigma, KELVIN SIGN or
    /// capital I with dot: the documented differences of the matcher from `str::to_lowercase`.
    pub fn search_text(&mut self, words: u64) -> String {
        const WORDS: &[&str] = &[
            "the",
            "parser",
            "retry",
            "Bash",
            "bash",
            "FAILED",
            "failed",
            "Permission",
            "denied",
            "permission DENIED",
            "école",
            "ÉCOLE",
            "Straße",
            "STRASSE",
            "ÜNÏCODE",
            "ünïcode",
            "日本語",
            "🚀",
            "naïve",
            "NAÏVE",
            "ǅungla",
            "ẞ",
            "tab\there",
            "line\nbreak",
            "\"quoted\"",
            "back\\slash",
            "cargo",
            "test",
            "ok",
            "error:",
            "timeout",
            "x",
            "X",
            "σοφία",
            "Ωmega",
        ];
        let mut s = String::new();
        for i in 0..words {
            if i > 0 {
                s.push(' ');
            }
            let word: &&str = self.pick(WORDS);
            s.push_str(word);
        }
        s
    }
}

pub const TOOLS: [&str; 4] = ["bash", "read_file", "edit", "web_search"];

/// Writes events as JSONL lines, numbering seqs and advancing the clock.
struct Writer {
    lines: Vec<String>,
    time: i64,
    clock: Rng,
}

impl Writer {
    fn push(&mut self, t: &str, data: Value, extra: &[(&str, Value)]) -> u64 {
        // Sometimes two events share a millisecond.
        self.time += self.clock.below(2_500) as i64;
        let seq = self.lines.len() as u64;
        let mut e = json!({"type": t, "seq": seq, "time": self.time, "data": data});
        for (k, v) in extra {
            e[*k] = v.clone();
        }
        self.lines.push(e.to_string());
        seq
    }
}

/// A planned tool call of a step.
struct Call {
    seq: u64,
    id: String,
    name: String,
    answered: bool,
    approval: bool,
}

/// A valid session (it imports) of about `turns` turns, as JSONL.
pub fn generate(seed: u64, turns: u64) -> String {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut w = Writer {
        lines: Vec::new(),
        time: 1_755_000_000_000 + seed as i64 * 86_400_000,
        clock: Rng(seed ^ 0x5555),
    };
    let text_block = |rng: &mut Rng| {
        let n = 1 + rng.below(12);
        json!({"type": "text", "text": rng.search_text(n)})
    };
    if rng.one_in(2) {
        let content = json!([text_block(&mut rng)]);
        w.push(
            "system/message",
            json!({"role": "system", "content": content}),
            &[],
        );
    }
    let first_turn = rng.below(2);
    for turn in first_turn..first_turn + turns {
        if rng.one_in(4) {
            // Between turns: belongs to no turn.
            let content = json!([text_block(&mut rng)]);
            w.push(
                "user/message",
                json!({"role": "user", "content": content}),
                &[],
            );
        }
        if rng.one_in(6) {
            let start = w.lines.len() as u64;
            w.push(
                "compact/start",
                json!({"startSeq": 0, "endSeq": start.saturating_sub(1)}),
                &[],
            );
            let mut data = json!({"startSeq": 0, "endSeq": start.saturating_sub(1), "summary": rng.search_text(8)});
            if rng.one_in(2) {
                data["usage"] = json!({"inputTokens": rng.below(9_000), "outputTokens": rng.below(900), "cacheWriteTokens": rng.below(50)});
            }
            w.push("compact/summary", data, &[]);
            w.push("compact/end", json!({"ok": rng.one_in(3)}), &[]);
        }
        if turn > first_turn && rng.one_in(3) {
            // Between turns, naming the previous turn: they belong to it, though it is closed.
            w.push(
                "sandbox/event",
                json!({"kind": "stop", "turn": turn - 1}),
                &[],
            );
            let message = rng.search_text(2);
            w.push("error", json!({"message": message, "turn": turn - 1}), &[]);
        }
        w.push("turn/start", json!({"turn": turn}), &[]);
        let mut content = vec![text_block(&mut rng)];
        if rng.one_in(4) {
            // An unknown block: never searched.
            content.push(json!({"type": "image", "text": rng.search_text(3), "url": "x"}));
        }
        if rng.one_in(6) {
            content.push(
                json!({"type": "tool_result", "toolUseId": "prev", "toolName": "bash",
                "content": [{"type": "text", "text": rng.search_text(4)}], "isError": false}),
            );
        }
        w.push(
            "user/message",
            json!({"role": "user", "content": content}),
            &[("surfaceOp", json!("append"))],
        );
        if rng.one_in(3) {
            let mut data = json!({"kind": *rng.pick(&["start", "stop", "escalate"])});
            match rng.below(3) {
                0 => data["turn"] = json!(turn),
                1 => data["turn"] = Value::Null,
                _ => {}
            }
            data["detail"] = json!({"note": rng.search_text(2)});
            w.push("sandbox/event", data, &[]);
        }
        let first_step = rng.below(2);
        let steps = 1 + rng.below(4);
        // Calls left for a later step of the turn to answer (by callId).
        let mut carried: Vec<Call> = Vec::new();
        let mut approval_n = 0;
        for step in first_step..first_step + steps {
            let mut data = json!({"turn": turn, "step": step});
            if rng.one_in(2) {
                data["request"] = json!({"model": "m1", "temperature": 0.5});
            }
            w.push("step/start", data, &[]);
            for _ in 0..rng.below(3) {
                let chunk = json!({"type": "text-delta", "text": rng.search_text(2)});
                w.push(
                    "assistant/chunk",
                    json!({"turn": turn, "step": step, "chunk": chunk}),
                    &[],
                );
            }
            // The step's calls: 0 to 3, ids reused across turns (unique within the turn).
            let last = step + 1 == first_step + steps;
            let n_calls = if last { rng.below(2) } else { rng.below(4) };
            let mut calls: Vec<Call> = Vec::new();
            let mut blocks = Vec::new();
            if rng.one_in(3) {
                blocks.push(json!({"type": "reasoning", "text": rng.search_text(5)}));
            }
            if !rng.one_in(5) {
                blocks.push(text_block(&mut rng));
            }
            for k in 0..n_calls {
                let name = rng.pick(&TOOLS).to_string();
                // A call never answered gets an id of its own (a reused id must be answered).
                let answered = !rng.one_in(8);
                let id = if answered {
                    format!("call_{step}_{k}")
                } else {
                    format!("lost_{turn}_{step}_{k}")
                };
                let mut input =
                    json!({"command": rng.search_text(3), "n": rng.below(100), "flag": true});
                let key = rng.search_text(1);
                input[key] = json!([rng.search_text(2), {"deep": rng.search_text(1)}]);
                blocks.push(json!({"type": "tool_use", "id": id, "name": name, "input": input}));
                calls.push(Call {
                    seq: 0,
                    id,
                    name,
                    answered,
                    approval: rng.one_in(3),
                });
            }
            let mut data = json!({"turn": turn, "step": step,
                "message": {"role": "assistant", "content": blocks, "model": "m1"}});
            if !rng.one_in(6) {
                let mut usage =
                    json!({"inputTokens": rng.below(50_000), "outputTokens": rng.below(4_000)});
                for key in ["cacheReadTokens", "cacheWriteTokens", "reasoningTokens"] {
                    if rng.one_in(2) {
                        usage[key] = json!(rng.below(3_000));
                    }
                }
                data["usage"] = usage;
            }
            w.push("assistant/message", data, &[("sourceEventSeqs", json!([]))]);
            for call in &mut calls {
                let args = json!({"cmd": rng.search_text(3), "path": "src/lib.rs"});
                let arguments = if rng.one_in(5) {
                    rng.search_text(2) // not JSON: kept as the raw text it is
                } else {
                    args.to_string()
                };
                call.seq = w.push(
                    "tool/call",
                    json!({"turn": turn, "step": step, "callId": call.id, "name": call.name, "arguments": arguments}),
                    &[],
                );
            }
            if rng.one_in(5) {
                // An approval for a call that is never made (denied first).
                let id = format!("pending_{approval_n}");
                approval_n += 1;
                let tool = rng.pick(&TOOLS).to_string();
                w.push(
                    "approval/request",
                    json!({"turn": turn, "step": step, "callId": id, "tool": tool}),
                    &[],
                );
                w.push(
                    "approval/decision",
                    json!({"turn": turn, "step": step, "callId": id, "decision": "denied"}),
                    &[],
                );
            }
            // Answer this step's calls (some in a later step), and calls carried from before.
            let from_before = std::mem::take(&mut carried);
            let mut answer_now: Vec<Call> = Vec::new();
            // Every call of the step by name (answered now, later, or never).
            let names: Vec<String> = calls.iter().map(|c| c.name.clone()).collect();
            for call in calls {
                if call.answered && !last && rng.one_in(5) {
                    carried.push(call);
                } else {
                    answer_now.push(call);
                }
            }
            for call in from_before {
                answer(&mut w, &mut rng, turn, step, &call, false, false);
            }
            for call in &answer_now {
                let mut denied = false;
                if call.approval {
                    w.push(
                        "approval/request",
                        json!({"turn": turn, "step": step, "callId": call.id, "tool": call.name, "reason": rng.search_text(2)}),
                        &[],
                    );
                    denied = rng.one_in(3);
                    let decision = if denied { "denied" } else { "approved" };
                    let mut data = json!({"turn": turn, "step": step, "callId": call.id, "decision": decision});
                    if rng.one_in(2) {
                        data["by"] = json!("user");
                    }
                    w.push("approval/decision", data, &[]);
                }
                if rng.one_in(10) {
                    let mut data = json!({"message": rng.search_text(3)});
                    if rng.one_in(2) {
                        data["turn"] = json!(turn);
                        data["step"] = json!(step);
                    }
                    w.push("error", data, &[]);
                }
                if call.answered {
                    let by_name = names.iter().filter(|n| **n == call.name).count() == 1;
                    answer(&mut w, &mut rng, turn, step, call, denied, by_name);
                }
            }
            if rng.one_in(8) {
                w.push(
                    "hook/invoked",
                    json!({"text": rng.search_text(3), "turn": turn + 100}),
                    &[],
                );
            }
            w.push("step/end", json!({"turn": turn, "step": step}), &[]);
        }
        let kind = *rng.pick(&[
            "completed",
            "completed",
            "completed",
            "aborted",
            "error",
            "max-tokens",
            "interrupted",
            "blocked",
        ]);
        let mut reason = json!({"kind": kind});
        if kind == "error" {
            reason["error"] = json!({"code": "E1", "message": rng.search_text(2)});
        }
        w.push("turn/end", json!({"turn": turn, "reason": reason}), &[]);
    }
    if rng.one_in(2) {
        // A last turn left open (a crash), with an unanswered call.
        let turn = first_turn + turns;
        w.push("turn/start", json!({"turn": turn}), &[]);
        w.push("step/start", json!({"turn": turn, "step": 1}), &[]);
        w.push(
            "tool/call",
            json!({"turn": turn, "step": 1, "callId": "open_1", "name": "bash", "arguments": "{}"}),
            &[],
        );
    }
    let mut out = w.lines.join("\n");
    out.push('\n');
    out
}

/// Writes the result of `call`, resolved by callId, by sourceEventSeqs or by name (the last
/// only in the call's own step).
fn answer(
    w: &mut Writer,
    rng: &mut Rng,
    turn: u64,
    step: u64,
    call: &Call,
    error: bool,
    by_name: bool,
) {
    let is_error = error || rng.one_in(5);
    let content = if rng.one_in(2) {
        let n = 1 + rng.below(20);
        json!(rng.search_text(n))
    } else {
        json!([{"type": "text", "text": rng.search_text(4)}, {"type": "reasoning", "text": rng.search_text(2)}])
    };
    let how = if call.approval {
        0
    } else if by_name {
        rng.below(3)
    } else {
        rng.below(2)
    };
    // Now and then a result names the tool by an alias (resolved by callId or source, the
    // call's name does not have to match).
    let tool_name = if how < 2 && rng.one_in(12) {
        format!("{}-alias", call.name)
    } else {
        call.name.clone()
    };
    let mut data = json!({"turn": turn, "step": step,
        "message": {"role": "tool", "toolName": tool_name, "content": content, "isError": is_error}});
    let mut extra = vec![("surfaceOp", json!("append"))];
    match how {
        0 => data["callId"] = json!(call.id),
        1 => extra.push(("sourceEventSeqs", json!([call.seq]))),
        // By name: only for the one call of that name in the step (else an earlier one would
        // be the earliest unanswered).
        _ => {}
    }
    if is_error && rng.one_in(2) {
        data["error"] = json!({"code": "EXIT_1"});
    }
    w.push("tool/result", data, &extra);
}

/// serde_json (without `arbitrary_precision`) refuses numbers beyond `f64` (the examples hold
/// `1E+400` on purpose). No filter or statistic reads such a number, so the reference reads
/// them as `0`: this replaces every number token outside strings that overflows `f64`.
pub fn tame_numbers(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.char_indices().peekable();
    let mut in_string = false;
    while let Some((i, c)) = chars.next() {
        if in_string {
            out.push(c);
            if c == '\\' {
                if let Some((_, n)) = chars.next() {
                    out.push(n);
                }
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        if c == '"' {
            in_string = true;
            out.push(c);
        } else if c == '-' || c.is_ascii_digit() {
            let mut end = i + c.len_utf8();
            while let Some(&(j, n)) = chars.peek() {
                if n.is_ascii_digit() || matches!(n, '.' | 'e' | 'E' | '+' | '-') {
                    end = j + n.len_utf8();
                    chars.next();
                } else {
                    break;
                }
            }
            let token = &line[i..end];
            if token.parse::<f64>().is_ok_and(f64::is_infinite) {
                out.push('0');
            } else {
                out.push_str(token);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// One session of the corpus: its id, its exported canonical lines, and those parsed.
pub struct Exported {
    pub id: String,
    pub lines: Vec<String>,
    pub events: Vec<Value>,
}

/// A store with the three examples, generated sessions, an empty one and a deleted one, and
/// the export of every session that is not deleted, in id order.
pub struct Corpus {
    /// The temporary directory, when the corpus made its own.
    pub dir: Option<tempfile::TempDir>,
    /// The store's root.
    pub root: PathBuf,
    pub store: Store,
    pub sessions: Vec<Exported>,
}

pub fn examples_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/sessions"))
}

pub const EXAMPLES: [&str; 3] = ["coding-session", "fix-typo", "tools-and-approvals"];

impl Corpus {
    /// In a temporary directory.
    pub fn build() -> Corpus {
        let dir = tempfile::tempdir().unwrap();
        let mut corpus = Corpus::build_at(dir.path().join("store"));
        corpus.dir = Some(dir);
        corpus
    }

    /// With the store at `root`.
    pub fn build_at(root: PathBuf) -> Corpus {
        let store = Store::open(&root).unwrap();
        for name in EXAMPLES {
            let file = std::fs::File::open(examples_dir().join(format!("{name}.jsonl"))).unwrap();
            store
                .import(
                    BufReader::new(file),
                    ImportOptions {
                        id: Some(format!("ex-{name}")),
                        title: None,
                    },
                    |_| {},
                )
                .unwrap();
        }
        for seed in 1..=6u64 {
            let text = generate(seed, 6 + seed * 2);
            store
                .import(
                    text.as_bytes(),
                    ImportOptions {
                        id: Some(format!("gen-{seed}")),
                        title: None,
                    },
                    |_| {},
                )
                .unwrap_or_else(|e| panic!("generated session {seed}: {e}"));
        }
        drop(store.create(NewSession::default().id("gen-empty")).unwrap());
        store
            .import(
                generate(99, 4).as_bytes(),
                ImportOptions {
                    id: Some("gen-deleted".into()),
                    title: None,
                },
                |_| {},
            )
            .unwrap();
        store.delete("gen-deleted").unwrap();
        let sessions = store
            .ids(agentlog::store::Deleted::Skip)
            .unwrap()
            .into_iter()
            .map(|id| export(&store, &id))
            .collect();
        Corpus {
            dir: None,
            root,
            store,
            sessions,
        }
    }
}

/// Exports session `id` and parses its lines with serde_json.
pub fn export(store: &Store, id: &str) -> Exported {
    let mut out = Vec::new();
    store
        .open_reader(id)
        .unwrap()
        .export(&mut out, agentlog::session::HeaderLine::Omit, |_| {})
        .unwrap();
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let events = lines
        .iter()
        .map(|l| serde_json::from_str(&tame_numbers(l)).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    Exported {
        id: id.to_string(),
        lines,
        events,
    }
}

/// A query, as the reference reads it (and as the library and the CLI are given it).
#[derive(Debug, Clone, Default)]
pub struct RefQuery {
    pub sessions: Option<Vec<String>>,
    pub types: Vec<String>,
    pub tool: Option<String>,
    pub turn: Option<u64>,
    pub since: Option<i64>,
    pub until: Option<i64>,
    pub text: Option<String>,
    pub limit: Option<usize>,
}

impl RefQuery {
    /// The library's query.
    pub fn to_query(&self) -> Query {
        let mut q = Query::new();
        for id in self.sessions.iter().flatten() {
            q = q.session(id.as_str());
        }
        for t in &self.types {
            q = q.event_type(t);
        }
        if let Some(t) = &self.tool {
            q = q.tool(t.as_str());
        }
        if let Some(n) = self.turn {
            q = q.turn(n);
        }
        if let Some(ms) = self.since {
            q = q.since(ms);
        }
        if let Some(ms) = self.until {
            q = q.until(ms);
        }
        if let Some(t) = &self.text {
            q = q.text(t);
        }
        if let Some(n) = self.limit {
            q = q.limit(n);
        }
        q
    }

    /// The command line's flags.
    pub fn to_args(&self) -> Vec<String> {
        let mut a = Vec::new();
        for id in self.sessions.iter().flatten() {
            a.extend(["--session".to_string(), id.clone()]);
        }
        for t in &self.types {
            a.extend(["--type".to_string(), t.clone()]);
        }
        let mut opt = |flag: &str, v: Option<String>| {
            if let Some(v) = v {
                a.extend([flag.to_string(), v]);
            }
        };
        opt("--tool", self.tool.clone());
        opt("--turn", self.turn.map(|n| n.to_string()));
        opt("--since", self.since.map(|n| n.to_string()));
        opt("--until", self.until.map(|n| n.to_string()));
        opt("--text", self.text.clone());
        opt("--limit", self.limit.map(|n| n.to_string()));
        a
    }
}

fn type_selected(filters: &[String], t: &str) -> bool {
    filters.is_empty()
        || filters.iter().any(|f| {
            if f == "*" {
                true
            } else if let Some(domain) = f
                .strip_suffix("/*")
                .or((!f.contains('/')).then_some(f.as_str()))
            {
                // `tool/*` and `tool`: the domain, and a type of exactly that name (`error`).
                t == domain || t.starts_with(&format!("{domain}/"))
            } else {
                f == t
            }
        })
}

/// The texts `--text` looks in, gathered the plain way.
pub fn texts(e: &Value) -> Vec<String> {
    fn blocks(v: &Value, out: &mut Vec<String>) {
        for b in v.as_array().into_iter().flatten() {
            match b["type"].as_str() {
                Some("text") | Some("reasoning") => out.push(b["text"].as_str().unwrap().into()),
                Some("tool_use") => strings(&b["input"], out),
                Some("tool_result") => content(&b["content"], out),
                _ => {}
            }
        }
    }
    fn content(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) => out.push(s.clone()),
            other => blocks(other, out),
        }
    }
    fn strings(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) => out.push(s.clone()),
            Value::Array(items) => items.iter().for_each(|i| strings(i, out)),
            Value::Object(m) => m.values().for_each(|i| strings(i, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    let d = &e["data"];
    match e["type"].as_str().unwrap() {
        "user/message" | "system/message" => blocks(&d["content"], &mut out),
        "assistant/message" => blocks(&d["message"]["content"], &mut out),
        "tool/call" => out.push(d["arguments"].as_str().unwrap().into()),
        "tool/result" => content(&d["message"]["content"], &mut out),
        _ => {}
    }
    out
}

/// The reference search: `(session id, seq)` of every match, in order, limited.
pub fn ref_search(corpus: &Corpus, q: &RefQuery) -> Vec<(String, u64)> {
    let mut found = Vec::new();
    let needle = q
        .text
        .as_deref()
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase);
    for s in &corpus.sessions {
        if let Some(only) = &q.sessions {
            if !only.contains(&s.id) {
                continue;
            }
        }
        let mut open: Option<u64> = None;
        let mut tool_calls: HashSet<(u64, u64, String)> = HashSet::new();
        for e in &s.events {
            let t = e["type"].as_str().unwrap();
            let d = &e["data"];
            let carried = d["turn"].as_u64();
            let turn = match t {
                "turn/start" => {
                    open = carried;
                    carried
                }
                "turn/end" => {
                    open = None;
                    carried
                }
                _ if ["step/", "assistant/", "tool/", "approval/"]
                    .iter()
                    .any(|p| t.starts_with(p)) =>
                {
                    carried
                }
                "sandbox/event" | "error" => carried.or(open),
                _ => open,
            };
            let tool_ok = match &q.tool {
                None => true,
                Some(tool) => {
                    let call = |name: &Value| name.as_str() == Some(tool.as_str());
                    // A decision belongs to the call or request of its step (ids may repeat
                    // across the steps of a turn).
                    let key = (
                        d["turn"].as_u64().unwrap_or(u64::MAX),
                        d["step"].as_u64().unwrap_or(u64::MAX),
                        d["callId"].as_str().unwrap_or_default().to_string(),
                    );
                    match t {
                        "tool/call" if call(&d["name"]) => {
                            tool_calls.insert(key);
                            true
                        }
                        "approval/request" if call(&d["tool"]) => {
                            tool_calls.insert(key);
                            true
                        }
                        "tool/result" => call(&d["message"]["toolName"]),
                        "approval/decision" => tool_calls.contains(&key),
                        _ => false,
                    }
                }
            };
            let time = e["time"].as_i64().unwrap();
            let ok = tool_ok
                && type_selected(&q.types, t)
                && q.turn.is_none_or(|n| turn == Some(n))
                && q.since.is_none_or(|s| time >= s)
                && q.until.is_none_or(|u| time < u)
                && needle.as_ref().is_none_or(|n| {
                    texts(e)
                        .iter()
                        .any(|h| h.to_lowercase().contains(n.as_str()))
                });
            if ok {
                found.push((s.id.clone(), e["seq"].as_u64().unwrap()));
            }
        }
    }
    if let Some(n) = q.limit {
        found.truncate(n);
    }
    found
}

/// The reference statistics of a tool.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RefTool {
    pub calls: u64,
    pub errors: u64,
    /// Sorted.
    pub latencies: Vec<i64>,
}

/// The reference statistics.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RefStats {
    pub events: u64,
    pub by_type: BTreeMap<String, u64>,
    pub turns: u64,
    pub end_reasons: BTreeMap<String, u64>,
    pub steps: u64,
    /// input, output, cacheRead, cacheWrite, reasoning
    pub tokens: [u64; 5],
    pub tools: BTreeMap<String, RefTool>,
    /// Sorted.
    pub turn_durations: Vec<i64>,
    /// Calls unanswered when their step (or turn) ended that got no result after.
    pub unanswered: u64,
}

/// The median the plain way: sort, the middle one or the mean of the two middle ones.
pub fn median(sorted: &[i64]) -> Option<f64> {
    let n = sorted.len();
    if n == 0 {
        None
    } else if n % 2 == 1 {
        Some(sorted[n / 2] as f64)
    } else {
        Some((sorted[n / 2 - 1] + sorted[n / 2]) as f64 / 2.0)
    }
}

/// The reference statistics of one session's exported events.
pub fn ref_stats(events: &[Value]) -> RefStats {
    struct OpenCall {
        seq: u64,
        id: String,
        name: String,
        step: u64,
        time: i64,
        answered: bool,
        closed: bool,
    }
    let mut s = RefStats::default();
    let mut turn_start: Option<i64> = None;
    let mut calls: Vec<OpenCall> = Vec::new();
    for e in events {
        let t = e["type"].as_str().unwrap();
        let d = &e["data"];
        let time = e["time"].as_i64().unwrap();
        s.events += 1;
        *s.by_type.entry(t.to_string()).or_default() += 1;
        match t {
            "turn/start" => {
                s.turns += 1;
                turn_start = Some(time);
                calls.clear();
            }
            "turn/end" => {
                *s.end_reasons
                    .entry(d["reason"]["kind"].as_str().unwrap().to_string())
                    .or_default() += 1;
                if let Some(start) = turn_start.take() {
                    s.turn_durations.push(time - start);
                }
                for c in calls.iter_mut().filter(|c| !c.answered && !c.closed) {
                    c.closed = true;
                    s.unanswered += 1;
                }
            }
            "step/end" => {
                let step = d["step"].as_u64().unwrap();
                for c in calls
                    .iter_mut()
                    .filter(|c| !c.answered && !c.closed && c.step == step)
                {
                    c.closed = true;
                    s.unanswered += 1;
                }
            }
            "step/start" => s.steps += 1,
            "assistant/message" | "compact/summary" => {
                let u = &d["usage"];
                if u.is_object() {
                    for (i, k) in [
                        "inputTokens",
                        "outputTokens",
                        "cacheReadTokens",
                        "cacheWriteTokens",
                        "reasoningTokens",
                    ]
                    .iter()
                    .enumerate()
                    {
                        s.tokens[i] += u[*k].as_u64().unwrap_or(0);
                    }
                }
            }
            "tool/call" => {
                let name = d["name"].as_str().unwrap().to_string();
                s.tools.entry(name.clone()).or_default().calls += 1;
                calls.push(OpenCall {
                    seq: e["seq"].as_u64().unwrap(),
                    id: d["callId"].as_str().unwrap().into(),
                    name,
                    step: d["step"].as_u64().unwrap(),
                    time,
                    answered: false,
                    closed: false,
                });
            }
            "tool/result" => {
                let m = &d["message"];
                let tool = m["toolName"].as_str().unwrap();
                let entry = s.tools.entry(tool.to_string()).or_default();
                if m["isError"].as_bool().unwrap() {
                    entry.errors += 1;
                }
                let found = if let Some(id) = d["callId"].as_str() {
                    calls.iter().position(|c| c.id == id)
                } else if let Some(src) = e["sourceEventSeqs"][0].as_u64() {
                    calls.iter().position(|c| c.seq == src)
                } else {
                    let step = d["step"].as_u64().unwrap();
                    calls
                        .iter()
                        .position(|c| !c.answered && c.step == step && c.name == tool)
                };
                if let Some(i) = found.filter(|&i| !calls[i].answered) {
                    calls[i].answered = true;
                    // A late answer (in a later step) takes a closed call off the count.
                    if calls[i].closed {
                        calls[i].closed = false;
                        s.unanswered -= 1;
                    }
                    let c = &calls[i];
                    s.tools
                        .entry(c.name.clone())
                        .or_default()
                        .latencies
                        .push(time - c.time);
                }
            }
            _ => {}
        }
    }
    for t in s.tools.values_mut() {
        t.latencies.sort();
    }
    s.turn_durations.sort();
    s
}

/// The reference statistics of several sessions together: sums, samples pooled.
pub fn ref_merge(all: &[RefStats]) -> RefStats {
    let mut m = RefStats::default();
    for s in all {
        m.events += s.events;
        for (k, n) in &s.by_type {
            *m.by_type.entry(k.clone()).or_default() += n;
        }
        m.turns += s.turns;
        for (k, n) in &s.end_reasons {
            *m.end_reasons.entry(k.clone()).or_default() += n;
        }
        m.steps += s.steps;
        for i in 0..5 {
            m.tokens[i] += s.tokens[i];
        }
        for (k, t) in &s.tools {
            let e = m.tools.entry(k.clone()).or_default();
            e.calls += t.calls;
            e.errors += t.errors;
            e.latencies.extend(&t.latencies);
        }
        m.turn_durations.extend(&s.turn_durations);
        m.unanswered += s.unanswered;
    }
    for t in m.tools.values_mut() {
        t.latencies.sort();
    }
    m.turn_durations.sort();
    m
}

/// The reference JSON of `agentlog stats --json` (serde_json's map is sorted by name; the
/// member order is checked separately).
pub fn ref_json(s: &RefStats, bytes: u64) -> Value {
    let tools: serde_json::Map<String, Value> = s
        .tools
        .iter()
        .map(|(k, t)| {
            let rate = if t.calls == 0 {
                0.0
            } else {
                t.errors as f64 / t.calls as f64
            };
            (
                k.clone(),
                json!({"calls": t.calls, "errors": t.errors, "failureRate": rate,
                    "latencyMs": {"median": median(&t.latencies), "max": t.latencies.last()}}),
            )
        })
        .collect();
    json!({
        "events": s.events,
        "byType": s.by_type,
        "turns": s.turns,
        "endReasons": s.end_reasons,
        "turnDurationMs": {"median": median(&s.turn_durations),
            "max": s.turn_durations.last()},
        "steps": s.steps,
        "tokens": {"input": s.tokens[0], "output": s.tokens[1], "cacheRead": s.tokens[2],
            "cacheWrite": s.tokens[3], "reasoning": s.tokens[4]},
        "tools": tools,
        "unansweredCalls": s.unanswered,
        "bytes": bytes,
    })
}

/// Equal JSON values, numbers compared as `f64` within a relative 1e-12 (serde_json's default
/// float parsing may be one unit in the last place off).
pub fn json_close(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if let (Some(x), Some(y)) = (x.as_i64(), y.as_i64()) {
                return x == y;
            }
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            (x - y).abs() <= 1e-12 * x.abs().max(y.abs()).max(1.0)
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_close(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_close(v, w)))
        }
        _ => a == b,
    }
}
