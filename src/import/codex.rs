//! OpenAI Codex CLI rollouts (`rollout-*.jsonl`), every generation: the pre-envelope files (a
//! meta line, then bare response items and `record_type` lines) and the `{timestamp, type,
//! payload}` lines of later versions (with or without `ordinal`).
//!
//! The conversation is taken from the `response_item`s; `event_msg` lines give the turn
//! boundaries (`task_started`, `task_complete`, `turn_aborted`), errors and token usage, and their
//! mirrors of the conversation (`user_message`, `agent_message`, `agent_reasoning`, …) are kept
//! as `import/line` events, never counted twice. `docs/import.md` has the mapping.

use crate::error::Result;
use crate::event::Value;

use super::{get, get_str, js, parse_time, text_block, Builder, SrcLine};

/// Text markers of user-role messages Codex injects (context, not typed prompts). The one
/// starting with `#` is the heading Codex puts before the instructions file of the user's
/// project (a marker matched in their transcripts, not a file of this repository).
const INJECTED: &[&str] = &[
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions",
    "<INSTRUCTIONS>",
    "# Context from my IDE setup",
    "<permissions instructions>",
    "<skills_instructions>",
    "<user_shell_command>",
    "<turn_aborted>",
    "<collaboration_mode>",
    "<recommended_plugins>",
    "<subagent_notification>",
    // A Stop hook's reason to go on, fed back to the model in the turn (0.15x).
    "<hook_prompt",
    // The user's answers to the questions the agent asked, in the turn (0.15x).
    "<send_user_message_question_reply>",
];

/// Cumulative token totals of a `token_count`.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
struct Totals {
    /// Every input token: the cached and cache-written ones included.
    input: u64,
    cached: u64,
    output: u64,
    reasoning: u64,
    /// Input tokens written to the cache (`cache_write_input_tokens`, Codex 0.153 on).
    cache_write: u64,
}

impl Totals {
    /// As saved for the next run: `[input, cached, output, reasoning, cache_write]` (a state
    /// saved before the fifth member had it zero).
    fn to_value(self) -> Value {
        Value::Array(vec![
            self.input.into(),
            self.cached.into(),
            self.output.into(),
            self.reasoning.into(),
            self.cache_write.into(),
        ])
    }

    fn from_saved(v: Option<&Value>) -> Totals {
        let n = |i: usize| {
            v.and_then(Value::as_array)
                .and_then(|a| a.get(i))
                .and_then(Value::as_u64)
                .unwrap_or(0)
        };
        Totals {
            input: n(0),
            cached: n(1),
            output: n(2),
            reasoning: n(3),
            cache_write: n(4),
        }
    }

    /// What `self` counts past `earlier` (each member, never below zero).
    fn minus(self, earlier: Totals) -> Totals {
        Totals {
            input: self.input.saturating_sub(earlier.input),
            cached: self.cached.saturating_sub(earlier.cached),
            output: self.output.saturating_sub(earlier.output),
            reasoning: self.reasoning.saturating_sub(earlier.reasoning),
            cache_write: self.cache_write.saturating_sub(earlier.cache_write),
        }
    }

    fn plus(self, more: Totals) -> Totals {
        Totals {
            input: self.input.saturating_add(more.input),
            cached: self.cached.saturating_add(more.cached),
            output: self.output.saturating_add(more.output),
            reasoning: self.reasoning.saturating_add(more.reasoning),
            cache_write: self.cache_write.saturating_add(more.cache_write),
        }
    }

    fn from(v: &Value) -> Option<Totals> {
        let n = |k: &str| get(v, k).and_then(Value::as_u64).unwrap_or(0);
        Some(Totals {
            input: get(v, "input_tokens")?.as_u64()?,
            cached: n("cached_input_tokens"),
            output: n("output_tokens"),
            reasoning: n("reasoning_output_tokens"),
            cache_write: n("cache_write_input_tokens"),
        })
    }
}

/// What a step's model output collects until it is written as one `assistant/message`.
#[derive(Default)]
struct Pending {
    blocks: Vec<String>,
    calls: Vec<(String, String, String)>,
    held: Vec<(u64, crate::event::Value)>,
    items: usize,
    /// The time of the first item (the message is written when the step's output is complete).
    time: i64,
    /// The time of the last item: the message's and its calls' (when the output was complete
    /// and the calls made; a tool's output comes later).
    last: i64,
    /// The index of the first item's line (in the lines given to [`build`]).
    from: usize,
    /// The last item is reasoning: an output never ends with it, more surely follows.
    ends_reasoning: bool,
}

