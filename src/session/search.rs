//! Search: a [`Query`] of filters evaluated on the archived events in place, one pass over the
//! mapped segments, nothing allocated for an event that does not match. The semantics of each
//! filter are documented on [`Query`].
//!
//! [`SessionReader::search`] searches one session; [`Store::search`](crate::store::Store::search)
//! searches many (it calls the session search for each, in id order).

use std::collections::HashSet;
use std::ops::ControlFlow;

use crate::error::{Error, Result};
use crate::event::archived::{
    ArchivedBlock, ArchivedEvent, ArchivedEventData, ArchivedToolContent, ArchivedValue,
};

use super::reader::SessionReader;

/// Which event types a query selects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypeFilter {
    /// `*`: every type.
    Any,
    /// One type, by its exact name (`tool/call`, or an unknown type's name).
    Exact(String),
    /// A domain: every type named `DOMAIN/…`, and a type named `DOMAIN` itself (written `tool/*`
    /// or `tool`; this holds `tool`). `error`, a type without a domain, is matched this way too.
    Domain(String),
}

impl TypeFilter {
    /// `*` is [`Any`](Self::Any); `D/*` and a name without `/` (`tool`, `error`) are
    /// [`Domain`](Self::Domain)`(D)`; anything else (`tool/call`) is [`Exact`](Self::Exact).
    pub fn parse(text: &str) -> TypeFilter {
        if text == "*" {
            TypeFilter::Any
        } else if let Some(domain) = text.strip_suffix("/*") {
            TypeFilter::Domain(domain.to_string())
        } else if !text.contains('/') {
            TypeFilter::Domain(text.to_string())
        } else {
            TypeFilter::Exact(text.to_string())
        }
    }

    /// True when an event of type `type_name` is selected.
    pub fn matches(&self, type_name: &str) -> bool {
        match self {
            TypeFilter::Any => true,
            TypeFilter::Exact(t) => type_name == t,
            TypeFilter::Domain(d) => type_name
                .strip_prefix(d.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/')),
        }
    }
}

/// A case-insensitive substring matcher that allocates nothing per haystack.
///
/// The needle is lowercased once. An ASCII needle is searched byte by byte: candidates for its
/// first byte are found with `memchr` (either case), then the rest is compared with
/// [`u8::eq_ignore_ascii_case`]. A needle with non-ASCII characters is compared character by
/// character against the haystack lowercased on the fly with [`char::to_lowercase`].
///
/// This is `haystack.to_lowercase().contains(&needle.to_lowercase())` except where lowercasing
/// depends on context or crosses between ASCII and non-ASCII:
///
/// - Greek capital sigma lowercases to `σ` everywhere here; [`str::to_lowercase`] writes a
///   final `ς` at the end of a word.
/// - With an ASCII needle, a non-ASCII haystack character whose lowercase is ASCII (KELVIN SIGN
///   `K` → `k`, `İ` → `i` + U+0307) does not match an ASCII letter (a non-ASCII needle does go
///   through [`char::to_lowercase`] and matches it).
///
/// Canonically equivalent text matches: a non-ASCII needle is searched in its composed (NFC)
/// and its decomposed (NFD) form, so `café` finds `cafe\u{301}` and the other way round, in a
/// text written in either form (a text that mixes both forms inside the needle's span does not
/// match).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextMatcher {
    needle: String,
    lowered: Lowered,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Lowered {
    /// The needle is ASCII: its lowercase bytes.
    Ascii(Box<[u8]>),
    /// The needle's characters, each lowercased (expanded when a lowercase is longer), in its
    /// composed form, and in its decomposed form when that differs.
    Chars(Box<[char]>, Option<Box<[char]>>),
}

impl TextMatcher {
    /// A matcher of `needle`.
    pub fn new(needle: &str) -> TextMatcher {
        let lowered = if needle.is_ascii() {
            Lowered::Ascii(needle.to_ascii_lowercase().into_bytes().into_boxed_slice())
        } else {
            use unicode_normalization::UnicodeNormalization;
            let lower = |s: &mut dyn Iterator<Item = char>| -> Box<[char]> {
                s.flat_map(char::to_lowercase).collect()
            };
            let composed = lower(&mut needle.nfc());
            let decomposed = lower(&mut needle.nfd());
            let other = (decomposed != composed).then_some(decomposed);
            Lowered::Chars(composed, other)
        };
        TextMatcher {
            needle: needle.to_string(),
            lowered,
        }
    }

