//! `agentlog view`: the page it writes, loaded in a real headless Chromium (DevTools protocol).
//! On the example sessions and a generated 75,000-event one: no console error and no network
//! request, the turn sections are the session's turns, every tool call's link leads to the
//! element of the result it answers (docs/events.md §5) and back, search and the type filter
//! narrow the list to what matches, `j` moves between turns, and a screenshot is not blank.
//! Without a browser these tests are skipped, except under `CI=true` where they fail.

use crate::browser_common;
use crate::cli_common;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use browser_common::{base64_decode, Browser, Page};
use cli_common::{example, Cli, EXAMPLES};
use serde_json::{json, Value};

const READY: &str = "document.body && document.body.dataset.paintedAt";

/// The events of a JSONL file (the header line left out).
fn events_of(jsonl: &str) -> Vec<Value> {
    jsonl
        .lines()
        .map(browser_common::parse_line)
        .filter(|v| v.get("seq").is_some())
        .collect()
}

/// The turns of the events, in order.
fn turns_of(events: &[Value]) -> Vec<u64> {
    events
        .iter()
        .filter(|e| e["type"] == "turn/start")
        .map(|e| e["data"]["turn"].as_u64().unwrap())
        .collect()
}

/// (call seq, result seq) for every result, found by the rules of docs/events.md §5.
fn expected_pairs(events: &[Value]) -> Vec<(u64, u64)> {
    struct Call {
        seq: u64,
        id: String,
        name: String,
        step: u64,
        answered: bool,
    }
    let mut calls: Vec<Call> = Vec::new();
    let mut pairs = Vec::new();
    for e in events {
        let d = &e["data"];
        match e["type"].as_str().unwrap() {
            "turn/start" => calls.clear(),
            "tool/call" => calls.push(Call {
                seq: e["seq"].as_u64().unwrap(),
                id: d["callId"].as_str().unwrap().to_string(),
                name: d["name"].as_str().unwrap().to_string(),
                step: d["step"].as_u64().unwrap(),
                answered: false,
            }),
            "tool/result" => {
                let src = e["sourceEventSeqs"][0].as_u64();
                let found = if let Some(id) = d["callId"].as_str() {
                    calls.iter().position(|c| !c.answered && c.id == id)
                } else if let Some(i) = src.and_then(|s| calls.iter().position(|c| c.seq == s)) {
                    Some(i)
                } else {
                    let (step, name) = (d["step"].as_u64(), d["message"]["toolName"].as_str());
                    calls
                        .iter()
                        .position(|c| !c.answered && Some(c.step) == step && Some(&*c.name) == name)
                };
                let i = found.expect("every result of a stored session answers a call");
                calls[i].answered = true;
                pairs.push((calls[i].seq, e["seq"].as_u64().unwrap()));
            }
            _ => {}
        }
    }
    pairs
}

/// What the page's search matches: the type, and the strings, numbers and booleans of `data`,
/// case-insensitively.
fn search_text(e: &Value) -> String {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) => out.push(s.clone()),
            Value::Number(n) => out.push(n.to_string()),
            Value::Bool(b) => out.push(b.to_string()),
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            Value::Object(o) => o.values().for_each(|x| walk(x, out)),
            Value::Null => {}
        }
    }
    let mut parts = vec![e["type"].as_str().unwrap().to_string()];
    walk(&e["data"], &mut parts);
    parts.join("\n").to_lowercase()
}

fn file_url(path: &Path) -> String {
    format!("file://{}", path.canonicalize().unwrap().display())
}

/// `agentlog view ID -o DIR/NAME.html`; returns the page's path.
fn write_page(cli: &Cli, id: &str, name: &str) -> PathBuf {
    let out = cli.dir.path().join(format!("{name}.html"));
    cli.run(&["view", id, "-o", out.to_str().unwrap()]).ok();
    out
}

/// Opens the page in a new tab, waits for it to be ready, and checks it made no request but
/// its own file and logged no error.
fn load(browser: &mut Browser, path: &Path) -> Page {
    let page = browser.new_page();
    let url = file_url(path);
    browser.open(&page, &url, READY, Duration::from_secs(120));
    page
}

fn assert_quiet(browser: &mut Browser, page: &Page, path: &Path) {
    let url = file_url(path);
    let errors = browser.errors(page);
    assert!(errors.is_empty(), "{}: errors: {errors:#?}", path.display());
    let requests = browser.requests(page);
    let others: Vec<&String> = requests
        .iter()
        .filter(|u| u.split('#').next() != Some(url.as_str()))
        .collect();
    assert!(
        others.is_empty(),
        "{}: requests: {others:#?}",
        path.display()
    );
    assert!(requests.iter().any(|u| u.starts_with(&url)), "{requests:?}");
}

fn rendered_turns(browser: &mut Browser, page: &Page) -> Vec<u64> {
    let v = browser.eval(
        page,
        "[...document.querySelectorAll('section[data-turn]')].map(s => Number(s.dataset.turn))",
    );
    serde_json::from_value(v).unwrap()
}