struct State {
    pending: Pending,
    /// A tool output came since the last model output: the next output is a new request.
    after_output: bool,
    turn_has_prompt: bool,
    saw_task_events: bool,
    model: Option<String>,
    effort: Option<String>,
    latest: Totals,
    counted: Totals,
    /// Tokens of the totals before a reset (a resumed Codex process counts from zero again)
    /// that no message has counted yet.
    uncounted: Totals,
    /// A `token_count` with totals was seen (in this run or an earlier one): the counts give
    /// the usage, and `token_usage_record` lines are not added.
    saw_counts: bool,
    /// `latest` holds `token_usage_record` usage (a file without counts so far): the first
    /// count then takes over from what they counted.
    from_records: bool,
    /// The `response_id`s of the `token_usage_record`s added in this run (a record written
    /// twice is added once).
    records: std::collections::HashSet<String>,
    /// The texts of the `event_msg` `user_message` mirrors: a user message whose text is one of
    /// them is a typed prompt (files without mirrors fall back to the injected-text markers).
    prompts: std::collections::HashSet<String>,
    /// Mirrors were seen, in this run or an earlier one: a user message without one is then
    /// context even when this run's lines hold no mirror (a one-shot import of the file would
    /// tell it so).
    saw_mirrors: bool,
    /// The index of the line being built.
    line: usize,
    /// The index of the first user message taken for context since the last mirror or model
    /// output, in a file with mirrors: newer Codex (0.142) writes a prompt's mirror after it,
    /// so with `keep_open` the lines are held from it while the mirror may still come.
    unmirrored: Option<usize>,
    /// A hash of the base instructions the last `session_meta` gave (BLAKE3, hex): Codex
    /// Desktop writes the same `session_meta` again at each turn's start, which changes
    /// nothing the model is sent.
    instructions: Option<String>,
    /// A `thread_rolled_back` not yet applied: the next typed prompt continues from this
    /// surface mark ([`Builder::mark_before_last_turns`]), replacing the turns rolled back.
    rollback: Option<Option<u64>>,
    /// Tool outputs that came while the model output they answer was not written yet: Codex
    /// (0.116) writes a response's `token_count` after the outputs of its calls, so the
    /// response waits for it (its usage is then its own, not the next response's) and these
    /// are written right after it ([`flush`]).
    deferred: Vec<Deferred>,
}

/// A line waiting, with the tool outputs before it, for the model output they answer
/// ([`State::deferred`]): a tool output, or an `event_msg` that only mirrors what happened
/// (kept in its place among them).
struct Deferred {
    /// Its line's raw text (for its `tool/result`, or its `import/line`).
    carry: Vec<(u64, Value)>,
    time: i64,
    /// A tool output's call id, content and error flag.
    result: Option<(String, String, bool)>,
    /// `response_item/<type>` or `event_msg/<type>`.
    kind: String,
}