    /// The needle as given.
    pub fn needle(&self) -> &str {
        &self.needle
    }

    /// True when `haystack` contains the needle, ignoring case (see the type's documentation).
    pub fn is_match(&self, haystack: &str) -> bool {
        match &self.lowered {
            Lowered::Ascii(n) => find_ascii(haystack.as_bytes(), n),
            Lowered::Chars(n, other) => {
                find_chars(haystack, n) || other.as_ref().is_some_and(|d| find_chars(haystack, d))
            }
        }
    }
}

/// `needle` (ASCII, lowercase) in `hay`, ASCII case ignored.
fn find_ascii(hay: &[u8], needle: &[u8]) -> bool {
    let Some((&first, rest)) = needle.split_first() else {
        return true;
    };
    let Some(last_start) = hay.len().checked_sub(needle.len()) else {
        return false;
    };
    let upper = first.to_ascii_uppercase();
    let mut at = 0;
    while at <= last_start {
        let window = &hay[at..=last_start];
        let found = if upper == first {
            memchr::memchr(first, window)
        } else {
            memchr::memchr2(first, upper, window)
        };
        let Some(i) = found else {
            return false;
        };
        let start = at + i;
        if hay[start + 1..start + needle.len()].eq_ignore_ascii_case(rest) {
            return true;
        }
        at = start + 1;
    }
    false
}

/// `needle` (lowercased characters) in `hay` lowercased character by character.
fn find_chars(hay: &str, needle: &[char]) -> bool {
    let Some(&first) = needle.first() else {
        return true;
    };
    for (i, c) in hay.char_indices() {
        let lower = c.to_lowercase();
        // A match may start inside a character whose lowercase is several characters.
        for skip in 0..lower.len() {
            if lower.clone().nth(skip) != Some(first) {
                continue;
            }
            let mut stream = hay[i..].chars().flat_map(char::to_lowercase).skip(skip);
            if needle.iter().all(|&n| stream.next() == Some(n)) {
                return true;
            }
        }
    }
    false
}

/// What to look for: filters that combine with AND (the types with OR among themselves), and
/// how many matches at most. Built with the setters:
///
/// ```
/// use agentlog::store::Query;
///
/// let q = Query::new().event_type("tool/*").tool("bash").text("permission denied").limit(20);
/// assert_eq!(q.tool_name(), Some("bash"));
/// ```
///
/// # Semantics
///
/// Filters combine with AND; the `types` of a query combine with OR among themselves. Where
/// docs/events.md is silent this is the choice:
///
/// - **type** ([`TypeFilter`]): `tool/call` is that type exactly; `tool/*` is every type whose
///   name starts with `tool/` (a domain); `*` alone is every type. Unknown types are matched by
///   their name like the known ones.
/// - **tool** (`--tool NAME`): a `tool/call` whose `name` is NAME, a `tool/result` whose
///   `message.toolName` is NAME, an `approval/request` whose `tool` is NAME, and an
///   `approval/decision` whose `(turn, callId)` is that of a `tool/call` or `approval/request`
///   of NAME earlier in the session. No other type ever matches a tool filter. (Approvals only
///   appear inside the open step, docs/events.md §6, so the call ids remembered are dropped at each
///   `turn/start`: the set stays as small as a turn's calls of that tool, and the ids are
///   borrowed from the mapped log, not copied. Its growth, by doubling, is the only allocation
///   a search makes.)
/// - **turn** (`--turn N`): the events from turn N's `turn/start` through its `turn/end`, both
///   included. An event that carries a turn (`turn/*`, `step/*`, `assistant/*`, `tool/*`,
///   `approval/*`, and `sandbox/event` or `error` when they have a `turn`) belongs to that turn;
///   any other (user and system messages, compactions, unknown types, a `sandbox/event` or
///   `error` without `turn`) belongs to the turn open when it was appended, if any.
/// - **time** (`since`, `until`): on the event's `time`, epoch milliseconds; `since` is
///   inclusive, `until` exclusive, so `[since, until)`.
/// - **text** ([`TextMatcher`]): a case-insensitive substring of the text an event carries:
///   - the `text` and `reasoning` blocks of `user/message`, `assistant/message` and
///     `system/message`;
///   - the string values (at any depth, not member names, numbers or booleans) of the `input`
///     of their `tool_use` blocks: the raw strings are searched, never a rendering of the JSON;
///   - the `content` of their `tool_result` blocks (as for a `tool/result`, below);
///   - the `arguments` of a `tool/call` (the raw JSON text the model produced, as stored);
///   - the output of a `tool/result`: its `content` string, or the blocks above when it is a
///     list of blocks.
///
///   Not searched: blocks of unknown types (never interpreted), `assistant/chunk` deltas (the
///   assembled `assistant/message` holds the same text, and a delta may split the needle), and
///   the other event types. A needle that is empty matches every event (it is no filter).
/// - **limit**: at most that many matches, then the scan stops.
///
/// Matches come in seq order (and, across a store, in session id order).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    sessions: Option<Vec<String>>,
    types: Vec<TypeFilter>,
    tool: Option<String>,
    turn: Option<u64>,
    since: Option<i64>,
    until: Option<i64>,
    text: Option<TextMatcher>,
    limit: Option<usize>,
}