/// Follows `#seq-CALL` (rendering it when needed), checks its link to the result and clicks
/// it; returns what the page shows at the result.
fn follow_call(browser: &mut Browser, page: &Page, call: u64) -> Value {
    browser.eval(
        page,
        &format!(
            r#"(async () => {{
                const frame = () => new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)));
                location.hash = '#seq-{call}';
                for (let i = 0; i < 50 && !document.getElementById('seq-{call}'); i++) await frame();
                const callEl = document.getElementById('seq-{call}');
                if (!callEl) return {{ missing: 'call' }};
                const a = callEl.querySelector('a.to-result');
                if (!a) return {{ callType: callEl.dataset.type, link: null }};
                const href = a.getAttribute('href');
                a.click();
                const id = href.slice(1);
                for (let i = 0; i < 50 && !document.getElementById(id); i++) await frame();
                await frame();
                const r = document.getElementById(id);
                if (!r) return {{ href, missing: 'result' }};
                const box = r.getBoundingClientRect();
                const back = r.querySelector('a.to-call');
                return {{
                    callType: callEl.dataset.type, href, seq: Number(r.dataset.seq),
                    type: r.dataset.type, targeted: r.classList.contains('targeted'),
                    visible: box.bottom > 0 && box.top < innerHeight,
                    back: back && back.getAttribute('href'),
                }};
            }})()"#
        ),
    )
}

fn check_links(browser: &mut Browser, page: &Page, events: &[Value], which: &[(u64, u64)]) {
    for &(call, result) in which {
        let got = follow_call(browser, page, call);
        assert_eq!(
            got,
            json!({
                "callType": "tool/call", "href": format!("#seq-{result}"), "seq": result,
                "type": "tool/result", "targeted": true, "visible": true,
                "back": format!("#seq-{call}"),
            }),
            "call {call} -> result {result}"
        );
    }
    // A call no result answers has no link.
    let answered: HashSet<u64> = expected_pairs(events).iter().map(|p| p.0).collect();
    for e in events.iter().filter(|e| e["type"] == "tool/call") {
        let seq = e["seq"].as_u64().unwrap();
        if !answered.contains(&seq) {
            let got = follow_call(browser, page, seq);
            assert_eq!(got, json!({"callType": "tool/call", "link": null}));
        }
    }
}

/// Types `text` into the search box (or picks `ty` in the type filter) and returns the match
/// count line and the seqs rendered.
fn narrow(browser: &mut Browser, page: &Page, text: &str, ty: &str) -> (String, Vec<u64>) {
    let v = browser.eval(
        page,
        &format!(
            r#"(async () => {{
                const s = document.getElementById('search'), t = document.getElementById('type-filter');
                s.value = {text}; s.dispatchEvent(new Event('input'));
                t.value = {ty}; t.dispatchEvent(new Event('change'));
                await new Promise(r => setTimeout(r, 400));
                window.scrollTo(0, 0);
                await new Promise(r => requestAnimationFrame(() => setTimeout(r, 50)));
                return [document.getElementById('match-count').textContent,
                        [...document.querySelectorAll('[data-seq]')].map(e => Number(e.dataset.seq))];
            }})()"#,
            text = json!(text),
            ty = json!(ty)
        ),
    );
    serde_json::from_value(v).unwrap()
}