/// Builds the events of a rollout's lines.
pub(crate) fn build(b: &mut Builder<'_>, lines: &[SrcLine<'_>]) -> Result<()> {
    // What an earlier run of this file ended with: the cumulative token totals counted, the
    // model, whether the open turn had its prompt.
    let saved = b.resume_in.take();
    b.pinned = saved
        .as_ref()
        .and_then(|s| get(s, "pinned"))
        .and_then(Value::as_u64);
    let r = |k: &str| saved.as_ref().and_then(|s| get(s, k));
    let flag = |k: &str| r(k).and_then(Value::as_bool) == Some(true);
    let mut st = State {
        pending: Pending::default(),
        after_output: flag("afterOutput"),
        turn_has_prompt: flag("turnHasPrompt"),
        saw_task_events: flag("sawTaskEvents"),
        model: r("model").and_then(Value::as_str).map(str::to_owned),
        effort: r("effort").and_then(Value::as_str).map(str::to_owned),
        latest: Totals::from_saved(r("latest")),
        counted: Totals::from_saved(r("counted")),
        uncounted: Totals::from_saved(r("uncounted")),
        // The mirrors an earlier run ended with, whose messages may be in these lines.
        prompts: r("prompts")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default(),
        saw_mirrors: flag("sawMirrors"),
        line: 0,
        unmirrored: None,
        instructions: r("instructions").and_then(Value::as_str).map(str::to_owned),
        rollback: r("rollbackTo").map(Value::as_u64),
        deferred: Vec::new(),
        // A state saved before records were read has totals only from counts.
        saw_counts: flag("sawCounts")
            || (!flag("fromRecords") && Totals::from_saved(r("latest")) != Totals::default()),
        from_records: flag("fromRecords"),
        records: std::collections::HashSet::new(),
    };
    // The mirrors after the last user message of these lines: their messages may come in the
    // next run's (at most MAX_CARRIED).
    let mut trailing: Vec<String> = Vec::new();
    for line in lines {
        let Some(v) = &line.value else { continue };
        let Some(p) = get(v, "payload") else { continue };
        if let Some(m) = mirrored_prompt(v, p) {
            st.prompts.insert(m.trim().to_owned());
            trailing.push(m.trim().to_owned());
            st.saw_mirrors = true;
        } else if get_str(p, "type") == Some("message") && get_str(p, "role") == Some("user") {
            trailing.clear();
        }
    }
    if trailing.len() > MAX_CARRIED {
        trailing.drain(..trailing.len() - MAX_CARRIED);
    }
    for (i, line) in lines.iter().enumerate() {
        st.line = i;
        let Some(v) = &line.value else {
            b.unparsed_line(line);
            continue;
        };
        let time = get_str(v, "timestamp").and_then(parse_time);
        b.begin_line(line, time);
        let (kind, payload): (&str, &Value) = if let Some(p) = get(v, "payload") {
            (get_str(v, "type").unwrap_or("unknown"), p)
        } else if get(v, "record_type").is_some() {
            ("record_type", v)
        } else if get(v, "type").is_none() && get(v, "instructions").is_some() {
            ("session_meta", v)
        } else if get(v, "type").is_some() {
            ("response_item", v)
        } else {
            ("unknown", v)
        };
        // Tool outputs wait for their response's token count while only other outputs and
        // lines that change nothing come (those wait with them, in their order).
        if !st.deferred.is_empty() && !counts_or_output(kind, payload) {
            match mirror(kind, payload) {
                Some(t) => {
                    st.deferred.push(Deferred {
                        carry: b.take_carry(),
                        time: b.time,
                        result: None,
                        kind: format!("event_msg/{t}"),
                    });
                    continue;
                }
                None => flush(b, &mut st),
            }
        }
        match kind {
            "session_meta" => {
                let text = get_str(payload, "instructions")
                    .or_else(|| get(payload, "base_instructions").and_then(|i| get_str(i, "text")));
                let hash = text.map(|t| blake3::hash(t.as_bytes()).to_hex().to_string());
                if let Some(t) = text.filter(|t| !t.is_empty() && hash != st.instructions) {
                    st.instructions = hash;
                    b.system(&[text_block(t)], "codex/session_meta");
                    // Codex sends its base instructions with every request: a compaction
                    // keeps them when they lead the history.
                    if b.pinned.is_none() && b.surface_len() == 1 {
                        b.pinned = b.surface_mark();
                    }
                }
                b.end_line("session_meta");
            }
            "turn_context" => {
                st.model = get_str(payload, "model").map(str::to_owned);
                st.effort = get_str(payload, "effort").map(str::to_owned);
                b.end_line("turn_context");
            }
            "response_item" => item(b, &mut st, payload),
            "event_msg" => {
                let t = get_str(payload, "type").unwrap_or("unknown");
                match t {
                    // The user wrote: the model output before it is over, and the next one is
                    // a new request (in a file whose prompts are only these mirrors, two
                    // answers would run together).
                    "user_message" => {
                        st.unmirrored = None;
                        flush(b, &mut st);
                        if b.step_is_open() {
                            b.end_step();
                        }
                        st.after_output = false;
                    }
                    "task_started" => {
                        flush(b, &mut st);
                        st.saw_task_events = true;
                        b.start_turn();
                        st.turn_has_prompt = false;
                        st.after_output = false;
                    }
                    "task_complete" => {
                        flush(b, &mut st);
                        st.saw_task_events = true;
                        // Calls left without a result make it interrupted, as in a Claude
                        // Code turn (docs/import.md).
                        let kind = if b.open_calls() == 0 {
                            "completed"
                        } else {
                            "interrupted"
                        };
                        b.end_turn(kind, None);
                    }
                    "turn_aborted" => {
                        flush(b, &mut st);
                        let kind = match get_str(payload, "reason") {
                            Some("interrupted") | None => "interrupted",
                            Some(_) => "aborted",
                        };
                        b.end_turn(kind, get_str(payload, "reason"));
                    }
                    "token_count" => {
                        if let Some(t) = get(payload, "info")
                            .and_then(|i| get(i, "total_token_usage"))
                            .and_then(Totals::from)
                        {
                            st.saw_counts = true;
                            if std::mem::take(&mut st.from_records) {
                                // Records counted so far: the count's totals hold them too,
                                // so only what no message has taken yet stays uncounted.
                                st.counted = t.minus(st.latest.minus(st.counted));
                            } else if t.input < st.latest.input || t.output < st.latest.output {
                                // The totals started again from zero: what the old ones had
                                // not counted yet is kept aside, the new ones count from zero.
                                st.uncounted = st.uncounted.plus(st.latest.minus(st.counted));
                                st.counted = Totals::default();
                            }
                            st.latest = t;
                        }
                        count_arrived(b, &mut st);
                    }
                    // The user rolled the thread back (edited an earlier prompt): Codex
                    // drops the last `num_turns` user turns from the history it sends. The
                    // next typed prompt replaces them (they stay in the log).
                    "thread_rolled_back" => {
                        flush(b, &mut st);
                        let n = get(payload, "num_turns")
                            .and_then(Value::as_u64)
                            .unwrap_or(0);
                        // A user turn starts at a user message that is not injected context
                        // (Codex's own rule), whatever this importer took it for.
                        let is_turn = |m: &crate::event::UserMessage| {
                            !m.content.iter().find_map(text_of).is_some_and(injected)
                        };
                        if let Some(mark) = b.mark_before_last_turns(n, st.rollback, is_turn) {
                            st.rollback = Some(mark);
                        }
                    }
                    "error" | "stream_error" => {
                        flush(b, &mut st);
                        b.error(get_str(payload, "message").unwrap_or("error"));
                    }
                    // A paginated file's mirror of a typed prompt (0.145 on): kept as its
                    // line, like every `item_completed`; the prompt is not waiting for it.
                    "item_completed" if mirrored_prompt(v, payload).is_some() => {
                        st.unmirrored = None;
                    }
                    _ => {}
                }
                b.end_line(&format!("event_msg/{t}"));
            }
            // A message between the agents of a thread (0.144 on, multi-agent v2), which Codex
            // writes as this line only: in a subagent's rollout, the task the root gives it; in
            // the root's, a subagent's final answer.
            "inter_agent_communication" => {
                agent_message(b, &mut st, payload, &blocks_of(get(payload, "content")));
                b.end_line("inter_agent_communication");
            }
            // The usage of one model response (0.150 on). The cumulative `token_count`s give
            // the usage where a file has them; in one without (so far), the records add up.
            "token_usage_record" => {
                let usage = get(payload, "usage").and_then(Totals::from);
                let id = get_str(payload, "response_id");
                let new = id.is_none_or(|id| st.records.insert(id.to_owned()));
                if let (false, Some(u), true) = (st.saw_counts, usage, new) {
                    st.latest = st.latest.plus(u);
                    st.from_records = true;
                    count_arrived(b, &mut st);
                }
                b.end_line("token_usage_record");
            }
            "compacted" => {
                flush(b, &mut st);
                let summary = compaction_summary(payload);
                b.compact_summary(
                    &summary,
                    "{\"source\":\"codex\",\"kind\":\"compaction-summary\"}",
                );
                b.end_line("compacted");
            }
            other => b.end_line(other),
        }
    }
    if b.keep_open && st.pending.items > 0 {
        // The model output the lines end inside may go on: its next item (a call after a call:
        // written as two messages, the first call would be unanswered when the second comes),
        // its token count. After reasoning, it surely does.
        b.hold.add(st.pending.from, st.pending.ends_reasoning);
    }
    if b.keep_open {
        // A user message the lines end with (nothing but context after it) whose mirror may
        // still come: while the file is being written, it waits for the next run.
        if let Some(from) = st.unmirrored {
            b.hold.add(from, false);
        }
    }
    flush(b, &mut st);
    b.finish(!st.saw_task_events);
    let mut m = crate::event::Map::new();
    let _ = m.push("latest", st.latest.to_value());
    let _ = m.push("counted", st.counted.to_value());
    if st.uncounted != Totals::default() {
        let _ = m.push("uncounted", st.uncounted.to_value());
    }
    if let Some(model) = st.model {
        let _ = m.push("model", model.into());
    }
    if let Some(effort) = st.effort {
        let _ = m.push("effort", effort.into());
    }
    if st.saw_mirrors {
        let _ = m.push("sawMirrors", true.into());
    }
    if let Some(hash) = st.instructions {
        let _ = m.push("instructions", hash.into());
    }
    if let Some(seq) = b.pinned {
        let _ = m.push("pinned", seq.into());
    }
    if !trailing.is_empty() {
        let texts = trailing.into_iter().map(Value::from).collect();
        let _ = m.push("prompts", Value::Array(texts));
    }
    if st.saw_counts {
        let _ = m.push("sawCounts", true.into());
    }
    if st.from_records {
        let _ = m.push("fromRecords", true.into());
    }
    let _ = m.push("sawTaskEvents", st.saw_task_events.into());
    let _ = m.push("turnHasPrompt", st.turn_has_prompt.into());
    let _ = m.push("afterOutput", st.after_output.into());
    if let Some(mark) = st.rollback {
        let _ = m.push("rollbackTo", mark.map_or(Value::Null, Value::from));
    }
    b.resume_out = Some(Value::Object(m));
    Ok(())
}