impl Query {
    /// A query that matches every event.
    pub fn new() -> Query {
        Query::default()
    }

    /// Adds a session to search (a store search covers only the sessions added; without any it
    /// covers every session that is not deleted). Ignored by [`SessionReader::search`].
    #[must_use]
    pub fn session(mut self, id: impl Into<String>) -> Self {
        self.sessions.get_or_insert_with(Vec::new).push(id.into());
        self
    }

    /// Adds a type filter parsed by [`TypeFilter::parse`] (`tool/call`, `tool/*`, `*`).
    #[must_use]
    pub fn event_type(self, filter: &str) -> Self {
        self.type_filter(TypeFilter::parse(filter))
    }

    /// Adds a type filter.
    #[must_use]
    pub fn type_filter(mut self, filter: TypeFilter) -> Self {
        self.types.push(filter);
        self
    }

    /// Only the calls, results and approvals of tool `name` (an `approval/decision` by the
    /// call or request of its step that names the tool).
    #[must_use]
    pub fn tool(mut self, name: impl Into<String>) -> Self {
        self.tool = Some(name.into());
        self
    }

    /// Only the events of turn `n`.
    #[must_use]
    pub fn turn(mut self, n: u64) -> Self {
        self.turn = Some(n);
        self
    }

    /// Only events with `time >= ms` (epoch milliseconds).
    #[must_use]
    pub fn since(mut self, ms: i64) -> Self {
        self.since = Some(ms);
        self
    }

    /// Only events with `time < ms` (epoch milliseconds).
    #[must_use]
    pub fn until(mut self, ms: i64) -> Self {
        self.until = Some(ms);
        self
    }

    /// Only events whose text contains `needle`, ignoring case (an empty needle is no filter).
    #[must_use]
    pub fn text(mut self, needle: &str) -> Self {
        self.text = (!needle.is_empty()).then(|| TextMatcher::new(needle));
        self
    }

    /// At most `n` matches.
    #[must_use]
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = Some(n);
        self
    }

    /// The sessions added, if any.
    pub fn sessions(&self) -> Option<&[String]> {
        self.sessions.as_deref()
    }

    /// The type filters (empty: every type).
    pub fn types(&self) -> &[TypeFilter] {
        &self.types
    }

    /// The tool filter.
    pub fn tool_name(&self) -> Option<&str> {
        self.tool.as_deref()
    }

    /// The turn filter.
    pub fn turn_number(&self) -> Option<u64> {
        self.turn
    }

    /// The inclusive lower time bound.
    pub fn since_ms(&self) -> Option<i64> {
        self.since
    }

    /// The exclusive upper time bound.
    pub fn until_ms(&self) -> Option<i64> {
        self.until
    }

    /// The text filter.
    pub fn text_matcher(&self) -> Option<&TextMatcher> {
        self.text.as_ref()
    }

    /// The most matches wanted.
    pub fn max_matches(&self) -> Option<usize> {
        self.limit
    }
}