fn count_line(n: usize, total: usize) -> String {
    let group = |n: usize| {
        let s = n.to_string();
        let mut out = String::new();
        for (i, c) in s.chars().enumerate() {
            if i > 0 && (s.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(c);
        }
        out
    };
    format!("{} of {} events match", group(n), group(total))
}

fn check_search(browser: &mut Browser, page: &Page, events: &[Value], needle: &str) {
    let want: HashSet<u64> = events
        .iter()
        .filter(|e| search_text(e).contains(&needle.to_lowercase()))
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert!(!want.is_empty() && want.len() < events.len(), "{needle}");
    let (line, seqs) = narrow(browser, page, needle, "");
    assert_eq!(line, count_line(want.len(), events.len()));
    assert!(!seqs.is_empty(), "{needle}: nothing rendered");
    for s in &seqs {
        assert!(
            want.contains(s),
            "{needle}: seq {s} rendered but does not match"
        );
    }
    // The type filter: only tool calls.
    let calls: HashSet<u64> = events
        .iter()
        .filter(|e| e["type"] == "tool/call")
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    let (line, seqs) = narrow(browser, page, "", "tool/call");
    assert_eq!(line, count_line(calls.len(), events.len()));
    assert!(!seqs.is_empty() && seqs.iter().all(|s| calls.contains(s)));
    // Cleared: every event again.
    let (line, _) = narrow(browser, page, "", "");
    assert_eq!(
        line,
        format!(
            "{} events",
            count_line(events.len(), 1).split(' ').next().unwrap()
        )
    );
}

/// `j` moves to the next turn: the first, then the second.
fn check_keys(browser: &mut Browser, page: &Page, turns: &[u64]) {
    if turns.len() < 2 {
        return;
    }
    browser.eval(page, "window.scrollTo(0, 0)");
    let mut seen = Vec::new();
    for _ in 0..2 {
        for kind in ["keyDown", "keyUp"] {
            browser.call(
                Some(&page.session),
                "Input.dispatchKeyEvent",
                json!({"type": kind, "key": "j", "code": "KeyJ", "text": if kind == "keyDown" { "j" } else { "" }}),
            );
        }
        let v = browser.eval(
            page,
            "(async () => { await new Promise(r => requestAnimationFrame(() => setTimeout(r, 30))); \
             const c = document.querySelector('section.turn.current'); return c ? Number(c.dataset.turn) : null; })()",
        );
        seen.push(v.as_u64().unwrap());
    }
    assert_eq!(seen, turns[..2].to_vec());
}

/// The screenshot has many colors and is not one flat background; saved under the target
/// directory for people to look at.
fn check_screenshot(browser: &mut Browser, page: &Page, name: &str) {
    browser.eval(
        page,
        "history.replaceState(null, '', location.pathname); window.scrollTo(0, 0)",
    );
    let png = browser.screenshot(page);
    let bytes = base64_decode(&png);
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    let keep = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("view-{name}.png"));
    std::fs::write(&keep, &bytes).unwrap();
    // Decoded by the browser itself, in a blank tab of its own.
    let scratch = browser.new_page();
    let v = browser.eval(
        &scratch,
        &format!(
            r#"(async () => {{
                const img = new Image();
                img.src = 'data:image/png;base64,{png}';
                await img.decode();
                const c = document.createElement('canvas');
                c.width = img.width; c.height = img.height;
                const g = c.getContext('2d');
                g.drawImage(img, 0, 0);
                const d = g.getImageData(0, 0, c.width, c.height).data;
                const colors = new Set();
                let differ = 0;
                for (let i = 0; i < d.length; i += 4) {{
                    colors.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
                    if (d[i] !== d[0] || d[i + 1] !== d[1] || d[i + 2] !== d[2]) differ++;
                }}
                return [img.width, img.height, colors.size, differ / (d.length / 4)];
            }})()"#
        ),
    );
    browser.close_page(scratch);
    let (w, h, colors, differ): (u64, u64, u64, f64) = serde_json::from_value(v).unwrap();
    assert_eq!((w, h), (1280, 900), "{}", keep.display());
    assert!(
        colors >= 16,
        "{name}: only {colors} colors ({})",
        keep.display()
    );
    assert!(
        differ > 0.03,
        "{name}: {differ} of the pixels differ from the background"
    );
}

#[test]
fn example_sessions_in_a_real_browser() {
    let Some(mut browser) = Browser::launch() else {
        return;
    };
    let cli = Cli::new();
    for name in EXAMPLES {
        let id = cli.import_example(name, &[]);
        let path = write_page(&cli, &id, name);
        let events =
            events_of(&std::fs::read_to_string(example(&format!("{name}.jsonl"))).unwrap());
        let page = load(&mut browser, &path);
        let turns = turns_of(&events);
        assert!(!turns.is_empty());
        assert_eq!(rendered_turns(&mut browser, &page), turns, "{name}");
        let pairs = expected_pairs(&events);
        assert!(!pairs.is_empty(), "{name}");
        check_links(&mut browser, &page, &events, &pairs);
        let needle = if name == "fix-typo" {
            "typo"
        } else {
            "approval"
        };
        check_search(&mut browser, &page, &events, needle);
        check_keys(&mut browser, &page, &turns);
        check_screenshot(&mut browser, &page, name);
        assert_quiet(&mut browser, &page, &path);
        browser.close_page(page);
    }
}