/// The `user_message` mirror texts a run's resume state keeps at most for the next run (those
/// after its last user message: a prompt or two).
const MAX_CARRIED: usize = 8;

/// Content items of a message as blocks: text items as text, anything else verbatim.
fn blocks_of(content: Option<&Value>) -> Vec<String> {
    let Some(Value::Array(items)) = content else {
        return match content.and_then(Value::as_str) {
            Some(s) => vec![text_block(s)],
            None => Vec::new(),
        };
    };
    items
        .iter()
        .map(|it| match (it, get_str(it, "type")) {
            (Value::String(s), _) => text_block(s),
            (_, Some("input_text" | "output_text" | "text")) => {
                text_block(get_str(it, "text").unwrap_or(""))
            }
            _ => it.to_string(),
        })
        .collect()
}

fn texts_of(content: Option<&Value>) -> impl Iterator<Item = &str> {
    let items: &[Value] = match content {
        Some(Value::Array(items)) => items,
        _ => &[],
    };
    items.iter().filter_map(|it| get_str(it, "text"))
}

fn is_injected(content: Option<&Value>) -> bool {
    let first_text = match content {
        Some(Value::Array(items)) => items.iter().find_map(|it| get_str(it, "text")),
        Some(Value::String(s)) => Some(s.as_str()),
        _ => None,
    };
    first_text.is_some_and(injected)
}

