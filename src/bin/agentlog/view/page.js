// agentlog view: renders the session embedded in this page (docs/viewer.md).
// Data: #agentlog-events (the events, canonical JSON, docs/events.md §4), #agentlog-session (the
// session header), #agentlog-stats (the `stats` summary), #agentlog-pairs ([call seq, result
// seq] pairs). Only what is near the screen is rendered: turn bodies, long steps and long lists
// are placeholders filled when they scroll into view and emptied when far away.
(function () {
  "use strict";
  const t0 = performance.now();
  const data = (id) => JSON.parse(document.getElementById(id).textContent);
  const RAW = document.getElementById("agentlog-events").textContent;
  const EV = JSON.parse(RAW);
  const META = data("agentlog-session");
  const STATS = data("agentlog-stats");
  const PAIRS = data("agentlog-pairs");
  const marks = ["parse " + Math.round(performance.now() - t0)];
  const mark = (what) => marks.push(what + " " + Math.round(performance.now() - t0));
  const resultOf = new Map(), callOf = new Map();
  for (const [c, r] of PAIRS) { resultOf.set(c, r); callOf.set(r, c); }
  const bySeq = new Map(), indexOf = new Map();
  EV.forEach((e, i) => { bySeq.set(e.seq, e); indexOf.set(e.seq, i); });
  const ev = (s) => bySeq.get(s);

  // ---- numbers as the log holds them ---------------------------------------------------------
  // JSON.parse turns 12345678901234567890123 into 1.2345678901234568e+22, 1E+400 into Infinity
  // and 1.0 into 1. Where the browser gives a reviver the number's text (JSON.parse source text
  // access, with JSON.rawJSON), an event's data is read again from its own line of the events
  // element when it is shown or searched, keeping every number's text; elsewhere the values
  // JavaScript gives are shown.
  const lossless = typeof JSON.rawJSON === "function";
  const keepText = (k, v, ctx) =>
    typeof v === "number" && ctx && typeof ctx.source === "string" && ctx.source !== String(v) ? JSON.rawJSON(ctx.source) : v;
  // Members in the log's order: JSON.parse puts members named by integers ("9", "10") first,
  // in ascending order (to JavaScript they are array indices), whatever their place in the
  // text. Text that may have such a member (a quick test, which may say yes wrongly but never
  // no wrongly) is read by the small parser below instead, which gives the same plain values,
  // numbers as keepText gives them, and each object the names of its members in order under
  // the symbol ORDER. Other text is read by JSON.parse, whose order is then the text's.
  const ORDER = Symbol("order");
  const INT_KEY = /"(?:\d|\\u003\d)+"\s*:/;
  const WS = /[ \t\n\r]*/y, STR = /"[^"\\]*(?:\\.[^"\\]*)*"/y, LIT = /true|false|null/y,
    NUM = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
  const own = (o, k) => Object.prototype.hasOwnProperty.call(o, k);
  function parseOrdered(text) {
    let at = 0;
    const bad = () => new SyntaxError("JSON: unexpected text at " + at);
    const skip = () => { WS.lastIndex = at; WS.test(text); at = WS.lastIndex; };
    const take = (re) => { re.lastIndex = at; const m = re.exec(text); if (!m) throw bad(); at = re.lastIndex; return m[0]; };
    function value() {
      skip();
      const c = text.charCodeAt(at);
      if (c === 123) { // {
        at++;
        const o = {}, keys = [];
        skip();
        if (text.charCodeAt(at) === 125) at++;
        else for (;;) {
          skip();
          if (text.charCodeAt(at) !== 34) throw bad();
          const k = JSON.parse(take(STR));
          skip();
          if (text.charCodeAt(at++) !== 58) throw bad();
          const v = value();
          // A repeated name keeps its first place and its last value, as JSON.parse does.
          if (!own(o, k)) keys.push(k);
          // "__proto__" is a member like any other (an assignment would set the prototype).
          Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
          skip();
          const d = text.charCodeAt(at++);
          if (d === 125) break;
          if (d !== 44) throw bad();
        }
        Object.defineProperty(o, ORDER, { value: keys });
        return o;
      }
      if (c === 91) { // [
        at++;
        const a = [];
        skip();
        if (text.charCodeAt(at) === 93) { at++; return a; }
        for (;;) {
          a.push(value());
          skip();
          const d = text.charCodeAt(at++);
          if (d === 93) return a;
          if (d !== 44) throw bad();
        }
      }
      if (c === 34) return JSON.parse(take(STR));
      if (c === 116 || c === 102 || c === 110) return JSON.parse(take(LIT));
      const n = take(NUM), v = Number(n);
      return lossless && n !== String(v) ? JSON.rawJSON(n) : v;
    }
    const v = value();
    skip();
    if (at !== text.length) throw bad();
    return v;
  }
  // JSON text as the page shows it: members in order, numbers as the log writes them.
  function parse(text) {
    if (INT_KEY.test(text)) return parseOrdered(text);
    return lossless ? JSON.parse(text, keepText) : JSON.parse(text);
  }
  // A value read by parse as JSON text: `sp` "  " for JSON.stringify(v, null, 2)'s layout,
  // "" for one line.
  function jsonText(v, sp, at) {
    if (v === undefined) return "null";
    if (v === null || typeof v !== "object") return JSON.stringify(v);
    if (lossless && JSON.isRawJSON(v)) return v.rawJSON;
    const inner = at + sp, nl = sp ? "\n" : "";
    if (Array.isArray(v)) {
      if (!v.length) return "[]";
      return "[" + nl + v.map((x) => inner + jsonText(x, sp, inner)).join("," + nl) + nl + at + "]";
    }
    const keys = v[ORDER] || Object.keys(v);
    if (!keys.length) return "{}";
    return "{" + nl + keys.map((k) => inner + JSON.stringify(k) + (sp ? ": " : ":") + jsonText(v[k], sp, inner)).join("," + nl) + nl + at + "}";
  }
  let lineStarts = null;
  const exactCache = new Map();
  // Event s as its line of the events element holds it: numbers as written (where the browser
  // gives a reviver their text), members in order. Else the event JSON.parse gave.
  function exact(s) {
    let e = exactCache.get(s);
    if (e) return e;
    if (!lineStarts) {
      lineStarts = [];
      for (let at = RAW.indexOf("\n"); at >= 0; at = RAW.indexOf("\n", at + 1)) lineStarts.push(at + 1);
    }
    const i = indexOf.get(s);
    let line = RAW.slice(lineStarts[i], i + 1 < lineStarts.length ? lineStarts[i + 1] - 1 : RAW.length);
    line = line.replace(/,\s*$/, "").replace(/\s*\]\s*$/, "");
    if (!lossless && !INT_KEY.test(line)) return ev(s);
    try { e = parse(line); } catch (_) { e = ev(s); }
    if (exactCache.size > 2000) exactCache.clear();
    exactCache.set(s, e);
    return e;
  }

  const CHUNK = 150;        // events per lazily rendered block
  const ROW = 24;           // estimated height of one event row (px)
  const CLIP_CHARS = 2000, CLIP_LINES = 24;

  // ---- small helpers -------------------------------------------------------------------------
  function h(tag, attrs, ...kids) {
    const el = document.createElement(tag);
    if (attrs) for (const k in attrs) {
      const v = attrs[k];
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") el.className = v; else if (k === "text") el.textContent = v;
      else el.setAttribute(k, v === true ? "" : v);
    }
    for (const k of kids) if (k !== null && k !== undefined) el.append(k);
    return el;
  }
  const pad = (n, w) => String(n).padStart(w, "0");
  const times = EV.map((e) => e.time);
  const day = (ms) => { const d = new Date(ms); return d.getFullYear() * 400 + d.getMonth() * 32 + d.getDate(); };
  const manyDays = EV.length > 0 && day(times[0]) !== day(times[times.length - 1]);
  function clock(ms, withDate) {
    const d = new Date(ms);
    if (isNaN(d)) return "@" + ms;
    const t = pad(d.getHours(), 2) + ":" + pad(d.getMinutes(), 2) + ":" + pad(d.getSeconds(), 2) + "." + pad(d.getMilliseconds(), 3);
    return withDate ? d.getFullYear() + "-" + pad(d.getMonth() + 1, 2) + "-" + pad(d.getDate(), 2) + " " + t : t;
  }
  function dur(ms) {
    if (ms === null || ms === undefined || isNaN(ms)) return "-";
    const a = Math.abs(ms), neg = ms < 0 ? "-" : "";
    if (a < 1000) return neg + (Number.isInteger(a) ? a : a.toFixed(1)) + " ms";
    if (a < 60000) return neg + (a / 1000).toFixed(1) + " s";
    if (a < 3600000) { const s = Math.round(a / 1000); return neg + Math.floor(s / 60) + "m " + pad(s % 60, 2) + "s"; }
    const m = Math.round(a / 60000); return neg + Math.floor(m / 60) + "h " + pad(m % 60, 2) + "m";
  }
  function oneLine(s, max) {
    s = String(s).replace(/\s+/g, " ").trim();
    return s.length > max ? s.slice(0, max) + "…" : s;
  }
  const num = (n) => Number(n).toLocaleString("en-US");
  // Colors as `show` prints them (src/bin/agentlog/lines.rs type_color).
  function color(e) {
    switch (e.type) {
      case "turn/start": case "turn/end": case "system/message": return "magenta";
      case "step/start": case "step/end": case "compact/start": case "compact/summary": case "compact/end": return "blue";
      case "user/message": return "green";
      case "assistant/message": return "cyan";
      case "tool/call": case "approval/request": case "approval/decision": return "yellow";
      case "tool/result": return e.data && e.data.message && e.data.message.isError ? "red" : "yellow";
      case "error": return "red";
      default: return "dim";
    }
  }
  function blocksText(blocks) {
    if (!Array.isArray(blocks)) return "";
    return blocks.map((b) => {
      if (b.type === "text") return b.text;
      if (b.type === "reasoning") return "(thinking) " + b.text;
      if (b.type === "tool_use") return "[tool_use " + b.id + " " + b.name + "]";
      if (b.type === "tool_result") return "[tool_result " + b.toolUseId + "]";
      return "[" + b.type + "]";
    }).join(" ");
  }
  function contentText(c) { return typeof c === "string" ? c : blocksText(c); }

  // ---- the structure: turns, steps, events outside turns ------------------------------------
  // groups: {kind:"turn", turn, items:[seq | step]} or {kind:"loose", items:[seq]};
  // step: {step, seqs:[seq]}. groupOf[i] / stepOf[i]: where event i (by position) lives.
  const groups = [];
  const place = new Map(); // seq -> {g, st}
  {
    let turn = null, step = null, loose = null;
    for (const e of EV) {
      const t = e.type;
      if (t === "turn/start") {
        turn = { kind: "turn", turn: e.data.turn, items: [], start: e.seq, end: null, steps: 0, calls: 0, n: 0 };
        groups.push(turn); step = null; loose = null;
      }
      if (turn) {
        if (t === "step/start" && !step) {
          step = { step: e.data.step, seqs: [], start: e.seq, turn: turn.turn };
          turn.items.push(step); turn.steps++;
        }
        if (step) step.seqs.push(e.seq); else turn.items.push(e.seq);
        if (t === "tool/call") turn.calls++;
        turn.n++;
        place.set(e.seq, { g: turn, st: step });
        if (t === "step/end" && step) step = null;
        if (t === "turn/end") { turn.end = e.seq; turn = null; step = null; }
      } else {
        if (!loose) { loose = { kind: "loose", items: [] }; groups.push(loose); }
        loose.items.push(e.seq);
        place.set(e.seq, { g: loose, st: null });
      }
    }
  }

  mark("structure");
  // ---- filter (search box and type) ---------------------------------------------------------
  let query = "", typeSel = "", texts = null, matches = null, matchCount = EV.length;
  function strings(v, out) {
    if (typeof v === "string") out.push(v);
    else if (lossless && v && typeof v === "object" && JSON.isRawJSON && JSON.isRawJSON(v)) out.push(v.rawJSON);
    else if (typeof v === "number" || typeof v === "boolean") out.push(String(v));
    else if (Array.isArray(v)) for (const x of v) strings(x, out);
    else if (v && typeof v === "object") for (const k in v) strings(v[k], out);
    return out;
  }
  function textOf(i) {
    if (!texts) texts = new Array(EV.length);
    if (texts[i] === undefined) texts[i] = (EV[i].type + "\n" + strings(exact(EV[i].seq).data, []).join("\n")).toLowerCase();
    return texts[i];
  }
  function typeOk(t) {
    if (!typeSel) return true;
    if (typeSel.endsWith("/*")) return t.startsWith(typeSel.slice(0, -1));
    return t === typeSel;
  }
  function computeMatches() {
    if (!query && !typeSel) { matches = null; matchCount = EV.length; return; }
    const q = query.toLowerCase();
    matches = new Set();
    EV.forEach((e, i) => { if (typeOk(e.type) && (!q || textOf(i).includes(q))) matches.add(e.seq); });
    matchCount = matches.size;
  }
  const shown = (s) => !matches || matches.has(s);

  // ---- lazy blocks --------------------------------------------------------------------------
  // A lazy block is an element with a fill function; it is filled when near the screen and
  // emptied (keeping its height) when far from it. data-lo / data-hi: the seqs it holds.
  const near = new IntersectionObserver((es) => {
    for (const en of es) if (en.isIntersecting) fill(en.target);
  }, { rootMargin: "1200px 0px" });
  const far = new IntersectionObserver((es) => {
    for (const en of es) if (!en.isIntersecting) empty(en.target);
  }, { rootMargin: "8000px 0px" });
  function lazy(lo, hi, estimate, fillFn, cls) {
    const el = h("div", { class: "lazy " + (cls || ""), "data-lo": lo, "data-hi": hi });
    el.style.height = Math.max(estimate, 20) + "px";
    el.textContent = "…";
    el._fill = fillFn;
    el._est = estimate;
    el._filled = false;
    near.observe(el);
    return el;
  }
  function fill(el) {
    if (el._filled || !el._fill) return;
    el._filled = true;
    el.textContent = "";
    el.style.height = "";
    el.classList.remove("lazy");
    el._fill(el);
    near.unobserve(el);
    far.observe(el);
  }
  function empty(el) {
    if (!el._filled || el.contains(document.activeElement) || el.querySelector(".targeted")) return;
    const height = el.offsetHeight;
    if (height === 0) return; // hidden (a closed fold): leave it
    far.unobserve(el);
    el._filled = false;
    el.textContent = "…";
    el.classList.add("lazy");
    el.style.height = height + "px";
    near.observe(el);
  }
  // Fills the first lazy blocks now, in document order, until their estimated heights cover
  // the screen twice (the observer would do it a frame later: a first paint, a screenshot or
  // --dump-dom sees the content). Estimates, not layout: no forced layout per block.
  function fillVisible() {
    let covered = 0;
    for (const el of main.querySelectorAll(".lazy")) {
      if (covered > 2 * window.innerHeight) return;
      if (el.closest("details:not([open])")) continue;
      covered += el._est || 0;
      fill(el);
    }
  }
  // A list of rows (seqs, and runs of assistant/chunk), in lazy blocks when long.
  function rowsOf(seqs) {
    const rows = [];
    let run = null;
    for (const s of seqs) {
      if (!shown(s)) continue;
      if (ev(s).type === "assistant/chunk") {
        if (!run) { run = { run: [] }; rows.push(run); }
        run.run.push(s);
      } else { run = null; rows.push(s); }
    }
    return rows.map((r) => (r.run && r.run.length < 3 ? r.run : [r])).flat();
  }
  const lo = (r) => (typeof r === "number" ? r : r.run ? r.run[0] : r.seqs[0]);
  const hi = (r) => (typeof r === "number" ? r : r.run ? r.run[r.run.length - 1] : r.seqs[r.seqs.length - 1]);
  function renderRows(container, rows, renderRow) {
    if (rows.length <= CHUNK) { for (const r of rows) container.append(renderRow(r)); return; }
    for (let i = 0; i < rows.length; i += CHUNK) {
      const part = rows.slice(i, i + CHUNK);
      container.append(lazy(lo(part[0]), hi(part[part.length - 1]), part.length * ROW,
        (el) => { for (const r of part) el.append(renderRow(r)); }));
    }
  }
  function renderRow(r) {
    if (typeof r === "number") return renderEvent(r);
    if (r.run) return renderRun(r.run);
    return renderStep(r);
  }
  function renderRun(run) {
    const a = run[0], b = run[run.length - 1];
    const d = h("details", { class: "chunks", "data-lo": a, "data-hi": b },
      h("summary", { text: run.length + " assistant/chunk events (seqs " + a + "–" + b + ")" }));
    d._fill = (el) => renderRows(el, run, renderEvent);
    d.addEventListener("toggle", () => { if (d.open) fillFold(d); });
    return d;
  }
  function fillFold(d) {
    if (d._done) return;
    d._done = true;
    d._fill(d);
  }

  // ---- events -------------------------------------------------------------------------------
  function link(seq, text, cls) { return h("a", { href: "#seq-" + seq, class: cls || null, text: text }); }
  function mdText(text) {
    // Markdown shown as text: fenced code blocks in monospace, `inline code` marked.
    const box = h("div", { class: "md-box" });
    const parts = String(text).split(/^```[^\n]*\n?/m);
    parts.forEach((p, i) => {
      if (i % 2 === 1) { box.append(h("pre", { class: "code", text: p.replace(/\n$/, "") })); return; }
      if (!p.trim()) return;
      const div = h("div", { class: "md" });
      p.split(/(`[^`\n]+`)/).forEach((s, j) => {
        if (j % 2 === 1) div.append(h("code", { text: s.slice(1, -1) })); else if (s) div.append(s);
      });
      box.append(div);
    });
    return box;
  }
  function clipped(text, make) {
    text = String(text);
    const lines = text.split("\n");
    if (text.length <= CLIP_CHARS && lines.length <= CLIP_LINES) return make(text);
    let short = lines.slice(0, CLIP_LINES).join("\n");
    if (short.length > CLIP_CHARS) short = short.slice(0, CLIP_CHARS);
    const box = h("div", { class: "clip" }, make(short + "\n…"));
    const btn = h("button", { class: "show-all", type: "button",
      text: "show all (" + num(lines.length) + " lines, " + num(text.length) + " characters)" });
    btn.addEventListener("click", () => { box.replaceChildren(make(text)); });
    box.append(btn);
    return box;
  }
  const pre = (t) => h("pre", { text: t });
  function json(v) { try { return jsonText(v, "  ", ""); } catch (_) { return String(v); } }
  // Arguments that are not JSON are shown as they are.
  function prettyArgs(s) { try { return jsonText(parse(s), "  ", ""); } catch (_) { return s; } }
  // `output`: the blocks are a tool's output, whose text is shown verbatim in monospace, as an
  // output given as a string is (not read as Markdown).
  function renderBlocks(blocks, box, output) {
    if (!Array.isArray(blocks)) return;
    for (const b of blocks) {
      if (b.type === "text") box.append(clipped(b.text, output ? pre : mdText));
      else if (b.type === "reasoning") {
        const d = h("details", { class: "thinking" }, h("summary", { text: "thinking (" + num(String(b.text).length) + " characters)" }));
        d.append(clipped(b.text, mdText));
        box.append(d);
      } else if (b.type === "tool_use") {
        box.append(h("div", { class: "meta", text: "tool_use " + b.id + " " + b.name }), clipped(json(b.input), pre));
      } else if (b.type === "tool_result") {
        box.append(h("div", { class: b.isError ? "bad" : "meta", text: "tool_result " + b.toolUseId + " " + (b.toolName || "") + (b.isError ? " (error)" : "") }));
        if (typeof b.content === "string") box.append(clipped(b.content, pre)); else renderBlocks(b.content, box, true);
      } else box.append(h("div", { class: "meta", text: "[" + b.type + "]" }), clipped(json(b), pre));
    }
  }
  function summary(e) {
    const d = e.data || {};
    switch (e.type) {
      case "turn/start": return ["turn " + d.turn];
      case "turn/end": {
        const k = d.reason && d.reason.kind;
        const out = ["turn " + d.turn + " ", h("span", { class: k === "completed" ? "good" : "bad", text: k })];
        const er = d.reason && d.reason.error;
        if (er && (er.message || er.code)) out.push(": " + oneLine(er.message || er.code, 200));
        return out;
      }
      case "step/start": {
        const m = d.request && typeof d.request.model === "string" ? " model=" + d.request.model : "";
        return ["turn " + d.turn + " step " + d.step, h("span", { class: "meta", text: m })];
      }
      case "step/end": return ["turn " + d.turn + " step " + d.step];
      case "user/message": case "system/message": return [oneLine(blocksText(d.content), 100)];
      case "assistant/message": {
        const m = d.message || {};
        const out = [m.content && m.content.length ? oneLine(blocksText(m.content), 100) : h("span", { class: "meta", text: "(empty)" })];
        if (d.usage) out.push(h("span", { class: "meta", text: " [" + num(d.usage.inputTokens) + " in, " + num(d.usage.outputTokens) + " out tokens]" }));
        return out;
      }
      case "assistant/chunk": {
        const c = d.chunk || {};
        if (c.type === "text-delta") return [JSON.stringify(oneLine(c.text, 80))];
        if (c.type === "reasoning-delta") return ["(thinking) " + JSON.stringify(oneLine(c.text, 80))];
        if (c.type === "tool-call-delta") return [[c.id, c.name, c.arguments].filter((x) => x).map((x) => oneLine(x, 60)).join(" ")];
        return ["[" + c.type + "]"];
      }
      case "tool/call": {
        const r = resultOf.get(e.seq);
        const out = [h("b", { text: d.name }), " " + oneLine(d.arguments, 80) + " "];
        if (r !== undefined) out.push(link(r, "→ " + d.callId + " result #" + r, "to-result"));
        else out.push(h("span", { class: "bad", text: "→ " + d.callId + " (no result)" }));
        return out;
      }
      case "tool/result": {
        const m = d.message || {};
        const c = callOf.get(e.seq);
        const out = [];
        if (c !== undefined) out.push(link(c, "↳ " + ev(c).data.callId + " " + ev(c).data.name + " (call #" + c + ")", "to-call"));
        else out.push(h("span", { class: "c-yellow", text: "↳ " + (d.callId || "?") + " " + m.toolName }));
        out.push(": " + oneLine(contentText(m.content), 80));
        if (m.isError) out.push(h("span", { class: "bad", text: " (error)" }));
        return out;
      }
      case "approval/request": return [d.callId + " " + d.tool + (d.reason ? ": " + oneLine(d.reason, 120) : "")];
      case "approval/decision": return [d.callId + " ", h("span", { class: d.decision === "approved" ? "good" : "bad", text: d.decision }),
        (d.by ? " by " + d.by : "") + (d.note ? ": " + oneLine(d.note, 120) : "")];
      case "sandbox/event": return [d.kind + (d.detail !== undefined ? " " + oneLine(jsonText(exact(e.seq).data.detail, "", ""), 100) : "")];
      case "error": return [h("span", { class: "bad", text: oneLine(d.message, 160) })];
      case "compact/start": return ["compacting seqs ", link(d.startSeq, String(d.startSeq)), "..", link(d.endSeq, String(d.endSeq))];
      case "compact/summary": return ["seqs " + d.startSeq + ".." + d.endSeq + ": " + oneLine(d.summary, 100)];
      case "compact/end": return [d.ok ? h("span", { class: "good", text: "ok" }) : h("span", { class: "bad", text: "failed" })];
      default: return [oneLine(jsonText(exact(e.seq).data, "", ""), 100)];
    }
  }
  // A message of one short line of text is all in its summary.
  function shortText(blocks) {
    return Array.isArray(blocks) && blocks.length === 1 && blocks[0].type === "text" &&
      String(blocks[0].text).length <= 100 && !/[\n`]/.test(blocks[0].text);
  }
  function details(e, box) {
    const d = e.data || {};
    switch (e.type) {
      case "user/message": case "system/message": if (!shortText(d.content)) renderBlocks(d.content, box); break;
      case "assistant/message": if (d.message && !shortText(d.message.content)) renderBlocks(d.message.content, box); break;
      case "tool/call": box.append(clipped(prettyArgs(d.arguments), pre)); break;
      case "tool/result": {
        const m = d.message || {};
        if (typeof m.content === "string") box.append(clipped(m.content, pre)); else renderBlocks(m.content, box, true);
        if (d.error !== undefined) box.append(h("div", { class: "bad", text: "error: " + oneLine(jsonText(d.error, "", ""), 300) }));
        break;
      }
      case "error": if (d.stack) { const f = h("details", { class: "more" }, h("summary", { text: "stack" })); f.append(clipped(d.stack, pre)); box.append(f); } break;
      case "compact/summary": box.append(clipped(d.summary, mdText)); break;
      case "sandbox/event": if (d.detail !== undefined && typeof d.detail === "object" && d.detail !== null) box.append(clipped(json(d.detail), pre)); break;
      default:
        if (!["turn/start", "turn/end", "step/start", "step/end", "assistant/chunk", "approval/request", "approval/decision", "compact/start", "compact/end"].includes(e.type))
          box.append(clipped(json(d), pre));
    }
    const op = e.surfaceOp;
    if (op && typeof op === "object" && op.op === "replace") box.append(replaced(e.seq, op.startSeq, op.endSeq));
  }
  // What a replace took out of the model's view (docs/events.md §5): not every event of its
  // range, only the surface nodes from the node of startSeq through the node of endSeq, in
  // surface order. The surface is replayed once, when a replace is first shown: user, system and
  // tool-result messages and assistant messages with content are nodes (chunks, calls, turn and
  // step markers, audit events are not), and a replace's own message takes the place of the run
  // it removes (so a later compaction may take out an earlier summary).
  let replacedBy = null;
  function isNode(e) {
    switch (e.type) {
      case "user/message": case "system/message": case "tool/result": return true;
      case "assistant/message": { const m = e.data && e.data.message; return !!(m && Array.isArray(m.content) && m.content.length); }
      default: return false;
    }
  }
  function replacedNodes(s) {
    if (!replacedBy) {
      replacedBy = new Map();
      // The surface as a list linked by seq, so that a replace finds its ends at once and walks
      // only the run it takes out: each node is taken out once, linear in the page whatever the
      // number of compactions. A node's key orders the list: a pushed node's is its seq (seqs
      // grow), a replace's message takes the key of the first node it takes out, whose place it
      // takes.
      const key = new Map(), next = new Map(), prev = new Map();
      let tail;
      for (const e of EV) {
        if (!isNode(e)) continue;
        const op = e.surfaceOp;
        if (op && typeof op === "object" && op.op === "replace") {
          const a = op.startSeq, b = op.endSeq, ka = key.get(a), kb = key.get(b);
          if (ka !== undefined && kb !== undefined && kb >= ka) {
            const run = [];
            for (let k = a; ; k = next.get(k)) { run.push(k); if (k === b) break; }
            const before = prev.get(a), after = next.get(b);
            for (const k of run) { key.delete(k); next.delete(k); prev.delete(k); }
            key.set(e.seq, ka); prev.set(e.seq, before); next.set(e.seq, after);
            if (before !== undefined) next.set(before, e.seq);
            if (after !== undefined) prev.set(after, e.seq); else tail = e.seq;
            replacedBy.set(e.seq, run);
            continue;
          }
        }
        key.set(e.seq, e.seq); prev.set(e.seq, tail);
        if (tail !== undefined) next.set(tail, e.seq);
        tail = e.seq;
      }
    }
    return replacedBy.get(s) || null;
  }
  function replaced(s, a, b) {
    const nodes = replacedNodes(s);
    // The log refuses a replace whose ends are not current nodes: only a damaged page gets here.
    if (!nodes) return h("div", { class: "bad", text: "replaces seqs " + a + ".." + b + ": not messages of the model's view there" });
    const f = h("details", { class: "more replaced" },
      h("summary", { text: "replaces seqs " + a + ".." + b + " in the model's view (" + num(nodes.length) + (nodes.length === 1 ? " message)" : " messages)") }));
    f.addEventListener("toggle", () => {
      if (!f.open || f._done) return;
      f._done = true;
      const max = Math.min(nodes.length, 500);
      for (const n of nodes.slice(0, max)) {
        const x = ev(n);
        f.append(h("div", { class: "row" }, link(n, "#" + n), " " + x.type + " ", ...summary(x).map((k) => (typeof k === "string" ? k : k.cloneNode(true)))));
      }
      if (max < nodes.length) f.append(h("div", { class: "row", text: "… " + num(nodes.length - max) + " more" }));
    });
    return f;
  }
  function renderEvent(s) {
    const e = ev(s);
    const p = place.get(s);
    const el = h("div", { class: "ev", id: "seq-" + s, "data-seq": s, "data-type": e.type,
      "data-turn": p && p.g.kind === "turn" ? p.g.turn : null });
    if (e.type === "tool/result" && e.data.message && e.data.message.isError) el.classList.add("is-error");
    const line = h("div", { class: "line" },
      h("a", { class: "seq", href: "#seq-" + s, text: String(s) }),
      h("span", { class: "time", text: clock(e.time, manyDays), title: clock(e.time, true) }),
      h("span", { class: "type c-" + color(e), text: e.type }),
      // Each piece of data in its own bidi-isolated element: a right-to-left override in an
      // argument must not turn the page's own text after it around.
      h("span", { class: "sum" }, ...summary(e).map((k) => typeof k === "string" ? h("bdi", { text: k }) : k)));
    if (e.surfaceOp && e.surfaceOp.op === "replace") line.append(h("span", { class: "c-blue", text: "[replaces seqs " + e.surfaceOp.startSeq + ".." + e.surfaceOp.endSeq + "]" }));
    el.append(line);
    let box = h("div", { class: "content" });
    // The content with the numbers as the log writes them; a value the page's code cannot
    // take as it is (an unusual number where it expects text) falls back to JavaScript's.
    try { details(exact(s), box); } catch (_) { box = h("div", { class: "content" }); details(e, box); }
    if (box.childNodes.length) el.append(box);
    return el;
  }

  // ---- turns and steps ----------------------------------------------------------------------
  function stepSummary(st) {
    let model = "", tin = 0, tout = 0, tools = new Map();
    for (const s of st.seqs) {
      const e = ev(s), d = e.data || {};
      if (e.type === "step/start" && d.request && typeof d.request.model === "string") model = d.request.model;
      if (e.type === "assistant/message" && d.usage) { tin += d.usage.inputTokens || 0; tout += d.usage.outputTokens || 0; }
      if (e.type === "tool/call") tools.set(d.name, (tools.get(d.name) || 0) + 1);
    }
    const parts = [num(st.seqs.length) + " events"];
    if (model) parts.push(model);
    if (tin || tout) parts.push(num(tin) + " in / " + num(tout) + " out tokens");
    if (tools.size) parts.push("tools: " + [...tools].map(([n, c]) => (c > 1 ? n + "×" + c : n)).join(", "));
    return parts.join(" · ");
  }
  function renderStep(st) {
    const last = st._last;
    const d = h("details", { class: "step", "data-step": st.step, "data-lo": st.seqs[0], "data-hi": st.seqs[st.seqs.length - 1] },
      h("summary", null, h("span", { class: "step-title", text: "Step " + st.step }), " ", h("span", { class: "meta", text: stepSummary(st) })));
    d._fill = (el) => { const b = h("div", { class: "body" }); el.append(b); renderRows(b, rowsOf(st.seqs), renderRow); };
    d.addEventListener("toggle", () => { if (d.open) fillFold(d); });
    if (last || matches) { d.open = true; fillFold(d); }
    return d;
  }
  function turnSummary(g) {
    const parts = [];
    const end = g.end !== null ? ev(g.end) : null;
    const kind = end && end.data.reason ? end.data.reason.kind : null;
    const span = h("span", { class: kind === "completed" ? "good" : "bad", text: kind || "open (no turn/end)" });
    const last = end || ev(g.items.length ? hi(g.items[g.items.length - 1]) : g.start);
    parts.push(dur(last.time - ev(g.start).time), g.steps + (g.steps === 1 ? " step" : " steps"),
      g.calls + (g.calls === 1 ? " tool call" : " tool calls"), num(g.n) + " events", clock(ev(g.start).time, manyDays));
    let first = "";
    // The first user message, also when it is inside the turn's first step.
    for (const it of g.items) {
      const s = (typeof it === "number" ? [it] : it.seqs).find((x) => ev(x).type === "user/message");
      if (s !== undefined) { first = oneLine(blocksText(ev(s).data.content), 90); break; }
    }
    return [span, " · " + parts.join(" · "), first ? h("span", { class: "meta", text: " — " + first }) : null];
  }
  function turnRows(g) {
    const rows = [];
    let lastStep = null;
    for (const it of g.items) {
      if (typeof it === "number") { if (shown(it)) rows.push(it); continue; }
      if (matches && !it.seqs.some(shown)) continue;
      it._last = false; lastStep = it; rows.push(it);
    }
    if (lastStep) lastStep._last = true;
    // Runs of chunks outside steps are rare; group them like inside steps.
    const out = [];
    let pending = [];
    const flush = () => { if (pending.length) { out.push(...rowsOf(pending)); pending = []; } };
    for (const r of rows) { if (typeof r === "number") pending.push(r); else { flush(); out.push(r); } }
    flush();
    return out;
  }
  function estimate(rows) {
    let n = 0;
    for (const r of rows) n += typeof r === "number" ? ROW * 1.6 : r.run ? ROW : r._last || matches ? r.seqs.length * ROW * 1.3 : ROW + 6;
    return n;
  }
  function renderGroup(g) {
    if (g.kind === "loose") {
      const rows = rowsOf(g.items);
      if (!rows.length) return null;
      const sec = h("section", { class: "loose", "data-lo": g.items[0], "data-hi": g.items[g.items.length - 1] });
      sec.append(lazy(g.items[0], g.items[g.items.length - 1], estimate(rows), (el) => renderRows(el, rows, renderRow), "body"));
      return sec;
    }
    if (matches && !g.items.some((it) => (typeof it === "number" ? shown(it) : it.seqs.some(shown)))) return null;
    const lastSeq = g.items.length ? hi(g.items[g.items.length - 1]) : g.start;
    // Every turn has its section at once (the hook data-turn); its header and body are
    // rendered when it comes near the screen.
    const sec = h("section", { class: "turn", "data-turn": g.turn, id: "turn-" + g.turn, tabindex: "-1" });
    sec.append(lazy(g.start, lastSeq, turnEstimate(g), (el) => {
      const det = h("details", { "data-lo": g.start, "data-hi": lastSeq },
        h("summary", null, h("span", { class: "turn-title", text: "Turn " + g.turn }), " ", ...turnSummary(g)));
      det.open = !g.closed;
      const body = h("div", { class: "body" });
      det.append(body);
      det._fill = () => renderRows(body, turnRows(g), renderRow);
      det.addEventListener("toggle", () => { g.closed = !det.open; if (det.open) fillFold(det); });
      if (det.open) fillFold(det);
      el.append(det);
    }, "turn-body"));
    return sec;
  }
  // A turn's height before it is rendered, from its counts (no rows built).
  function turnEstimate(g) {
    if (matches) return 34 + estimate(turnRows(g));
    if (g.closed) return 34;
    let loose = 0, steps = 0, last = 0;
    for (const it of g.items) if (typeof it === "number") loose++; else { steps++; last = it.seqs.length; }
    return 34 + loose * ROW * 1.6 + (steps ? (steps - 1) * (ROW + 6) + last * ROW * 1.3 : 0);
  }
  const main = h("main", { id: "events" });
  function renderAll() {
    main.textContent = "";
    const frag = document.createDocumentFragment();
    for (const g of groups) { const s = renderGroup(g); if (s) frag.append(s); }
    main.append(frag);
    mark("sections");
    fillVisible();
    mark("visible");
    if (!main.childNodes.length) main.append(h("div", { class: "empty", text: EV.length ? "No event matches." : "This session has no events." }));
    countEl.textContent = matches ? num(matchCount) + " of " + num(EV.length) + " events match" : num(EV.length) + " events";
  }

  // ---- the header: session, lineage, time span, stats ----------------------------------------
  function header() {
    const box = h("header", { id: "session-header" });
    box.append(h("h1", { text: META.title ? META.title : "Session " + META.id }));
    const fact = (k, v) => h("span", null, k + " ", h("b", { text: v }));
    const facts = h("div", { class: "facts" }, fact("id", META.id));
    if (META.parentSession) facts.append(fact("forked from", META.parentSession + (META.seedLength !== undefined && META.seedLength !== null ? " (first " + META.seedLength + " events copied)" : "")));
    else facts.append(fact("lineage", "no parent"));
    if (META.cwd) facts.append(fact("cwd", META.cwd));
    facts.append(fact("created", clock(META.createdAt, true)));
    if (EV.length) facts.append(fact("events", clock(times[0], true) + " → " + clock(times[times.length - 1], true) + " (" + dur(times[times.length - 1] - times[0]) + ")"));
    box.append(facts);
    const st = h("div", { id: "stats" });
    const tk = STATS.tokens || {};
    const tbl = (head, rows) => h("table", null, h("thead", null, h("tr", null, ...head.map((x) => h("th", { text: x })))),
      h("tbody", null, ...rows.map((r) => h("tr", null, ...r.map((x) => h("td", { text: String(x) }))))));
    const reasons = Object.entries(STATS.endReasons || {}).map(([k, v]) => k + " " + v).join(", ");
    const td = STATS.turnDurationMs || {};
    st.append(tbl(["session", ""], [
      ["events", num(STATS.events)], ["turns", num(STATS.turns) + (reasons ? " (" + reasons + ")" : "")],
      ["turn duration", "median " + dur(td.median) + ", max " + dur(td.max)], ["steps", num(STATS.steps)],
      ["tokens", num(tk.input) + " in, " + num(tk.output) + " out"],
      ["cache / reasoning", num(tk.cacheRead) + " read, " + num(tk.cacheWrite) + " write, " + num(tk.reasoning) + " reasoning"],
      ["unanswered calls", num(STATS.unansweredCalls || 0)]]));
    const tools = Object.entries(STATS.tools || {});
    if (tools.length) st.append(tbl(["tool", "calls", "errors", "failure rate", "median", "max"],
      tools.map(([n, t]) => [n, num(t.calls), num(t.errors), t.calls ? Math.round(100 * t.failureRate) + "%" : "-",
        dur(t.latencyMs && t.latencyMs.median), dur(t.latencyMs && t.latencyMs.max)])));
    box.append(st);
    return box;
  }

  // ---- the top bar: search, type filter, keys ----------------------------------------------
  const search = h("input", { id: "search", type: "search", placeholder: "Search text (press /)", "aria-label": "search events" });
  const types = new Map();
  for (const e of EV) types.set(e.type, (types.get(e.type) || 0) + 1);
  const domains = new Map();
  for (const [t, n] of types) if (t.includes("/")) { const d = t.split("/")[0] + "/*"; domains.set(d, (domains.get(d) || 0) + n); }
  const typeFilter = h("select", { id: "type-filter", "aria-label": "event type" }, h("option", { value: "", text: "all types" }));
  for (const t of [...new Set([...types.keys(), ...domains.keys()])].sort())
    typeFilter.append(h("option", { value: t, text: t + " (" + num(types.get(t) || domains.get(t)) + ")" }));
  const countEl = h("span", { id: "match-count" });
  const top = h("div", { id: "top" }, search, typeFilter, countEl,
    h("span", { id: "keys", text: "j / k: next / previous turn · /: search · Esc: clear" }));
  let timer = null;
  function applyFilter() {
    query = search.value; typeSel = typeFilter.value;
    computeMatches(); renderAll();
  }
  search.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(applyFilter, 120); });
  typeFilter.addEventListener("change", applyFilter);

  // ---- links: reveal an event that is not rendered yet ---------------------------------------
  function reveal(s) {
    if (!bySeq.has(s)) return null;
    if (!shown(s)) { search.value = ""; typeFilter.value = ""; applyFilter(); }
    for (let round = 0; round < 12; round++) {
      const el = document.getElementById("seq-" + s);
      if (el) return el;
      let progress = false;
      for (const x of main.querySelectorAll("[data-lo]")) {
        if (+x.dataset.lo > s || +x.dataset.hi < s) continue;
        if (x.tagName === "DETAILS" && !x.open) { x.open = true; progress = true; }
        if (x.tagName === "DETAILS" && x._fill) { if (!x._done) { fillFold(x); progress = true; } }
        if (x._fill && x.tagName !== "DETAILS" && !x._filled) { fill(x); progress = true; }
      }
      if (!progress) break;
    }
    return document.getElementById("seq-" + s);
  }
  function go() {
    const m = /^#seq-(\d+)$/.exec(location.hash);
    if (!m) return;
    const el = reveal(Number(m[1]));
    if (!el) return;
    for (const old of document.querySelectorAll(".targeted")) old.classList.remove("targeted");
    el.classList.add("targeted");
    el.scrollIntoView({ block: "center" });
  }
  window.addEventListener("hashchange", go);

  // ---- keys ---------------------------------------------------------------------------------
  function turnStep(dir) {
    const secs = [...main.querySelectorAll("section.turn")];
    if (!secs.length) return;
    const y = top.offsetHeight + 2;
    let target = null;
    if (dir > 0) target = secs.find((s) => s.getBoundingClientRect().top > y + 1);
    else target = secs.slice().reverse().find((s) => s.getBoundingClientRect().top < y - 1);
    if (!target) return;
    for (const c of main.querySelectorAll("section.current")) c.classList.remove("current");
    target.classList.add("current");
    window.scrollTo(0, window.scrollY + target.getBoundingClientRect().top - y);
    target.focus({ preventScroll: true });
  }
  document.addEventListener("keydown", (k) => {
    if (k.ctrlKey || k.metaKey || k.altKey) return;
    const typing = k.target === search || k.target === typeFilter;
    if (k.key === "Escape") { if (search.value || typeFilter.value) { search.value = ""; typeFilter.value = ""; applyFilter(); } search.blur(); return; }
    if (typing) return;
    if (k.key === "j" || k.key === "n") { turnStep(1); k.preventDefault(); }
    else if (k.key === "k" || k.key === "p") { turnStep(-1); k.preventDefault(); }
    else if (k.key === "/") { search.focus(); k.preventDefault(); }
  });

  document.body.append(top, header(), main);
  renderAll();
  if (location.hash) go();
  document.body.dataset.ready = "1";
  document.body.dataset.loadMs = String(Math.round(performance.now() - t0));
  document.body.dataset.loadSteps = marks.join(", ");
  // When the first frame after it is painted, since the navigation started.
  requestAnimationFrame(() => setTimeout(() => { document.body.dataset.paintedAt = String(Math.round(performance.now())); }, 0));
})();
