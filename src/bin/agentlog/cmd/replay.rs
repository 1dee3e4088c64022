//! `agentlog replay SESSION [--run CMD] [--json]`: walk a session step by step; with `--run`,
//! execute every recorded tool call again and compare the results.

use std::io::Write;
use std::process::{Command, ExitCode, Stdio};

use anyhow::Result;

use agentlog::event::{parse_json, parse_tool_content, ToolContent, Value};
use agentlog::session::{replay, CallReport, ReplayCall, ReplayReport, ToolExecutor, ToolOutput};

use crate::cmd::{object, print_json};
use crate::output::{one_line, Color, Paint};
use crate::target::Ctx;

/// Replay a session, step by step, with or without running its tools
///
/// Dry run (the default): for every step, the history the model was given when it started
/// (messages and bytes of canonical JSON) and the tool calls it made with their recorded results.
///
/// --run CMD executes every recorded tool call again, in log order, by running CMD with `sh -c`
/// once per call. CMD gets the call as one JSON object on stdin:
/// {"seq","turn","step","callId","name","arguments","recorded":{"content","isError"}|null}
/// ("arguments" is the raw JSON string the model produced). It prints the result on stdout: a
/// JSON object {"content": string or content blocks, "isError": bool (default false)}, or else
/// any text, taken as the content (isError = CMD exited non-zero). Each call is reported as equal
/// or diverged (content and isError compared with the recorded result); the exit status is 1
/// when any call diverged.
///
/// --json prints one object: {"steps":[{"turn","step","seq","historyMessages","historyBytes",
/// "calls":[{"seq","callId","name","recorded","replayed","diverged"}]}],"calls","divergences",
/// "ran"}.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The session: an id in the store, or a session directory
    session: String,
    /// Run every tool call again through this shell command
    #[arg(long, value_name = "CMD")]
    run: Option<String>,
    /// Print one JSON object
    #[arg(long)]
    json: bool,
}

/// Runs tool calls through a shell command.
struct ShellExecutor {
    command: String,
}

fn content_value(c: &ToolContent) -> Value {
    parse_json(&c.to_string()).unwrap_or(Value::Null)
}

fn output_value(o: &ToolOutput) -> Value {
    object(vec![
        ("content", content_value(&o.content)),
        ("isError", Value::Bool(o.is_error)),
    ])
}

fn call_input(call: &ReplayCall) -> Value {
    object(vec![
        ("seq", call.seq.into()),
        ("turn", call.turn.into()),
        ("step", call.step.into()),
        ("callId", call.call_id.clone().into()),
        ("name", call.name.clone().into()),
        ("arguments", call.arguments.clone().into()),
        (
            "recorded",
            call.recorded.as_ref().map_or(Value::Null, output_value),
        ),
    ])
}

/// Reads what the command printed: `{"content", "isError"}`, or plain text.
fn parse_output(stdout: &str, failed: bool) -> std::result::Result<ToolOutput, String> {
    if let Ok(Value::Object(m)) = parse_json(stdout) {
        if let Some(content) = m.get("content") {
            let content = parse_tool_content(&content.to_string())
                .map_err(|e| format!("the command's \"content\" is not tool output: {e}"))?;
            let is_error = match m.get("isError") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(b)) => *b,
                Some(other) => {
                    return Err(format!(
                        "the command's \"isError\" must be true or false, found {other}"
                    ))
                }
            };
            return Ok(ToolOutput { content, is_error });
        }
    }
    let text = stdout.strip_suffix('\n').unwrap_or(stdout);
    Ok(ToolOutput {
        content: ToolContent::Text(text.to_string()),
        is_error: failed,
    })
}