/// A message another agent of the thread sent this one (`payload` names its `author` and
/// `recipient`): input the model reads, and the model's next output is a new request.
fn agent_message(b: &mut Builder<'_>, st: &mut State, p: &Value, blocks: &[String]) {
    flush(b, st);
    if b.step_is_open() {
        b.end_step();
    }
    st.after_output = false;
    let mut envelope = String::from("{\"source\":\"codex\",\"kind\":\"agent-message\"");
    for key in ["author", "recipient"] {
        if let Some(v) = get_str(p, key) {
            envelope.push_str(&format!(",\"{key}\":{}", js(v)));
        }
    }
    envelope.push('}');
    b.user(blocks, &envelope);
}

/// The text of a typed prompt's mirror: an `event_msg` `user_message`'s `message`, or the
/// texts of an `event_msg` `item_completed` whose item is a `UserMessage` (the mirror of the
/// paginated files, 0.145 on, which write no `user_message`).
fn mirrored_prompt(v: &Value, p: &Value) -> Option<String> {
    if get_str(v, "type") != Some("event_msg") {
        return None;
    }
    match get_str(p, "type")? {
        "user_message" => get_str(p, "message").map(str::to_owned),
        "item_completed" => {
            let item = get(p, "item").filter(|i| get_str(i, "type") == Some("UserMessage"))?;
            Some(texts_of(get(item, "content")).collect())
        }
        _ => None,
    }
}

/// Whether a user message's `content_item_kinds` (0.15x, in
/// `internal_chat_message_metadata_passthrough`) name what Codex put in it, none of it text the
/// user typed (`user.text`): its environment, instructions, a hook's prompt (`unknown`).
fn kinds_say_injected(item: &Value) -> bool {
    get(item, "internal_chat_message_metadata_passthrough")
        .and_then(|m| get(m, "content_item_kinds"))
        .and_then(Value::as_array)
        .is_some_and(|kinds| {
            !kinds.is_empty() && kinds.iter().all(|k| k.as_str() != Some("user.text"))
        })
}

/// Whether a user message's first text is context Codex injects (not typed by the user).
fn injected(text: &str) -> bool {
    let t = text.trim_start();
    INJECTED.iter().any(|m| t.starts_with(m))
}

/// The text of a text block.
fn text_of(block: &crate::event::Block) -> Option<&str> {
    match block {
        crate::event::Block::Text { text, .. } => Some(text),
        _ => None,
    }
}