/// What a search went through.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SearchStats {
    /// Sessions searched (opened and scanned, all or until the limit was reached).
    pub sessions: u64,
    /// Events looked at.
    pub events_scanned: u64,
    /// Bytes of the event archives looked at (each record's payload).
    pub bytes_scanned: u64,
    /// Events that matched and were passed to the callback.
    pub matches: u64,
}

/// The state of one session's scan: the open turn and the call ids of the tool searched for.
struct Scan<'q, 'r> {
    query: &'q Query,
    open_turn: Option<u64>,
    /// `(turn, step, callId)` of the calls and approval requests of the query's tool, this turn
    /// (call ids may repeat across the steps of a turn).
    calls: HashSet<(u64, u64, &'r str)>,
}

impl<'q, 'r> Scan<'q, 'r> {
    fn new(query: &'q Query) -> Self {
        Scan {
            query,
            open_turn: None,
            calls: HashSet::new(),
        }
    }

    /// Whether `e` matches, after updating the scan state with it (which every event does,
    /// matching or not).
    fn matches(&mut self, e: &'r ArchivedEvent) -> bool {
        let q = self.query;
        let turn_ok = match q.turn {
            Some(n) => self.track_turn(e) == Some(n),
            None => true,
        };
        let tool_ok = match &q.tool {
            Some(tool) => self.tool_matches(tool, e),
            None => true,
        };
        if !turn_ok || !tool_ok {
            return false;
        }
        if !q.types.is_empty() {
            let name = e.type_name();
            if !q.types.iter().any(|t| t.matches(name)) {
                return false;
            }
        }
        let time = e.time();
        if q.since.is_some_and(|s| time < s) || q.until.is_some_and(|u| time >= u) {
            return false;
        }
        match &q.text {
            Some(m) => text_matches(m, e),
            None => true,
        }
    }

    /// The turn `e` belongs to; moves the open turn past `turn/start` and `turn/end`.
    fn track_turn(&mut self, e: &ArchivedEvent) -> Option<u64> {
        use ArchivedEventData as D;
        let open = self.open_turn;
        match &e.data {
            D::TurnStart(d) => {
                self.open_turn = Some(d.turn.to_native());
                self.open_turn
            }
            D::TurnEnd(d) => {
                self.open_turn = None;
                Some(d.turn.to_native())
            }
            D::StepStart(d) => Some(d.turn.to_native()),
            D::StepEnd(d) => Some(d.turn.to_native()),
            D::AssistantChunk(d) => Some(d.turn.to_native()),
            D::AssistantMessage(d) => Some(d.turn.to_native()),
            D::ToolCall(d) => Some(d.turn.to_native()),
            D::ToolResult(d) => Some(d.turn.to_native()),
            D::ApprovalRequest(d) => Some(d.turn.to_native()),
            D::ApprovalDecision(d) => Some(d.turn.to_native()),
            D::SandboxEvent(d) => d.turn.present().map(|t| t.to_native()).or(open),
            D::Error(d) => d.turn.present().map(|t| t.to_native()).or(open),
            D::UserMessage(_)
            | D::SystemMessage(_)
            | D::CompactStart(_)
            | D::CompactSummary(_)
            | D::CompactEnd(_)
            | D::Unknown(_) => open,
        }
    }

