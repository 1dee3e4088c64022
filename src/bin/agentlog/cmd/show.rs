//! `agentlog show` and `agentlog tail`: one line per event, turns and steps indented, tool calls
//! paired with their results.

use std::collections::HashSet;
use std::io::{BufWriter, Write};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;

use agentlog::event::{decode_event, Event, EventData, EventType, JsonlWriter};
use agentlog::session::{SessionMeta, SessionReader, SessionState, TypeFilter};

use crate::lines::{self, Pairing};
use crate::output::{local_day, Color, Paint};
use crate::target::{Ctx, Target};

/// Show a session, one line per event
///
/// Each line: seq, local time, type, and a short summary. Events inside a turn are indented by two spaces, inside a step by four. A tool call shows
/// "→ CALL_ID" and its result "↳ CALL_ID TOOL"; a call that never got a result is flagged
/// "(no result)". Colors only on a terminal, and never when NO_COLOR is set to a non-empty
/// value.
#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// The session: an id in the store, or a session directory
    session: String,
    /// The first seq shown
    #[arg(long, value_name = "SEQ")]
    from: Option<u64>,
    /// The last seq shown
    #[arg(long, value_name = "SEQ")]
    to: Option<u64>,
    /// Only events of these types: a type (tool/call), a domain (tool or tool/*) or * for all;
    /// repeat or separate with commas
    #[arg(long = "type", value_name = "TYPE", value_delimiter = ',',
          value_parser = clap::builder::NonEmptyStringValueParser::new())]
    types: Vec<String>,
    /// Only the events of turn N (from its turn/start to its turn/end)
    #[arg(long, value_name = "N")]
    turn: Option<u64>,
    /// Print the selected events as canonical JSONL instead
    #[arg(long)]
    json: bool,
}

/// Print the last events of a session; with -f, follow new ones
///
/// With -f the command keeps printing the events another process appends (until interrupted, or
/// until the session is deleted: then a note on stderr, exit code 0). When `redact` or `purge`
/// rewrites the session meanwhile, a note says so and the new files are followed.
#[derive(Debug, clap::Args)]
pub struct TailArgs {
    /// The session: an id in the store, or a session directory
    session: String,
    /// Keep printing events as they are appended (until interrupted)
    #[arg(short, long)]
    follow: bool,
    /// How many of the last events to print first
    #[arg(short = 'n', long = "lines", value_name = "N", default_value_t = 10)]
    lines: u64,
    /// Print canonical JSONL instead
    #[arg(long)]
    json: bool,
}