fn item(b: &mut Builder<'_>, st: &mut State, p: &Value) {
    let t = get_str(p, "type").unwrap_or("unknown");
    match t {
        "message" => {
            let role = get_str(p, "role").unwrap_or("user");
            let content = get(p, "content");
            match role {
                "assistant" => {
                    model_output(b, st);
                    st.pending.ends_reasoning = false;
                    st.pending.blocks.extend(blocks_of(content));
                    st.pending.held.extend(b.take_carry());
                }
                "user" => {
                    flush(b, st);
                    let blocks = blocks_of(content);
                    let typed = if st.prompts.is_empty() && !st.saw_mirrors {
                        !is_injected(content) && !kinds_say_injected(p)
                    } else {
                        // A prompt sent as several text items (0.142) is mirrored as their
                        // concatenation.
                        texts_of(content).any(|t| st.prompts.contains(t.trim()))
                            || st
                                .prompts
                                .contains(texts_of(content).collect::<String>().trim())
                    };
                    let envelope = if typed {
                        if b.turn().is_some() && st.turn_has_prompt {
                            b.end_turn(b.next_prompt_ends_as(), None);
                        }
                        b.ensure_turn();
                        st.turn_has_prompt = true;
                        st.after_output = false;
                        "{\"source\":\"codex\",\"kind\":\"prompt\"}"
                    } else {
                        if st.saw_mirrors {
                            st.unmirrored.get_or_insert(st.line);
                        }
                        "{\"source\":\"codex\",\"kind\":\"context\"}"
                    };
                    // A rollback is applied by the next message that starts a user turn by
                    // Codex's rule (not injected context), typed or not as this run can tell
                    // (its mirror may come in the next run).
                    match st.rollback.filter(|_| !is_injected(content)) {
                        Some(mark) => {
                            st.rollback = None;
                            b.user_after(&blocks, envelope, mark);
                        }
                        None => b.user(&blocks, envelope),
                    }
                }
                _ => {
                    flush(b, st);
                    b.system(&blocks_of(content), &format!("codex/{role}"));
                }
            }
            b.end_line("response_item/message");
        }
        // A message another agent of the thread sent this one (0.144 multi-agent: a
        // subagent's final answer to the root): input the model reads, and the model's next
        // output is a new request.
        "agent_message" => {
            agent_message(b, st, p, &blocks_of(get(p, "content")));
            b.end_line("response_item/agent_message");
        }
        "reasoning" => {
            model_output(b, st);
            st.pending.ends_reasoning = true;
            let mut text = String::new();
            if let Some(Value::Array(items)) = get(p, "summary") {
                for s in items.iter().filter_map(|s| get_str(s, "text")) {
                    if !text.is_empty() {
                        text.push_str("\n\n");
                    }
                    text.push_str(s);
                }
            }
            if !text.is_empty() {
                st.pending
                    .blocks
                    .push(format!("{{\"type\":\"reasoning\",\"text\":{}}}", js(&text)));
            }
            st.pending.held.extend(b.take_carry());
        }
        "function_call" | "custom_tool_call" | "local_shell_call" | "tool_search_call" => {
            model_output(b, st);
            st.pending.ends_reasoning = false;
            let id = get_str(p, "call_id")
                .or_else(|| get_str(p, "id"))
                .unwrap_or("")
                .to_owned();
            let (name, args) = match t {
                // A tool search (0.140 on): the model asks the client for tools to load;
                // `arguments` is an object.
                "function_call" | "tool_search_call" => (
                    get_str(p, "name")
                        .unwrap_or(if t == "function_call" {
                            "function"
                        } else {
                            "tool_search"
                        })
                        .to_owned(),
                    match get(p, "arguments") {
                        Some(Value::String(s)) => s.clone(),
                        Some(v) => v.to_string(),
                        None => String::new(),
                    },
                ),
                "custom_tool_call" => (
                    get_str(p, "name").unwrap_or("custom").to_owned(),
                    get_str(p, "input").unwrap_or("").to_owned(),
                ),
                _ => (
                    "local_shell".to_owned(),
                    get(p, "action").map(Value::to_string).unwrap_or_default(),
                ),
            };
            // The tool use's input: the arguments as JSON when they parse, else the text.
            let input = match crate::event::parse_json(&args) {
                Ok(v) if t != "custom_tool_call" => v.to_string(),
                _ => js(&args),
            };
            st.pending.blocks.push(format!(
                "{{\"type\":\"tool_use\",\"id\":{},\"name\":{},\"input\":{input}}}",
                js(&id),
                js(&name)
            ));
            st.pending.calls.push((id, name, args));
            st.pending.held.extend(b.take_carry());
        }
        t if is_output(t) => {
            let id = get_str(p, "call_id").unwrap_or("");
            let (content, is_error) = match t {
                // The tools found, as the JSON they are.
                "tool_search_output" => (
                    js(&get(p, "tools").map(Value::to_string).unwrap_or_default()),
                    get_str(p, "status") == Some("failed"),
                ),
                _ => output_content(get(p, "output"), p),
            };
            st.after_output = true;
            if st.pending.items > 0 || !st.deferred.is_empty() {
                // The response it answers is not written yet: after its token count.
                st.deferred.push(Deferred {
                    carry: b.take_carry(),
                    time: b.time,
                    result: Some((id.to_owned(), content, is_error)),
                    kind: format!("response_item/{t}"),
                });
                return;
            }
            if !b.result(id, &content, is_error, None) {
                b.end_line("orphan_tool_output");
            }
            b.end_line(&format!("response_item/{t}"));
        }
        other => b.end_line(&format!("response_item/{other}")),
    }
}

