//! `agentlog replay SESSION [--run CMD] [--json]`: walk a session step by step; with `--run`,
//! execute every recorded tool call again and compare the results.

use std::io::Write;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

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
/// when any call diverged. A call still running after --timeout seconds (default 60) is killed
/// with what it started and reported as timed out. A command that cannot run at all (sh exits
/// 127 "not found" or 126 "not executable" printing nothing) stops the replay: exit code 2.
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
    /// With --run: the seconds one call may run before it is killed and reported as timed out
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0, requires = "run")]
    timeout: f64,
    /// Print one JSON object
    #[arg(long)]
    json: bool,
}

/// Runs tool calls through a shell command.
struct ShellExecutor {
    command: String,
    /// How long one call may run.
    timeout: Duration,
    /// Set once the command cannot run: every later call fails with it, and the command fails.
    fatal: Option<String>,
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

/// Exit codes of `sh -c` for a command it could not run: 126 not executable, 127 not found.
const CANNOT_RUN: [i32; 2] = [126, 127];

impl ToolExecutor for ShellExecutor {
    fn execute(&mut self, call: &ReplayCall) -> std::result::Result<ToolOutput, String> {
        if let Some(why) = &self.fatal {
            return Err(why.clone());
        }
        let result = self.run_once(call);
        if let Err(Fatal(why)) = &result {
            self.fatal = Some(why.clone());
        }
        result.map_err(|Fatal(why)| why).and_then(|r| r)
    }
}

/// A failure that stops the replay: the command cannot run at all.
struct Fatal(String);

impl ShellExecutor {
    /// Runs the command for one call, killing it (its whole process group) after the timeout.
    /// The inner result is the call's (a timeout, bad output); the outer a command that cannot
    /// run.
    fn run_once(
        &mut self,
        call: &ReplayCall,
    ) -> std::result::Result<std::result::Result<ToolOutput, String>, Fatal> {
        use std::os::unix::process::CommandExt;
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(&self.command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            // Its own process group: a timeout kills what it started too.
            .process_group(0)
            .spawn()
            .map_err(|e| Fatal(format!("cannot run `sh -c {:?}`: {e}", self.command)))?;
        if let Some(mut stdin) = child.stdin.take() {
            let input = format!("{}\n", call_input(call));
            // Written from a thread: a command that does not read its input must not block us.
            // A command that closes the pipe early is not an error.
            std::thread::spawn(move || {
                let _ = stdin.write_all(input.as_bytes());
            });
        }
        let reader = child.stdout.take().map(|mut out| {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                let _ = std::io::Read::read_to_end(&mut out, &mut bytes);
                bytes
            })
        });
        let started = Instant::now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if started.elapsed() >= self.timeout => {
                    if let Some(pid) = rustix::process::Pid::from_raw(child.id() as i32) {
                        let _ =
                            rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
                    }
                    let _ = child.kill();
                    let _ = child.wait();
                    return Ok(Err(format!(
                        "timed out: the command ran for {} s without finishing (killed; \
                         --timeout SECONDS changes the limit)",
                        self.timeout.as_secs_f64()
                    )));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                Err(e) => return Ok(Err(format!("running {:?}: {e}", self.command))),
            }
        };
        let stdout = reader.and_then(|r| r.join().ok()).unwrap_or_default();
        if stdout.is_empty() && status.code().is_some_and(|c| CANNOT_RUN.contains(&c)) {
            return Err(Fatal(format!(
                "the --run command {:?} cannot run (sh exited with {}: {}; its message is \
                 above); nothing was replayed",
                self.command,
                status.code().unwrap_or_default(),
                if status.code() == Some(127) {
                    "command not found"
                } else {
                    "not executable"
                }
            )));
        }
        let Ok(stdout) = String::from_utf8(stdout) else {
            return Ok(Err("the command printed invalid UTF-8".to_string()));
        };
        Ok(parse_output(&stdout, !status.success()))
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
    if !(args.timeout.is_finite() && args.timeout > 0.0) {
        eprintln!(
            "error: --timeout {}: expected a number of seconds above 0",
            args.timeout
        );
        return Ok(ExitCode::from(2));
    }
    let mut shell = args.run.map(|command| ShellExecutor {
        command,
        timeout: Duration::from_secs_f64(args.timeout.min(1e9)),
        fatal: None,
    });
    let executor = shell.as_mut().map(|s| s as &mut dyn ToolExecutor);
    let report = replay(&reader, executor).map_err(|e| target.error(e))?;
    if let Some(why) = shell.as_ref().and_then(|s| s.fatal.as_ref()) {
        eprintln!("error: {why}");
        return Ok(ExitCode::from(2));
    }
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