impl ToolExecutor for ShellExecutor {
    fn execute(&mut self, call: &ReplayCall) -> std::result::Result<ToolOutput, String> {
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(&self.command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot run {:?}: {e}", self.command))?;
        if let Some(mut stdin) = child.stdin.take() {
            let input = format!("{}\n", call_input(call));
            // A command that does not read its input closes the pipe early: not an error.
            let _ = stdin.write_all(input.as_bytes());
        }
        let out = child
            .wait_with_output()
            .map_err(|e| format!("running {:?}: {e}", self.command))?;
        let stdout = String::from_utf8(out.stdout)
            .map_err(|_| "the command printed invalid UTF-8".to_string())?;
        parse_output(&stdout, !out.status.success())
    }
}

fn call_json(c: &CallReport) -> Value {
    let replayed = match &c.replayed {
        None => Value::Null,
        Some(Ok(o)) => output_value(o),
        Some(Err(e)) => object(vec![("error", e.clone().into())]),
    };
    object(vec![
        ("seq", c.call.seq.into()),
        ("callId", c.call.call_id.clone().into()),
        ("name", c.call.name.clone().into()),
        (
            "recorded",
            c.call.recorded.as_ref().map_or(Value::Null, output_value),
        ),
        ("replayed", replayed),
        ("diverged", Value::Bool(c.diverged)),
    ])
}

fn report_json(r: &ReplayReport) -> Value {
    let steps = r
        .steps
        .iter()
        .map(|s| {
            object(vec![
                ("turn", s.turn.into()),
                ("step", s.step.into()),
                ("seq", s.seq.into()),
                ("historyMessages", (s.history_messages as u64).into()),
                ("historyBytes", s.history_bytes.into()),
                (
                    "calls",
                    Value::Array(s.calls.iter().map(call_json).collect()),
                ),
            ])
        })
        .collect();
    object(vec![
        ("steps", Value::Array(steps)),
        ("calls", r.calls.into()),
        ("divergences", r.divergences.into()),
        ("ran", Value::Bool(r.ran)),
    ])
}

/// A short view of a tool output for one line.
fn summary(o: Option<&ToolOutput>) -> String {
    let Some(o) = o else {
        return "(no result)".into();
    };
    let text = match &o.content {
        ToolContent::Text(t) => t.clone(),
        blocks => blocks.to_string(),
    };
    let s = one_line(&text, 60);
    if o.is_error {
        format!("error: {s}")
    } else {
        s
    }
}

pub fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    let target = ctx.resolve(&args.session)?;
    let reader = target.reader()?;
    let mut shell = args.run.map(|command| ShellExecutor { command });
    let executor = shell.as_mut().map(|s| s as &mut dyn ToolExecutor);
    let report = replay(&reader, executor).map_err(|e| target.error(e))?;
    if args.json {
        print_json(&report_json(&report))?;
    } else {
        let p = Paint::stdout();
        for s in &report.steps {
            outln!(
                "{} turn {} step {} (seq {}): history of {} messages, {} bytes",
                p.paint(Color::Cyan, "▸"),
                s.turn,
                s.step,
                s.seq,
                s.history_messages,
                s.history_bytes
            )?;
            for c in &s.calls {
                outln!(
                    "    {} {} {}  → {}",
                    c.call.call_id,
                    c.call.name,
                    one_line(&c.call.arguments, 80),
                    summary(c.call.recorded.as_ref())
                )?;
                match &c.replayed {
                    None => {}
                    Some(_) if !c.diverged => {
                        outln!("      {}", p.paint(Color::Green, "= same result"))?
                    }
                    Some(Ok(o)) => outln!(
                        "      {} {}",
                        p.paint(Color::Red, "≠ diverged:"),
                        summary(Some(o))
                    )?,
                    Some(Err(e)) => outln!("      {} {e}", p.paint(Color::Red, "≠ failed:"))?,
                }
            }
        }
        let tail = if report.ran {
            format!(", {} diverged", report.divergences)
        } else {
            String::new()
        };
        outln!(
            "{} steps, {} tool calls{tail}",
            report.steps.len(),
            report.calls
        )?;
    }
    Ok(if report.divergences > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
