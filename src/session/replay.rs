//! Replay: walk a session turn by turn and step by step, showing what the model was given at
//! each step and the tool calls it made with their recorded results; optionally run every call
//! again through a [`ToolExecutor`] and report whether each new result equals the recorded one.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::event::archived::ArchivedEventData;
use crate::event::{decode_event, EventType, ToolContent};
use crate::projection::Projector;

use super::reader::SessionReader;

/// What a tool returned: its content and whether it failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// The output (a string or content blocks).
    pub content: ToolContent,
    /// True when the tool failed.
    pub is_error: bool,
}

/// A recorded `tool/call`, as replay hands it to an executor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayCall {
    /// The `tool/call`'s seq.
    pub seq: u64,
    /// Its turn.
    pub turn: u64,
    /// Its step.
    pub step: u64,
    /// `callId`.
    pub call_id: String,
    /// The tool's name.
    pub name: String,
    /// The raw arguments the model produced (a JSON string, byte for byte).
    pub arguments: String,
    /// The result recorded in the log (none when the call was never answered).
    pub recorded: Option<ToolOutput>,
    /// The seq of the recorded `tool/result`.
    pub recorded_seq: Option<u64>,
}

/// Runs tool calls again (replay in run mode).
pub trait ToolExecutor {
    /// Executes `call` and returns what the tool returns now; an `Err` is a failure to run it at
    /// all (reported as a divergence).
    fn execute(&mut self, call: &ReplayCall) -> std::result::Result<ToolOutput, String>;
}

/// One tool call in a replay report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallReport {
    /// The call and its recorded result.
    pub call: ReplayCall,
    /// What the executor returned (run mode only).
    pub replayed: Option<std::result::Result<ToolOutput, String>>,
    /// True when the replayed result differs from the recorded one (or could not be produced,
    /// or there is no recorded one to compare with).
    pub diverged: bool,
}

/// One step in a replay report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepReport {
    /// The turn.
    pub turn: u64,
    /// The step.
    pub step: u64,
    /// The seq of its `step/start`.
    pub seq: u64,
    /// Messages in the history the model was given for this step (the projection when the step
    /// started).
    pub history_messages: usize,
    /// Bytes of that history as canonical JSON.
    pub history_bytes: u64,
    /// The tool calls of the step, in order.
    pub calls: Vec<CallReport>,
}

/// The result of a replay.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplayReport {
    /// Every step, in order.
    pub steps: Vec<StepReport>,
    /// Tool calls seen.
    pub calls: u64,
    /// Calls whose replayed result differs (run mode).
    pub divergences: u64,
    /// True when the calls were run again.
    pub ran: bool,
}

impl ReplayReport {
    /// The calls that diverged.
    pub fn diverged(&self) -> impl Iterator<Item = &CallReport> {
        self.steps
            .iter()
            .flat_map(|s| s.calls.iter())
            .filter(|c| c.diverged)
    }
}

fn archive_error(seq: u64) -> impl FnOnce(crate::event::ArchiveError) -> Error {
    move |source| Error::Archive {
        seq: Some(seq),
        source,
    }
}

/// Replays the session `reader` sees: dry-run when `executor` is `None`, otherwise every tool
/// call is executed again (in log order) and compared with its recorded result.
pub fn replay(
    reader: &SessionReader,
    executor: Option<&mut dyn ToolExecutor>,
) -> Result<ReplayReport> {
    let mut report = ReplayReport::default();
    let mut projector = Projector::new();
    let mut sizes: HashMap<u64, u64> = HashMap::new();
    // Where each tool/call sits in the report: (step index, call index).
    let mut call_at: HashMap<u64, (usize, usize)> = HashMap::new();
    for event in reader.events() {
        let event = event?;
        let seq = event.seq();
        match &event.data {
            ArchivedEventData::StepStart(s) => {
                let messages = projector.messages();
                let mut bytes = 0;
                for m in messages.iter() {
                    bytes += *sizes
                        .entry(m.source_seq)
                        .or_insert_with(|| m.to_canonical_string().len() as u64);
                }
                report.steps.push(StepReport {
                    turn: s.turn.to_native(),
                    step: s.step.to_native(),
                    seq,
                    history_messages: messages.len(),
                    history_bytes: bytes,
                    calls: Vec::new(),
                });
            }
            ArchivedEventData::ToolCall(c) => {
                let call = ReplayCall {
                    seq,
                    turn: c.turn.to_native(),
                    step: c.step.to_native(),
                    call_id: c.call_id.to_string(),
                    name: c.name.to_string(),
                    arguments: c.arguments.to_string(),
                    recorded: None,
                    recorded_seq: None,
                };
                if report.steps.is_empty() {
                    // A call outside any step (a log that breaks the rules): give it a step.
                    report.steps.push(StepReport {
                        turn: call.turn,
                        step: call.step,
                        seq,
                        history_messages: 0,
                        history_bytes: 0,
                        calls: Vec::new(),
                    });
                }
                let s = report.steps.len() - 1;
                call_at.insert(seq, (s, report.steps[s].calls.len()));
                report.steps[s].calls.push(CallReport {
                    call,
                    replayed: None,
                    diverged: false,
                });
                report.calls += 1;
            }
            _ => {}
        }
        let wanted = event
            .event_type()
            .is_some_and(|t| t.is_surface() || t == EventType::ToolCall);
        if !wanted {
            continue;
        }
        let owned = decode_event(event).map_err(archive_error(seq))?;
        if let crate::event::EventData::ToolResult(r) = &owned.data {
            if let Ok(Some(answered)) = projector.call_answered_by(&owned) {
                if let Some(&(s, c)) = call_at.get(&answered.seq) {
                    let slot = &mut report.steps[s].calls[c].call;
                    slot.recorded = Some(ToolOutput {
                        content: r.message.content.clone(),
                        is_error: r.message.is_error,
                    });
                    slot.recorded_seq = Some(seq);
                }
            }
        }
        // A stored event the projection refuses is left out of the history, as when deriving.
        let _ = projector.apply(&owned);
    }
    if let Some(executor) = executor {
        report.ran = true;
        for step in &mut report.steps {
            for c in &mut step.calls {
                let result = executor.execute(&c.call);
                c.diverged = match (&result, &c.call.recorded) {
                    (Ok(new), Some(old)) => new != old,
                    _ => true,
                };
                if c.diverged {
                    report.divergences += 1;
                }
                c.replayed = Some(result);
            }
        }
    }
    Ok(report)
}