    /// Whether `e` is a call, result or approval of `tool`; remembers the call ids of its calls
    /// and approval requests.
    fn tool_matches(&mut self, tool: &str, e: &'r ArchivedEvent) -> bool {
        use ArchivedEventData as D;
        match &e.data {
            D::TurnStart(_) => {
                self.calls.clear();
                false
            }
            D::ToolCall(d) if d.name == tool => {
                let key = (d.turn.to_native(), d.step.to_native(), d.call_id.as_str());
                self.calls.insert(key);
                true
            }
            D::ApprovalRequest(d) if d.tool == tool => {
                let key = (d.turn.to_native(), d.step.to_native(), d.call_id.as_str());
                self.calls.insert(key);
                true
            }
            D::ToolResult(d) => d.message.tool_name == tool,
            D::ApprovalDecision(d) => {
                self.calls
                    .contains(&(d.turn.to_native(), d.step.to_native(), d.call_id.as_str()))
            }
            _ => false,
        }
    }
}

/// Whether the text `e` carries contains the matcher's needle (see [`Query`], **text**).
fn text_matches(m: &TextMatcher, e: &ArchivedEvent) -> bool {
    use ArchivedEventData as D;
    match &e.data {
        D::UserMessage(d) => blocks_match(m, &d.content),
        D::SystemMessage(d) => blocks_match(m, &d.content),
        D::AssistantMessage(d) => blocks_match(m, &d.message.content),
        D::ToolCall(d) => m.is_match(&d.arguments),
        D::ToolResult(d) => tool_content_matches(m, &d.message.content),
        _ => false,
    }
}

fn blocks_match(m: &TextMatcher, blocks: &[ArchivedBlock]) -> bool {
    blocks.iter().any(|b| match b {
        ArchivedBlock::Text { text, .. } | ArchivedBlock::Reasoning { text, .. } => {
            m.is_match(text)
        }
        ArchivedBlock::ToolUse { input, .. } => strings_match(m, input),
        ArchivedBlock::ToolResult { content, .. } => tool_content_matches(m, content),
        ArchivedBlock::Other(_) => false,
    })
}

fn tool_content_matches(m: &TextMatcher, content: &ArchivedToolContent) -> bool {
    match content {
        ArchivedToolContent::Text(s) => m.is_match(s),
        ArchivedToolContent::Blocks(blocks) => blocks_match(m, blocks),
    }
}

/// The string values of `v`, at any depth.
fn strings_match(m: &TextMatcher, v: &ArchivedValue) -> bool {
    match v {
        ArchivedValue::String(s) => m.is_match(s),
        ArchivedValue::Array(items) => items.iter().any(|i| strings_match(m, i)),
        ArchivedValue::Object(map) => map.members().iter().any(|x| strings_match(m, &x.value)),
        ArchivedValue::Null | ArchivedValue::Bool(_) | ArchivedValue::Number(_) => false,
    }
}

impl SessionReader {
    /// Searches this session: calls `on_match` with every event that matches `query`, in seq
    /// order, until the query's limit is reached or `on_match` breaks. Each event is visited
    /// once, in place in the mapped log; an event that does not match costs no allocation.
    /// The query's sessions are ignored. Fails at the first damaged record (after the matches
    /// before it).
    ///
    /// ```
    /// use std::ops::ControlFlow;
    /// use agentlog::event::parse_draft_line;
    /// use agentlog::store::{NewSession, Query, Store};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::open(dir.path())?;
    /// let session = store.create(NewSession::default())?;
    /// for line in [
    ///     r#"{"type":"turn/start","data":{"turn":1}}"#,
    ///     r#"{"type":"user/message","data":{"role":"user","content":[{"type":"text","text":"Fix the Parser"}]}}"#,
    ///     r#"{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}"#,
    /// ] {
    ///     session.append_draft(parse_draft_line(line)?)?;
    /// }
    /// let mut seqs = Vec::new();
    /// let stats = session.reader().search(&Query::new().text("PARSER"), |e| {
    ///     seqs.push(e.seq());
    ///     ControlFlow::Continue(())
    /// })?;
    /// assert_eq!(seqs, [1]);
    /// assert_eq!((stats.events_scanned, stats.matches), (3, 1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn search<F>(&self, query: &Query, mut on_match: F) -> Result<SearchStats>
    where
        F: FnMut(&ArchivedEvent) -> ControlFlow<()>,
    {
        let mut stats = SearchStats::default();
        let mut remaining = query.limit;
        // Whether the scan stopped early makes no difference to the caller: the stats say it.
        let _stopped = self.search_into(query, &mut remaining, &mut stats, &mut on_match)?;
        Ok(stats)
    }