/// A generated session: `turns` turns of three tool steps and a final answer (21 events each).
fn long_session(turns: u64) -> String {
    let mut out = String::new();
    let mut seq = 0u64;
    let mut time = 1_700_000_000_000i64;
    let filler = "The quick brown fox jumps over the lazy dog; ".repeat(4);
    let mut push = |ty: &str, data: String, extra: &str, out: &mut String| {
        out.push_str(&format!(
            r#"{{"type":"{ty}","seq":{seq},"time":{time},"data":{data}{extra}}}"#
        ));
        out.push('\n');
        seq += 1;
        time += 137;
        seq - 1
    };
    for t in 1..=turns {
        push("turn/start", format!(r#"{{"turn":{t}}}"#), "", &mut out);
        push(
            "user/message",
            format!(
                r#"{{"role":"user","content":[{{"type":"text","text":"Request {t}: fix module m{t}. {filler}"}}]}}"#
            ),
            r#","surfaceOp":"append""#,
            &mut out,
        );
        for s in 1..=3u64 {
            push(
                "step/start",
                format!(r#"{{"turn":{t},"step":{s},"request":{{"model":"gen-1"}}}}"#),
                "",
                &mut out,
            );
            let tool = ["bash", "read_file", "apply_patch"][(s - 1) as usize];
            let call_id = format!("call_{t}_{s}");
            push(
                "assistant/message",
                format!(
                    r#"{{"turn":{t},"step":{s},"message":{{"role":"assistant","content":[{{"type":"text","text":"Step {s}: running {tool}. {filler}"}},{{"type":"tool_use","id":"{call_id}","name":"{tool}","input":{{"path":"src/m{t}.rs"}}}}]}},"usage":{{"inputTokens":{},"outputTokens":{}}}}}"#,
                    1000 + t,
                    50 + s
                ),
                r#","surfaceOp":"append""#,
                &mut out,
            );
            let call = push(
                "tool/call",
                format!(
                    r#"{{"turn":{t},"step":{s},"callId":"{call_id}","name":"{tool}","arguments":"{{\"path\":\"src/m{t}.rs\"}}"}}"#
                ),
                "",
                &mut out,
            );
            let is_error = (t + s) % 17 == 0;
            push(
                "tool/result",
                format!(
                    r#"{{"turn":{t},"step":{s},"message":{{"role":"tool","toolName":"{tool}","content":"output of {tool} for m{t}\n{filler}\n{filler}","isError":{is_error}}},"callId":"{call_id}"}}"#
                ),
                &format!(r#","surfaceOp":"append","sourceEventSeqs":[{call}]"#),
                &mut out,
            );
            push(
                "step/end",
                format!(r#"{{"turn":{t},"step":{s}}}"#),
                "",
                &mut out,
            );
        }
        push(
            "step/start",
            format!(r#"{{"turn":{t},"step":4}}"#),
            "",
            &mut out,
        );
        push(
            "assistant/message",
            format!(
                r#"{{"turn":{t},"step":4,"message":{{"role":"assistant","content":[{{"type":"text","text":"Done with m{t}.\n```rust\nfn m{t}() {{}}\n```"}}]}},"usage":{{"inputTokens":2000,"outputTokens":40}}}}"#
            ),
            r#","surfaceOp":"append""#,
            &mut out,
        );
        push(
            "step/end",
            format!(r#"{{"turn":{t},"step":4}}"#),
            "",
            &mut out,
        );
        push(
            "turn/end",
            format!(r#"{{"turn":{t},"reason":{{"kind":"completed"}}}}"#),
            "",
            &mut out,
        );
    }
    out
}

#[test]
fn a_75k_event_session_loads_and_its_links_resolve() {
    let Some(mut browser) = Browser::launch() else {
        return;
    };
    let cli = Cli::new();
    let turns = 75_000 / 21 + 1;
    let jsonl = long_session(turns);
    let events = events_of(&jsonl);
    assert!(events.len() >= 75_000, "{}", events.len());
    let src = cli.dir.path().join("long.jsonl");
    std::fs::write(&src, &jsonl).unwrap();
    let id = cli
        .run(&["import", src.to_str().unwrap(), "--id", "long"])
        .ok()
        .trim()
        .to_string();
    let path = write_page(&cli, &id, "long");
    let size = std::fs::metadata(&path).unwrap().len();
    assert!(size > 16_000_000, "{size} bytes");

    let page = load(&mut browser, &path);
    let nav = browser.eval(
        &page,
        "(() => { const n = performance.getEntriesByType('navigation')[0]; \
         return [Math.round(n.responseEnd), Math.round(n.domContentLoadedEventEnd), Number(document.body.dataset.paintedAt), \
         Number(document.body.dataset.loadMs), document.getElementsByTagName('*').length, document.body.dataset.loadSteps]; })()",
    );
    eprintln!(
        "75k-event page ({size} bytes): [response end, DOMContentLoaded end, first frame painted, script ms, elements, script steps] = {nav}"
    );
    // The baseline, measured in the same run on the same data: the same file with a script
    // that only parses the events (what any page embedding them must do). Printed, not
    // asserted (timings belong in benches; the machine is shared).
    let html = std::fs::read_to_string(&path).unwrap();
    let cut = html.rfind("<script>\n").unwrap();
    let baseline = cli.dir.path().join("baseline.html");
    std::fs::write(
        &baseline,
        format!(
            "{}<script>JSON.parse(document.getElementById('agentlog-events').textContent); \
             requestAnimationFrame(() => setTimeout(() => {{ document.body.dataset.paintedAt = \
             String(Math.round(performance.now())); }}, 0));</script></body></html>",
            &html[..cut]
        ),
    )
    .unwrap();
    // Three rounds, the baseline and the viewer alternating; the medians.
    let mut times = (Vec::new(), Vec::new());
    for _ in 0..3 {
        for (file, into) in [(&baseline, &mut times.0), (&path, &mut times.1)] {
            let p = browser.new_page();
            browser.open(&p, &file_url(file), READY, Duration::from_secs(120));
            into.push(
                browser
                    .eval(&p, "Number(document.body.dataset.paintedAt)")
                    .as_f64()
                    .unwrap(),
            );
            browser.close_page(p);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[1]
    };
    let (base_ms, view_ms) = (median(&mut times.0), median(&mut times.1));
    eprintln!(
        "75k-event page: first frame at {view_ms} ms (median of 3), baseline (parse only) \
         {base_ms} ms: ratio {:.2}",
        view_ms / base_ms.max(1.0)
    );
    // Rendering what is visible: far fewer elements than events.
    assert!(nav[4].as_u64().unwrap() < 75_000, "{nav}");
    assert_eq!(rendered_turns(&mut browser, &page), turns_of(&events));
    let pairs = expected_pairs(&events);
    let n = pairs.len();
    let some: Vec<(u64, u64)> = [0, 1, n / 3, n / 2, n - 2, n - 1]
        .iter()
        .map(|&i| pairs[i])
        .collect();
    check_links(&mut browser, &page, &events[..0], &some);
    check_search(&mut browser, &page, &events, "m3571");
    check_keys(&mut browser, &page, &turns_of(&events));
    check_screenshot(&mut browser, &page, "long");
    assert_quiet(&mut browser, &page, &path);
}

#[test]
fn hostile_text_stays_text() {
    let Some(mut browser) = Browser::launch() else {
        return;
    };
    let cli = Cli::new();
    let evil = r#"</script><script>console.error('injected')</script><img src=http://127.0.0.1:9/x onerror=console.error(1)><!--"#;
    let jsonl = format!(
        "{}\n{}\n",
        json!({"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}),
        json!({"type":"user/message","seq":1,"time":1,"data":{"role":"user","content":[{"type":"text","text":evil}]}})
    );
    let src = cli.dir.path().join("evil.jsonl");
    std::fs::write(&src, jsonl).unwrap();
    let id = cli
        .run(&["import", src.to_str().unwrap(), "--title", evil])
        .ok()
        .trim()
        .to_string();
    let path = write_page(&cli, &id, "evil");
    let html = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        html.matches("</script>").count(),
        5,
        "only the page's own five elements end"
    );
    let page = load(&mut browser, &path);
    let v = browser.eval(
        &page,
        "[document.getElementById('seq-1').textContent, document.querySelector('h1').textContent, \
          document.querySelectorAll('img').length, document.title]",
    );
    assert!(v[0].as_str().unwrap().contains(evil), "{v}");
    assert_eq!(v[1], json!(evil));
    assert_eq!(v[2], json!(0));
    assert!(v[3].as_str().unwrap().starts_with(evil), "{v}");
    assert_quiet(&mut browser, &page, &path);
}

/// A link to an event (`page.html#seq-N`) opens the page there, the event rendered, on screen
/// and marked, even inside a folded step of a later turn.
#[test]
fn a_link_to_an_event_opens_the_page_there() {
    let Some(mut browser) = Browser::launch() else {
        return;
    };
    let cli = Cli::new();
    let id = cli.import_example("tools-and-approvals", &[]);
    let path = write_page(&cli, &id, "linked");
    let events = events_of(&std::fs::read_to_string(example("tools-and-approvals.jsonl")).unwrap());
    // The first call (a folded step) and the last event.
    let call = events.iter().find(|e| e["type"] == "tool/call").unwrap()["seq"]
        .as_u64()
        .unwrap();
    let last = events.len() as u64 - 1;
    for seq in [call, last] {
        let page = browser.new_page();
        let url = format!("{}#seq-{seq}", file_url(&path));
        browser.open(&page, &url, READY, Duration::from_secs(120));
        let v = browser.eval(
            &page,
            &format!(
                "(async () => {{ await new Promise(r => requestAnimationFrame(() => setTimeout(r, 100))); \
                 const e = document.getElementById('seq-{seq}'); if (!e) return 'missing'; \
                 const b = e.getBoundingClientRect(); \
                 return [e.classList.contains('targeted'), b.top >= 0 && b.bottom <= innerHeight, \
                 Math.round(document.getElementById('top').getBoundingClientRect().top)]; }})()"
            ),
        );
        assert_eq!(v, json!([true, true, 0]), "{url}");
        assert_quiet(&mut browser, &page, &path);
        browser.close_page(page);
    }
}

/// Found by a sweep of the viewer: numbers in tool inputs and arguments were shown as
/// JavaScript rewrites them (`12345678901234567890123` as `1.2345678901234568e+22`, `1E+400`
/// as `null`, `1.0` as `1`) and the search did not find them as the log writes them; a
/// right-to-left override in an argument turned the page's own link text around; a turn whose
/// user message is inside its first step had no "— message" in its header; a tool's output in
/// text blocks was read as Markdown; and the CSP left form submissions open.
#[test]
fn numbers_direction_and_turn_headers_as_the_log_holds_them() {
    let Some(mut browser) = Browser::launch() else {
        return;
    };
    let cli = Cli::new();
    let lines = [
        r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}"#,
        r#"{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}"#,
        r#"{"type":"user/message","seq":2,"time":2,"data":{"role":"user","content":[{"type":"text","text":"Fix the typo"}]}}"#,
        r#"{"type":"assistant/message","seq":3,"time":3,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"tool_use","id":"u1","name":"bash","input":{"n":12345678901234567890123,"big":1E+400,"one":1.0}}]}}}"#,
        "{\"type\":\"tool/call\",\"seq\":4,\"time\":4,\"data\":{\"turn\":1,\"step\":1,\"callId\":\"u1\",\"name\":\"bash\",\"arguments\":\"{\\\"command\\\":\\\"ls \u{202e}x\\\",\\\"n\\\":6.02e23}\"}}",
        r#"{"type":"tool/result","seq":5,"time":5,"data":{"turn":1,"step":1,"callId":"u1","message":{"role":"tool","toolName":"bash","content":[{"type":"text","text":"ok `x`\n```\nfenced\n```"}],"isError":false}}}"#,
        r#"{"type":"step/end","seq":6,"time":6,"data":{"turn":1,"step":1}}"#,
        r#"{"type":"turn/end","seq":7,"time":7,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
    ];
    let src = cli.dir.path().join("numbers.jsonl");
    std::fs::write(&src, lines.join("\n") + "\n").unwrap();
    let id = cli
        .run(&["import", src.to_str().unwrap()])
        .ok()
        .trim()
        .to_string();
    let path = write_page(&cli, &id, "numbers");
    let page = load(&mut browser, &path);
    let v = browser.eval(
        &page,
        "(async () => { await new Promise(r => requestAnimationFrame(() => setTimeout(r, 100))); \
         return [document.getElementById('seq-3').textContent, \
         document.getElementById('seq-4').textContent, \
         document.querySelectorAll('#seq-4 .sum bdi').length, \
         document.querySelector('[data-turn=\"1\"] summary').textContent, \
         document.querySelector('meta[http-equiv]').content, \
         [...document.querySelectorAll('#seq-5 pre')].map(p => p.textContent).join('|')]; })()",
    );
    let shown = v[0].as_str().unwrap();
    for text in ["12345678901234567890123", "1E+400", "1.0"] {
        assert!(shown.contains(text), "{text} not shown: {shown}");
    }
    assert!(v[1].as_str().unwrap().contains("6.02e23"), "{v}");
    assert!(
        v[2].as_u64().unwrap() > 0,
        "the summary's data is isolated: {v}"
    );
    assert!(v[3].as_str().unwrap().contains("— Fix the typo"), "{v}");
    assert!(v[4].as_str().unwrap().contains("form-action 'none'"), "{v}");
    // A tool's output given as text blocks is verbatim monospace, as a string output is (it
    // was read as Markdown: the fence lines dropped, the backticks eaten).
    assert_eq!(v[5], json!("ok `x`\n```\nfenced\n```"), "{v}");
    for (needle, n) in [
        ("12345678901234567890123", 1),
        ("1E+400", 1),
        ("6.02e23", 1),
    ] {
        let (count, _) = narrow(&mut browser, &page, needle, "");
        assert_eq!(count, count_line(n, 8), "{needle}");
    }
    assert_quiet(&mut browser, &page, &path);
}

/// Opens the fold "what it replaced" of the replace at each of `seqs` once the page has drawn,
/// and returns, for each, `of_fold` (a JavaScript expression of the fold `f`), or `"no fold"`.
fn open_replace_folds(browser: &mut Browser, page: &Page, seqs: &[u64], of_fold: &str) -> Value {
    let seqs: Vec<String> = seqs.iter().map(u64::to_string).collect();
    browser.eval(
        page,
        &format!(
            "(async () => {{ await new Promise(r => requestAnimationFrame(() => setTimeout(r, 100))); \
             const folds = [{}].map(s => document.querySelector('#seq-' + s + ' details.replaced')); \
             for (const f of folds) if (f) f.open = true; \
             await new Promise(r => setTimeout(r, 50)); \
             return folds.map(f => f ? {of_fold} : 'no fold'); }})()",
            seqs.join(", ")
        ),
    )
}

/// Imports `lines` (one JSON event each) and returns the page written for them.
fn page_of_lines(cli: &Cli, name: &str, lines: &[&str]) -> PathBuf {
    let src = cli.dir.path().join(format!("{name}.jsonl"));
    std::fs::write(&src, lines.join("\n") + "\n").unwrap();
    let id = cli
        .run(&["import", src.to_str().unwrap()])
        .ok()
        .trim()
        .to_string();
    write_page(cli, &id, name)
}

/// Found by a review: a compaction's fold "what it replaced" listed every seq of its range
/// (turn and step markers, chunks, tool calls, an empty assistant message) instead of the
/// messages of the model's view it took out (docs/events.md §5): the surface nodes from the
/// node of `startSeq` through the node of `endSeq`, which may hold an earlier summary and holds
/// nothing outside the range.
#[test]
fn a_compaction_lists_the_messages_it_replaced() {
    let Some(mut browser) = Browser::launch() else {
        return;
    };
    let cli = Cli::new();
    let text = |t: &str| format!(r#"[{{"type":"text","text":"{t}"}}]"#);
    let user = |seq: u64, t: &str, op: &str| {
        format!(
            r#"{{"type":"user/message","seq":{seq},"time":{seq},"data":{{"role":"user","content":{}}}{op}}}"#,
            text(t)
        )
    };
    let assistant = |seq: u64, turn: u64, step: u64, content: &str, src: &str| {
        format!(
            r#"{{"type":"assistant/message","seq":{seq},"time":{seq},"data":{{"turn":{turn},"step":{step},"message":{{"role":"assistant","content":{content}}}}},"sourceEventSeqs":[{src}]}}"#
        )
    };
    let marker = |seq: u64, ty: &str, data: &str| {
        format!(r#"{{"type":"{ty}","seq":{seq},"time":{seq},"data":{data}}}"#)
    };
    let replace =
        |a: u64, b: u64| format!(r#","surfaceOp":{{"op":"replace","startSeq":{a},"endSeq":{b}}}"#);
    let lines = [
        format!(
            r#"{{"type":"system/message","seq":0,"time":0,"data":{{"role":"system","content":{}}}}}"#,
            text("You are terse.")
        ),
        marker(1, "turn/start", r#"{"turn":1}"#),
        user(2, "first question", ""),
        marker(3, "step/start", r#"{"turn":1,"step":1}"#),
        marker(4, "assistant/chunk", r#"{"turn":1,"step":1,"chunk":{"type":"text-delta","text":"Let me look"}}"#),
        assistant(5, 1, 1, r#"[{"type":"tool_use","id":"u1","name":"ls","input":{}}]"#, "4"),
        marker(6, "tool/call", r#"{"turn":1,"step":1,"callId":"u1","name":"ls","arguments":"{}"}"#),
        r#"{"type":"tool/result","seq":7,"time":7,"data":{"turn":1,"step":1,"callId":"u1","message":{"role":"tool","toolName":"ls","content":"a.txt","isError":false}},"sourceEventSeqs":[6]}"#.to_string(),
        marker(8, "step/end", r#"{"turn":1,"step":1}"#),
        marker(9, "step/start", r#"{"turn":1,"step":2}"#),
        assistant(10, 1, 2, "[]", ""),
        marker(11, "step/end", r#"{"turn":1,"step":2}"#),
        marker(12, "step/start", r#"{"turn":1,"step":3}"#),
        assistant(13, 1, 3, &text("done"), ""),
        marker(14, "step/end", r#"{"turn":1,"step":3}"#),
        marker(15, "turn/end", r#"{"turn":1,"reason":{"kind":"completed"}}"#),
        marker(16, "compact/start", r#"{"startSeq":2,"endSeq":13}"#),
        marker(17, "compact/summary", r#"{"startSeq":2,"endSeq":13,"summary":"Listed a.txt."}"#),
        user(18, "Summary: listed a.txt.", &replace(2, 13)),
        marker(19, "compact/end", r#"{"ok":true}"#),
        marker(20, "turn/start", r#"{"turn":2}"#),
        user(21, "second question", ""),
        marker(22, "step/start", r#"{"turn":2,"step":1}"#),
        assistant(23, 2, 1, &text("ok"), ""),
        marker(24, "step/end", r#"{"turn":2,"step":1}"#),
        marker(25, "turn/end", r#"{"turn":2,"reason":{"kind":"completed"}}"#),
        marker(26, "compact/start", r#"{"startSeq":18,"endSeq":23}"#),
        marker(27, "compact/summary", r#"{"startSeq":18,"endSeq":23,"summary":"All of it."}"#),
        user(28, "Summary: all of it.", &replace(18, 23)),
        marker(29, "compact/end", r#"{"ok":true}"#),
    ];
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let path = page_of_lines(&cli, "compacted", &lines);
    let page = load(&mut browser, &path);
    // Each replace's fold: its summary line, and the links it lists once opened.
    let folds = open_replace_folds(
        &mut browser,
        &page,
        &[18, 28],
        "[f.querySelector('summary').textContent, \
         [...f.querySelectorAll('.row')].map(r => r.querySelector('a').getAttribute('href')), \
         [...f.querySelectorAll('.row')].map(r => r.textContent.split(' ')[1])]",
    );
    assert_eq!(
        folds,
        json!([
            [
                "replaces seqs 2..13 in the model's view (4 messages)",
                ["#seq-2", "#seq-5", "#seq-7", "#seq-13"],
                [
                    "user/message",
                    "assistant/message",
                    "tool/result",
                    "assistant/message"
                ]
            ],
            [
                "replaces seqs 18..23 in the model's view (3 messages)",
                ["#seq-18", "#seq-21", "#seq-23"],
                ["user/message", "user/message", "assistant/message"]
            ]
        ]),
    );
    // A link of the fold leads to the message, in its folded step.
    let v = browser.eval(
        &page,
        "(async () => { document.querySelector('#seq-18 details.replaced a[href=\"#seq-5\"]').click(); \
         await new Promise(r => requestAnimationFrame(() => setTimeout(r, 100))); \
         const e = document.getElementById('seq-5'); \
         return e ? [e.dataset.type, e.classList.contains('targeted')] : 'missing'; })()",
    );
    assert_eq!(v, json!(["assistant/message", true]));
    assert_quiet(&mut browser, &page, &path);
}

/// A replace may take out a run in the middle of the model's view, and a later one may take out
/// a run that holds the first one's message and a node after it (its place in the view is the
/// place of the first node it took out, not the end): each fold lists exactly its run, in the
/// view's order. (The page finds a replace's run by walking a list linked by seq, once per
/// node, since an earlier version searched the whole view once per compaction.)
#[test]
fn a_replace_in_the_middle_keeps_the_order_of_the_view() {
    let Some(mut browser) = Browser::launch() else {
        return;
    };
    let cli = Cli::new();
    let user = |seq: u64, t: &str, op: &str| {
        format!(
            r#"{{"type":"user/message","seq":{seq},"time":{seq},"data":{{"role":"user","content":[{{"type":"text","text":"{t}"}}]}}{op}}}"#
        )
    };
    let marker = |seq: u64, ty: &str, data: &str| {
        format!(r#"{{"type":"{ty}","seq":{seq},"time":{seq},"data":{data}}}"#)
    };
    // One compaction: start, summary, the replacing message, end (seqs s..s+3).
    let compaction = |s: u64, a: u64, b: u64, t: &str| {
        let range = format!(r#""startSeq":{a},"endSeq":{b}"#);
        [
            marker(s, "compact/start", &format!("{{{range}}}")),
            marker(
                s + 1,
                "compact/summary",
                &format!(r#"{{{range},"summary":"{t}"}}"#),
            ),
            user(
                s + 2,
                t,
                &format!(r#","surfaceOp":{{"op":"replace",{range}}}"#),
            ),
            marker(s + 3, "compact/end", r#"{"ok":true}"#),
        ]
    };
    let mut lines = vec![
        user(0, "a", ""),
        user(1, "b", ""),
        user(2, "c", ""),
        user(3, "d", ""),
    ];
    // The view: a b c d, then a [6] d, then [10] d (taking a, 6), then [14] (taking 10, d).
    lines.extend(compaction(4, 1, 2, "b and c"));
    lines.extend(compaction(8, 0, 6, "a, b and c"));
    lines.extend(compaction(12, 10, 3, "all"));
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let path = page_of_lines(&cli, "middle", &lines);
    let page = load(&mut browser, &path);
    let folds = open_replace_folds(
        &mut browser,
        &page,
        &[6, 10, 14],
        "[...f.querySelectorAll('.row')].map(r => r.querySelector('a').getAttribute('href'))",
    );
    assert_eq!(
        folds,
        json!([
            ["#seq-1", "#seq-2"],
            ["#seq-0", "#seq-6"],
            ["#seq-10", "#seq-3"]
        ]),
    );
    assert_quiet(&mut browser, &page, &path);
}

/// Found by a review: the page read the events with `JSON.parse`, which puts members named by
/// integers (`"9"`, `"10"`) first, in ascending order, so `{"b":1,"9":2,"a":3}` showed as
/// `9, b, a`. Tool inputs, tool arguments, unknown events' data and sandbox details show their
/// members in the log's order (docs/events.md §4), with numbers as the log writes them, and
/// search still finds what is in them.
#[test]
fn members_named_by_integers_keep_their_place() {
    let Some(mut browser) = Browser::launch() else {
        return;
    };
    let cli = Cli::new();
    let lines = [
        r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}"#,
        r#"{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}"#,
        r#"{"type":"assistant/message","seq":2,"time":2,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"tool_use","id":"u1","name":"edit","input":{"b":1,"9":2,"a":{"10":"x","c":12345678901234567890123,"2":[{"z":1,"0":1.0}]}}}]}}}"#,
        r#"{"type":"tool/call","seq":3,"time":3,"data":{"turn":1,"step":1,"callId":"u1","name":"edit","arguments":"{\"b\":1, \"9\" : 2,\"a\":3,\"__proto__\":{\"1\":4}}"}}"#,
        r#"{"type":"tool/result","seq":4,"time":4,"data":{"turn":1,"step":1,"callId":"u1","message":{"role":"tool","toolName":"edit","content":"ok","isError":false}}}"#,
        r#"{"type":"step/end","seq":5,"time":5,"data":{"turn":1,"step":1}}"#,
        r#"{"type":"turn/end","seq":6,"time":6,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
        r#"{"type":"custom/thing","seq":7,"time":7,"data":{"b":1,"9":"needle-nine","a":3}}"#,
        r#"{"type":"sandbox/event","seq":8,"time":8,"data":{"kind":"start","detail":{"y":1,"3":2}}}"#,
    ];
    let path = page_of_lines(&cli, "ordered", &lines);
    let page = load(&mut browser, &path);
    let v = browser.eval(
        &page,
        "(async () => { await new Promise(r => requestAnimationFrame(() => setTimeout(r, 100))); \
         const pre = (s) => { const p = document.querySelector('#seq-' + s + ' pre'); return p ? p.textContent : null; }; \
         const sum = (s) => document.querySelector('#seq-' + s + ' .sum').textContent; \
         return [pre(2), pre(3), pre(7), sum(7), sum(8), pre(8)]; })()",
    );
    let input = "{\n  \"b\": 1,\n  \"9\": 2,\n  \"a\": {\n    \"10\": \"x\",\n    \"c\": 12345678901234567890123,\n    \"2\": [\n      {\n        \"z\": 1,\n        \"0\": 1.0\n      }\n    ]\n  }\n}";
    assert_eq!(
        v,
        json!([
            input,
            "{\n  \"b\": 1,\n  \"9\": 2,\n  \"a\": 3,\n  \"__proto__\": {\n    \"1\": 4\n  }\n}",
            "{\n  \"b\": 1,\n  \"9\": \"needle-nine\",\n  \"a\": 3\n}",
            r#"{"b":1,"9":"needle-nine","a":3}"#,
            r#"start {"y":1,"3":2}"#,
            "{\n  \"y\": 1,\n  \"3\": 2\n}",
        ])
    );
    for needle in ["needle-nine", "12345678901234567890123"] {
        let (count, _) = narrow(&mut browser, &page, needle, "");
        assert_eq!(count, count_line(1, 9), "{needle}");
    }
    assert_quiet(&mut browser, &page, &path);
}