/// A tool output's content (a string, or blocks for a content-item array) and whether it is an
/// error: `success: false`, a JSON `{output, metadata:{exit_code}}` with a non-zero code, or a
/// text whose header (the lines before `Output:`) says the process exited with a non-zero code
/// (`Process exited with code N`, the exec tools of 0.12x; `Exit code: N`), or a command the
/// sandbox refused (`failed in sandbox …`, 0.4x).
fn output_content(output: Option<&Value>, p: &Value) -> (String, bool) {
    let mut is_error = get(p, "success").and_then(Value::as_bool) == Some(false);
    let content = match output {
        Some(Value::String(s)) => {
            if let Ok(v) = crate::event::parse_json(s) {
                if let Some(code) = get(&v, "metadata")
                    .and_then(|m| get(m, "exit_code"))
                    .and_then(Value::as_i64)
                {
                    is_error |= code != 0;
                }
            } else if exit_code_in_header(s).is_some_and(|code| code != 0)
                || s.starts_with("failed in sandbox")
            {
                is_error = true;
            }
            js(s)
        }
        Some(Value::Array(items)) => format!(
            "[{}]",
            blocks_of(Some(&Value::Array(items.clone()))).join(",")
        ),
        Some(Value::Object(_)) => {
            // {content, success} (the payload's object form)
            let inner = output.and_then(|o| get(o, "content"));
            if output
                .and_then(|o| get(o, "success"))
                .and_then(Value::as_bool)
                == Some(false)
            {
                is_error = true;
            }
            match inner {
                Some(Value::String(s)) => js(s),
                Some(v @ Value::Array(_)) => format!("[{}]", blocks_of(Some(v)).join(",")),
                _ => js(&output.map(Value::to_string).unwrap_or_default()),
            }
        }
        Some(v) => js(&v.to_string()),
        None => "\"\"".to_owned(),
    };
    (content, is_error)
}

/// The exit code a text tool output's header gives: its lines before the `Output:` line (at
/// most 8), one of them `Process exited with code N` or `Exit code: N`.
fn exit_code_in_header(text: &str) -> Option<i64> {
    for line in text.lines().take(8) {
        if line == "Output:" {
            break;
        }
        let code = line
            .strip_prefix("Process exited with code ")
            .or_else(|| line.strip_prefix("Exit code: "));
        if let Some(code) = code.and_then(|c| c.trim().parse().ok()) {
            return Some(code);
        }
    }
    None
}

/// A model output item arrives: after a tool output it starts a new request (step).
fn model_output(b: &mut Builder<'_>, st: &mut State) {
    st.unmirrored = None;
    if st.after_output {
        flush(b, st);
        b.end_step();
        st.after_output = false;
    }
    if st.pending.items == 0 {
        st.pending.time = b.time;
        st.pending.from = st.line;
    }
    st.pending.last = b.time;
    st.pending.items += 1;
}

/// What a `compacted` line leaves the model: its `message`, or when that is empty (a compaction
/// done by the API, whose summary is an encrypted `compaction` item), the text of the messages
/// its `replacement_history` keeps, one paragraph each; [`ENCRYPTED_SUMMARY`] when it keeps none.
fn compaction_summary(payload: &Value) -> String {
    let message = get_str(payload, "message").unwrap_or("");
    if !message.trim().is_empty() {
        return message.to_owned();
    }
    let kept: Vec<&str> = get(payload, "replacement_history")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|item| get_str(item, "type") == Some("message"))
        .filter_map(|item| get(item, "content").and_then(Value::as_array))
        .flatten()
        .filter(|c| matches!(get_str(c, "type"), Some("input_text" | "output_text")))
        .filter_map(|c| get_str(c, "text"))
        .filter(|t| !t.trim().is_empty())
        .collect();
    if kept.is_empty() {
        ENCRYPTED_SUMMARY.to_owned()
    } else {
        kept.join("\n\n")
    }
}

/// The summary of a Codex compaction whose file holds no readable text of it.
const ENCRYPTED_SUMMARY: &str =
    "(the conversation was compacted; its summary is encrypted and not in the rollout)";