pub fn run_show(ctx: &Ctx, args: ShowArgs) -> Result<ExitCode> {
    let target = ctx.resolve(&args.session)?;
    let reader = target.reader()?;
    let len = reader.len();
    let from = args.from.unwrap_or(0);
    let end = args.to.map_or(len, |t| t.saturating_add(1).min(len));
    let filter = Filter {
        types: args.types.iter().map(|t| TypeFilter::parse(t)).collect(),
        turn: args.turn,
    };
    let mut view = View::new(&reader, &target, args.json, false)?;
    view.date = spans_days(&reader, from, end, false);
    view.print(&reader, from, end, &filter)?;
    view.flush()?;
    if view.shown == 0 {
        if let Some(why) = why_empty(&reader, &args, len) {
            eprintln!("note: no event shown: {why}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Why `show` printed nothing, said on stderr (an empty answer must not look like an empty
/// session): the range, the turn or the types asked for. `None` when the session is empty and
/// nothing narrowed it.
fn why_empty(reader: &SessionReader, args: &ShowArgs, len: u64) -> Option<String> {
    if let (Some(from), Some(to)) = (args.from, args.to) {
        if from > to {
            return Some(format!("--from {from} is after --to {to}"));
        }
    }
    if len == 0 {
        return Some(format!("session {} has no events", args.session));
    }
    if let Some(from) = args.from.filter(|&f| f >= len) {
        return Some(format!(
            "--from {from} is past the last event (seq {})",
            len - 1
        ));
    }
    // The turns and types of the session (a damaged event ends the scan).
    let mut turns: HashSet<u64> = HashSet::new();
    let mut types: Vec<String> = Vec::new();
    for event in reader.events() {
        let Ok(event) = event else { break };
        if !types.iter().any(|t| t == event.type_name()) {
            types.push(event.type_name().to_string());
        }
        if event.event_type() == Some(EventType::TurnStart) {
            if let Ok(Event {
                data: EventData::TurnStart(d),
                ..
            }) = decode_event(event)
            {
                turns.insert(d.turn);
            }
        }
    }
    if let Some(turn) = args.turn.filter(|t| !turns.contains(t)) {
        let label = &args.session;
        return Some(match (turns.iter().min(), turns.iter().max()) {
            (Some(lo), Some(hi)) => {
                format!(
                    "--turn {turn}: session {label} has no turn {turn} (its turns: {lo} to {hi})"
                )
            }
            _ => format!("--turn {turn}: session {label} has no turns"),
        });
    }
    let filters: Vec<TypeFilter> = args.types.iter().map(|t| TypeFilter::parse(t)).collect();
    let in_session = types.iter().any(|t| filters.iter().any(|f| f.matches(t)));
    if !args.types.is_empty() && !in_session {
        types.sort();
        let known: Vec<&str> = EventType::ALL.iter().map(|t| t.as_str()).collect();
        return Some(format!(
            "session {1} has no event of type {0}; its types are {2} \
             (the types of docs/events.md: {3}; a domain like tool or tool/* matches all of its \
             types)",
            args.types.join(","),
            args.session,
            types.join(", "),
            known.join(", ")
        ));
    }
    Some(
        "the session has events of the turn and types asked for, but none matches everything \
         asked for together (--from, --to, --turn, --type)"
            .to_string(),
    )
}

pub fn run_tail(ctx: &Ctx, args: TailArgs) -> Result<ExitCode> {
    let target = ctx.resolve(&args.session)?;
    let mut reader = target.reader()?;
    let len = reader.len();
    let from = len.saturating_sub(args.lines);
    if len == 0 {
        // Nothing to print would look like a command that did nothing; the note goes to stderr
        // so a pipe gets only events.
        eprintln!(
            "note: no event shown: session {} has no events{}",
            target.label,
            if args.follow {
                " yet (waiting for them)"
            } else {
                ""
            }
        );
    }
    let filter = Filter::default();
    let mut view = View::new(&reader, &target, args.json, args.follow)?;
    view.date = spans_days(&reader, from, len, args.follow);
    view.print(&reader, from, len, &filter)?;
    view.flush()?;
    if !args.follow {
        return Ok(ExitCode::SUCCESS);
    }
    let mut done = len;
    // `redact` and `purge` rewrite a session into a new folder swapped in under its name: the
    // reader would go on watching the old files, which get no more events.
    let folder = |dir: &std::path::Path| {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(dir).ok().map(|m| (m.dev(), m.ino()))
    };
    let mut current = folder(&target.dir);
    loop {
        let waited = reader.wait(Duration::from_millis(500));
        let now_folder = folder(&target.dir);
        let now = if now_folder.is_some() && now_folder != current {
            current = now_folder;
            reader = target.reader()?;
            eprintln!(
                "note: session {} was rewritten (redact or purge): the events shown before may \
                 have changed; following the new files",
                target.label
            );
            reader.len()
        } else {
            waited.map_err(|e| target.error(e))?
        };
        if now > done {
            view.print(&reader, done, now, &filter)?;
            view.flush()?;
            done = now;
        }
        // A deleted session gets no more events: say so and stop (its files may be gone).
        let deleted = match SessionMeta::load(&target.dir) {
            Ok(meta) => meta.state == SessionState::Deleted,
            Err(_) => !target.dir.exists(),
        };
        if deleted {
            eprintln!(
                "note: session {} was deleted (it held {} event(s)); tail -f stops",
                target.label, done
            );
            return Ok(ExitCode::SUCCESS);
        }
    }
}

/// True when the events shown fall on more than one local day (or, when following, not on today).
fn spans_days(reader: &SessionReader, from: u64, end: u64, follow: bool) -> bool {
    let day = |seq: u64| reader.get(seq).ok().and_then(|e| local_day(e.time()));
    let first = if from < end { day(from) } else { None };
    let last = end.checked_sub(1).filter(|&l| l >= from).and_then(day);
    let today = follow
        .then(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .ok()
        })
        .flatten()
        .and_then(|d| local_day(d.as_millis() as i64));
    let days: HashSet<_> = [first, last, today].into_iter().flatten().collect();
    days.len() > 1
}

#[derive(Debug, Default)]
struct Filter {
    types: Vec<TypeFilter>,
    turn: Option<u64>,
}

impl Filter {
    fn accepts(&self, type_name: &str, turn: Option<u64>) -> bool {
        let type_ok = self.types.is_empty() || self.types.iter().any(|t| t.matches(type_name));
        let turn_ok = self.turn.is_none() || self.turn == turn;
        type_ok && turn_ok
    }
}

/// A tool call of the open turn.
#[derive(Debug, Clone)]
struct Call {
    seq: u64,
    id: String,
    name: String,
    step: Option<u64>,
    answered: bool,
    /// Already shown as having no result (on its own line or a step's end).
    flagged: bool,
}

/// Where an event stands, and what it pairs with.
#[derive(Debug, Default)]
pub(crate) struct Placed {
    depth: usize,
    /// The turn the event belongs to (turn/start and turn/end included).
    turn: Option<u64>,
    /// For a tool result: the call it answers (id, tool name, the call's seq).
    pub(crate) answers: Option<(String, String, Option<u64>)>,
    /// For step/end and turn/end: calls left without a result (id, tool name).
    unanswered: Vec<(String, String)>,
}

/// The open turn, step and calls, as events go by (also `view`'s call/result pairs).
#[derive(Debug, Default)]
pub(crate) struct Layout {
    turn: Option<u64>,
    step: Option<u64>,
    calls: Vec<Call>,
}

/// The types that change the layout; the others only need their depth.
pub(crate) fn shapes_layout(t: Option<EventType>) -> bool {
    matches!(
        t,
        Some(
            EventType::TurnStart
                | EventType::TurnEnd
                | EventType::StepStart
                | EventType::StepEnd
                | EventType::ToolCall
                | EventType::ToolResult
        )
    )
}

impl Layout {
    fn depth(&self) -> usize {
        match (self.turn, self.step) {
            (None, _) => 0,
            (Some(_), None) => 1,
            (Some(_), Some(_)) => 2,
        }
    }

    pub(crate) fn observe(&mut self, e: &Event) -> Placed {
        let mut placed = Placed {
            depth: self.depth(),
            turn: self.turn,
            ..Placed::default()
        };
        match &e.data {
            EventData::TurnStart(d) => {
                self.turn = Some(d.turn);
                self.step = None;
                self.calls.clear();
                placed.depth = 0;
                placed.turn = Some(d.turn);
            }
            EventData::TurnEnd(d) => {
                placed.depth = 0;
                placed.turn = Some(d.turn);
                placed.unanswered = self.take_unanswered(None);
                self.turn = None;
                self.step = None;
                self.calls.clear();
            }
            EventData::StepStart(d) => {
                self.step = Some(d.step);
                placed.depth = 1;
            }
            EventData::StepEnd(d) => {
                placed.depth = 1;
                placed.unanswered = self.take_unanswered(Some(d.step));
                self.step = None;
            }
            EventData::ToolCall(d) => self.calls.push(Call {
                seq: e.seq,
                id: d.call_id.clone(),
                name: d.name.clone(),
                step: Some(d.step),
                answered: false,
                flagged: false,
            }),
            EventData::ToolResult(d) => {
                let by_id = d.call_id.present();
                let source = e
                    .source_event_seqs
                    .as_ref()
                    .and_then(|s| s.first().copied());
                let found = match (by_id, source) {
                    // The earliest unanswered call with that id (ids may repeat in a turn:
                    // docs/events.md §5).
                    (Some(id), _) => self.calls.iter().position(|c| !c.answered && &c.id == id),
                    (None, Some(src)) => self.calls.iter().position(|c| c.seq == src),
                    (None, None) => None,
                }
                .or_else(|| {
                    self.calls.iter().position(|c| {
                        !c.answered && c.step == Some(d.step) && c.name == d.message.tool_name
                    })
                });
                placed.answers = match found {
                    Some(i) => {
                        let c = &mut self.calls[i];
                        c.answered = true;
                        Some((c.id.clone(), c.name.clone(), Some(c.seq)))
                    }
                    None => by_id.map(|id| (id.clone(), d.message.tool_name.clone(), None)),
                };
            }
            _ => {}
        }
        placed
    }

    /// The calls (of `step`, or of the whole turn) without a result and not yet flagged.
    fn take_unanswered(&mut self, step: Option<u64>) -> Vec<(String, String)> {
        self.calls
            .iter_mut()
            .filter(|c| !c.answered && !c.flagged && (step.is_none() || c.step == step))
            .map(|c| {
                c.flagged = true;
                (c.id.clone(), c.name.clone())
            })
            .collect()
    }
}

/// What is known of every call before printing: which ones are answered somewhere in the log,
/// and which belong to the step still open at its end.
struct Known {
    /// The log's length when surveyed.
    len: u64,
    answered: HashSet<u64>,
    open_step: HashSet<u64>,
}

fn survey(reader: &SessionReader, target: &Target) -> Result<Known> {
    let mut layout = Layout::default();
    let mut answered = HashSet::new();
    // Damage ends the survey; the printing reaches it and reports it after the events before it.
    for event in reader.events() {
        let Ok(event) = event else { break };
        if !shapes_layout(event.event_type()) {
            continue;
        }
        let Ok(owned) = decode(event, target) else {
            break;
        };
        if let Some((_, _, Some(call_seq))) = layout.observe(&owned).answers {
            answered.insert(call_seq);
        }
    }
    let open_step = layout
        .calls
        .iter()
        .filter(|c| layout.step.is_some() && c.step == layout.step)
        .map(|c| c.seq)
        .collect();
    Ok(Known {
        len: reader.len(),
        answered,
        open_step,
    })
}

pub(crate) fn decode(
    event: &agentlog::event::archived::ArchivedEvent,
    target: &Target,
) -> Result<Event> {
    decode_event(event).map_err(|source| {
        target.error(agentlog::Error::Archive {
            seq: Some(event.seq()),
            source,
        })
    })
}

/// The printer: the layout so far, what is known of the calls, and the output.
struct View<'t> {
    target: &'t Target,
    out: BufWriter<std::io::StdoutLock<'static>>,
    paint: Paint,
    json: bool,
    follow: bool,
    date: bool,
    layout: Layout,
    /// Events observed so far (the layout covers seqs below this).
    seen: u64,
    known: Option<Known>,
    /// Events printed so far.
    shown: u64,
}

impl<'t> View<'t> {
    fn new(reader: &SessionReader, target: &'t Target, json: bool, follow: bool) -> Result<Self> {
        Ok(View {
            target,
            out: BufWriter::with_capacity(1 << 16, std::io::stdout().lock()),
            paint: Paint::stdout(),
            json,
            follow,
            date: false,
            layout: Layout::default(),
            seen: 0,
            shown: 0,
            known: if json {
                None
            } else {
                Some(survey(reader, target)?)
            },
        })
    }

    fn flush(&mut self) -> Result<()> {
        self.out.flush()?;
        Ok(())
    }

    /// Prints the events with seqs in `from..end` that the filter accepts (observing every
    /// event before them for the layout).
    fn print(
        &mut self,
        reader: &SessionReader,
        from: u64,
        end: u64,
        filter: &Filter,
    ) -> Result<()> {
        if self.json {
            return self.print_json(reader, from, end, filter);
        }
        for event in reader.range(self.seen..end) {
            let event = event.map_err(|e| self.target.error(e))?;
            let seq = event.seq();
            let visible = seq >= from;
            if !visible && !shapes_layout(event.event_type()) {
                continue;
            }
            let owned = decode(event, self.target)?;
            let placed = self.layout.observe(&owned);
            let no_result = self.no_result(&owned);
            if let (Some(flag), Some(call)) = (no_result, self.layout.calls.last_mut()) {
                if call.seq == seq {
                    call.flagged = flag;
                }
            }
            if visible && filter.accepts(owned.type_name(), placed.turn) {
                let line = self.line(&owned, &placed, no_result == Some(true));
                writeln!(self.out, "{line}")?;
                self.shown += 1;
            }
        }
        self.seen = self.seen.max(end);
        Ok(())
    }

    /// For a tool call: whether to flag it "(no result)" on its own line.
    fn no_result(&self, e: &Event) -> Option<bool> {
        let EventData::ToolCall(_) = &e.data else {
            return None;
        };
        let known = self.known.as_ref()?;
        if e.seq >= known.len {
            // Appended while following: flagged when its step ends without a result.
            return Some(false);
        }
        let answered = known.answered.contains(&e.seq);
        let still_open = self.follow && known.open_step.contains(&e.seq);
        Some(!answered && !still_open)
    }

    fn line(&self, e: &Event, placed: &Placed, no_result: bool) -> String {
        let p = self.paint;
        let answers = match &placed.answers {
            Some((id, name, _)) => Pairing::Call(id, name),
            None => Pairing::NotFound,
        };
        let mut line = lines::event_line(p, e, self.date, placed.depth, answers);
        if no_result {
            line.push(' ');
            line.push_str(&p.paint(Color::Red, "(no result)"));
        }
        if !placed.unanswered.is_empty() {
            let calls: Vec<String> = placed
                .unanswered
                .iter()
                .map(|(id, name)| format!("{id} {name}"))
                .collect();
            line.push(' ');
            line.push_str(&p.paint(Color::Red, &format!("(no result: {})", calls.join(", "))));
        }
        line.trim_end().to_string()
    }

    fn print_json(
        &mut self,
        reader: &SessionReader,
        from: u64,
        end: u64,
        filter: &Filter,
    ) -> Result<()> {
        let start = if filter.turn.is_some() {
            self.seen
        } else {
            from
        };
        let mut w = JsonlWriter::new(&mut self.out);
        for event in reader.range(start..end) {
            let event = event.map_err(|e| self.target.error(e))?;
            let mut turn = self.layout.turn;
            if filter.turn.is_some()
                && matches!(
                    event.event_type(),
                    Some(EventType::TurnStart | EventType::TurnEnd)
                )
            {
                let owned = decode(event, self.target)?;
                turn = self.layout.observe(&owned).turn;
            }
            if event.seq() >= from && filter.accepts(event.type_name(), turn) {
                w.write_archived(event)?;
                self.shown += 1;
            }
        }
        self.seen = self.seen.max(end);
        Ok(())
    }
}