    /// The scan behind [`search`](Self::search): counts into `stats`, counts `remaining` down
    /// (`None`: no limit). Returns `Break` when the limit was reached or `on_match` broke.
    pub(crate) fn search_into<'r, F>(
        &'r self,
        query: &Query,
        remaining: &mut Option<usize>,
        stats: &mut SearchStats,
        on_match: &mut F,
    ) -> Result<ControlFlow<()>>
    where
        F: FnMut(&'r ArchivedEvent) -> ControlFlow<()>,
    {
        if *remaining == Some(0) {
            return Ok(ControlFlow::Break(()));
        }
        stats.sessions += 1;
        let mut scan = Scan::new(query);
        for rec in self.log().range(..) {
            let rec = rec?;
            let event =
                crate::event::access_event(rec.payload).map_err(|source| Error::Archive {
                    seq: Some(rec.seq),
                    source,
                })?;
            stats.events_scanned += 1;
            stats.bytes_scanned += rec.payload.len() as u64;
            if !scan.matches(event) {
                continue;
            }
            stats.matches += 1;
            let flow = on_match(event);
            if let Some(n) = remaining.as_mut() {
                *n -= 1;
                if *n == 0 {
                    return Ok(ControlFlow::Break(()));
                }
            }
            if flow.is_break() {
                return Ok(flow);
            }
        }
        Ok(ControlFlow::Continue(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_filters() {
        assert_eq!(TypeFilter::parse("*"), TypeFilter::Any);
        assert_eq!(
            TypeFilter::parse("tool/*"),
            TypeFilter::Domain("tool".into())
        );
        // `tool/*` and `tool` are the same domain: its types, and a type named `tool` itself.
        assert_eq!(TypeFilter::parse("tool"), TypeFilter::parse("tool/*"));
        let domain = TypeFilter::parse("tool/*");
        assert!(domain.matches("tool/call"));
        assert!(domain.matches("tool"));
        assert!(!domain.matches("toolbox/x"));
        assert!(!domain.matches("turn/start"));
        // `error` has no domain: the name matches the type.
        let error = TypeFilter::parse("error");
        assert!(error.matches("error"));
        assert!(!error.matches("errors"));
        let exact = TypeFilter::parse("tool/call");
        assert_eq!(exact, TypeFilter::Exact("tool/call".into()));
        assert!(exact.matches("tool/call"));
        assert!(!exact.matches("tool/call/x"));
        assert!(!exact.matches("tool/result"));
        assert!(TypeFilter::Any.matches("anything/at-all"));
    }

    #[test]
    fn ascii_matching() {
        let m = TextMatcher::new("PaRsEr");
        assert!(m.is_match("the parser failed"));
        assert!(m.is_match("PARSER"));
        assert!(!m.is_match("parse"));
        assert!(!m.is_match(""));
        assert!(m.is_match("xx parsparser"));
        assert!(TextMatcher::new("").is_match(""));
        assert!(TextMatcher::new("a-1").is_match("B A-1"));
        // Non-ASCII haystack bytes never match ASCII needle bytes.
        assert!(TextMatcher::new("LLO").is_match("héllo"));
        assert!(!TextMatcher::new("e").is_match("héllo"));
        assert!(!TextMatcher::new("hello").is_match("héllo"));
    }

    #[test]
    fn non_ascii_matching() {
        assert!(TextMatcher::new("ÉCOLE").is_match("une école"));
        assert!(TextMatcher::new("école").is_match("UNE ÉCOLE"));
        assert!(TextMatcher::new("ünï").is_match("ÜNÏCODE"));
        assert!(!TextMatcher::new("ünï").is_match("unicode"));
        assert!(TextMatcher::new("日本").is_match("in 日本語"));
        // İ lowercases to "i̇" (two characters); a match may start inside it.
        assert!(TextMatcher::new("\u{307}x").is_match("İX"));
        assert!(TextMatcher::new("i\u{307}").is_match("İ"));
    }

    #[test]
    fn documented_differences_from_str_to_lowercase() {
        // Final sigma: str::to_lowercase writes ς at the end of a word, char::to_lowercase σ.
        assert_eq!("ΟΔΟΣ".to_lowercase(), "οδος");
        assert!(!TextMatcher::new("ΟΔΟΣ").is_match("οδος"));
        assert!(TextMatcher::new("ΟΔΟΣ").is_match("οδοσ"));
        // KELVIN SIGN lowercases to ASCII k; an ASCII needle does not see it.
        assert!("\u{212A}".to_lowercase().contains('k'));
        assert!(!TextMatcher::new("k").is_match("\u{212A}"));
        assert!(TextMatcher::new("ké").is_match("\u{212A}É"));
    }
}