/// Writes the model output collected as one `assistant/message` (and its `tool/call`s) in a
/// step, with the tokens counted since the last one.
fn flush(b: &mut Builder<'_>, st: &mut State) {
    if st.pending.items == 0 {
        write_deferred(b, st);
        return;
    }
    let p = std::mem::take(&mut st.pending);
    // The current line's raw text goes onto the events it makes, the held ones onto this message.
    let current = b.take_carry();
    let now = b.time;
    b.time = p.time.min(now);
    if !b.step_is_open() {
        let request = st.model.as_ref().map(|m| match &st.effort {
            Some(e) => format!("{{\"model\":{},\"effort\":{}}}", js(m), js(e)),
            None => format!("{{\"model\":{}}}", js(m)),
        });
        b.start_step(request.as_deref());
    }
    b.time = now;
    let usage = uncounted_usage(st);
    if usage.is_some() {
        st.counted = st.latest;
        st.uncounted = Totals::default();
    }
    b.give_carry(p.held);
    let model = st.model.clone();
    // At its last item's time: the line that shows the output complete (a tool output, the
    // next prompt) may come much later, and the calls' latency would be lost.
    b.time = p.last.min(now);
    b.assistant(
        &p.blocks,
        model.as_deref(),
        "openai",
        usage.as_deref(),
        &p.calls,
    );
    b.time = now;
    write_deferred(b, st);
    b.give_carry(current);
}

/// After a count (a `token_count`, or a `token_usage_record` in a file without them): the
/// response whose calls' outputs came before it is written, with its usage; a count written
/// after the turn's end (`task_complete`, `turn_aborted`) with no output since goes to the
/// turn's last response (no later message would take it, at the end of a file).
fn count_arrived(b: &mut Builder<'_>, st: &mut State) {
    if !st.deferred.is_empty() {
        flush(b, st);
    }
    if st.pending.items == 0 {
        if let Some(usage) = uncounted_usage(st) {
            if b.add_to_last_response(&usage) {
                st.counted = st.latest;
                st.uncounted = Totals::default();
            }
        }
    }
}

/// The usage (JSON) of the tokens the counts so far hold past what a message counted, `None`
/// when there are none.
fn uncounted_usage(st: &State) -> Option<String> {
    if st.latest == st.counted && st.uncounted == Totals::default() {
        return None;
    }
    let t = st.latest.minus(st.counted).plus(st.uncounted);
    let input = t
        .input
        .saturating_sub(t.cached)
        .saturating_sub(t.cache_write);
    let write = if t.cache_write > 0 {
        format!(",\"cacheWriteTokens\":{}", t.cache_write)
    } else {
        String::new()
    };
    Some(format!(
        "{{\"inputTokens\":{input},\"outputTokens\":{},\"cacheReadTokens\":{}{write},\"reasoningTokens\":{}}}",
        t.output, t.cached, t.reasoning
    ))
}

/// Writes the tool outputs that waited for the response [`flush`] wrote
/// ([`State::deferred`]), each at its own line's time with its own line's raw text (the current
/// line's is put back after them).
fn write_deferred(b: &mut Builder<'_>, st: &mut State) {
    if st.deferred.is_empty() {
        return;
    }
    let current = b.take_carry();
    let now = b.time;
    for d in std::mem::take(&mut st.deferred) {
        b.give_carry(d.carry);
        b.time = d.time;
        if let Some((id, content, is_error)) = &d.result {
            if !b.result(id, content, *is_error, None) {
                b.end_line("orphan_tool_output");
            }
        }
        b.end_line(&d.kind);
    }
    b.time = now;
    b.give_carry(current);
}

/// Whether a line may come between a response's tool outputs and its token count: the count
/// itself, or another output.
fn counts_or_output(kind: &str, payload: &Value) -> bool {
    let t = get_str(payload, "type");
    match kind {
        "event_msg" => t == Some("token_count"),
        "token_usage_record" => true,
        "response_item" => t.is_some_and(is_output),
        _ => false,
    }
}

/// The type of an `event_msg` this importer keeps as an `import/line` and nothing else (a
/// mirror of an item, a tool's begin or end, reasoning text): `None` for other lines.
fn mirror<'a>(kind: &str, payload: &'a Value) -> Option<&'a str> {
    let t = get_str(payload, "type")?;
    (kind == "event_msg" && !ACTED_ON.contains(&t)).then_some(t)
}

/// The `event_msg` types whose lines do more than keep their text ([`build`]'s match).
const ACTED_ON: [&str; 8] = [
    "user_message",
    "task_started",
    "task_complete",
    "turn_aborted",
    "token_count",
    "thread_rolled_back",
    "error",
    "stream_error",
];

/// Whether a `response_item` type is a tool's output.
fn is_output(t: &str) -> bool {
    matches!(
        t,
        "function_call_output"
            | "custom_tool_call_output"
            | "local_shell_call_output"
            | "tool_search_output"
    )
}
