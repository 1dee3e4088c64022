//! `agentlog view SESSION [-o FILE.html] [--open]`: the session as one self-contained HTML page.
//!
//! The page (`src/bin/agentlog/view/`: `page.css`, `page.js`) holds the session's events as
//! canonical JSON (docs/events.md §4) in `<script type="application/json" id="agentlog-events">`,
//! its header, its `stats` summary and the call/result pairs `show` finds; the script renders
//! what is on screen from that data. No network request of any kind: the page has a
//! Content-Security-Policy of `default-src 'none'` (inline style and script only; no form
//! submission, no `<base>`).

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};

use anyhow::{anyhow, Result};

use agentlog::event::EventType;
use agentlog::session::{validate_id, SessionReader};

use crate::cmd::export::{in_place, write_atomically};
use crate::cmd::show::{decode, shapes_layout, Layout};
use crate::output::size;
use crate::target::{Ctx, Target};

const CSS: &str = include_str!("../view/page.css");
const JS: &str = include_str!("../view/page.js");

/// Write a session as one self-contained HTML page (a viewer)
///
/// One HTML file with the page's style, its script and the session's events inline: no network
/// request of any kind, so it opens offline in a current browser, can be attached to a bug
/// report or served as it is. It shows the session's id, title, lineage, time span and its
/// `stats` summary; turns as foldable sections (end reason, duration) with their steps (folded
/// except the last); messages as text, code in monospace, long tool output clipped ("show
/// all"), thinking folded; every tool call linked to its result and back; approvals, errors,
/// compactions (with what they replaced) and sandbox events; the colors of `show`. A search box
/// filters by text and type. Keys: j / k next / previous turn, / search, Esc clears it.
///
/// Only what is on screen is rendered, so long sessions stay fast. Stable hooks for scripts:
/// each event element has id="seq-SEQ", data-seq and data-type; each turn section data-turn; a
/// tool call's link to its result is href="#seq-RESULT_SEQ"; the events are canonical JSON
/// (docs/events.md §4) in <script type="application/json" id="agentlog-events">.
///
/// The file is written atomically with mode 0600 (a session may hold secrets). See
/// docs/viewer.md.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  agentlog view 01JABCDEF --open          writes ./01JABCDEF.html and opens it
  agentlog view 01JABCDEF -o bug.html     to attach to a bug report
  file:///path/to/bug.html#seq-42         (in a browser) the page at event 42")]
pub struct Args {
    /// The session: an id in the store, or a session directory
    session: String,
    /// Write to FILE ("-": standard output) [default: SESSION_ID.html in the current directory]
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Open the written page in the system's browser ($BROWSER, else xdg-open / open)
    #[arg(long)]
    open: bool,
}

pub fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    let target = ctx.resolve(&args.session)?;
    let reader = target.reader()?;
    if args.output.as_ref().is_some_and(|p| p.as_os_str() == "-") {
        if args.open {
            return Err(anyhow!(
                "--open needs a file to open; `-o -` writes the page to standard output"
            ));
        }
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
        page(&reader, &target, &mut out)?;
        out.flush()?;
        return Ok(ExitCode::SUCCESS);
    }
    let path = match &args.output {
        Some(p) => p.clone(),
        None => {
            let id = &reader.meta().id;
            let name = if validate_id(id).is_ok() {
                id
            } else {
                "session"
            };
            PathBuf::from(format!("{name}.html"))
        }
    };
    if path.is_dir() {
        return Err(anyhow!(
            "cannot write to {}: it is a directory; give a file name",
            path.display()
        ));
    }
    let mut bytes = 0u64;
    write_atomically(&path, |out| {
        let mut counted = Counted { out, n: 0 };
        page(&reader, &target, &mut counted)?;
        bytes = counted.n;
        Ok(())
    })?;
    let said = format!(
        "wrote {} ({} events, {})",
        path.display(),
        reader.len(),
        size(bytes)
    );
    if in_place(&path) {
        // A device, a pipe, `/dev/stdout`: the line would go into (or over) the page.
        eprintln!("{said}");
    } else {
        outln!("{said}")?;
    }
    if args.open {
        open_in_browser(&path)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// A writer that counts the bytes written through it.
struct Counted<W> {
    out: W,
    n: u64,
}

impl<W: Write> Write for Counted<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(buf)?;
        self.n += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// Writes the page: head, style, the data elements, the script.
fn page(reader: &SessionReader, target: &Target, out: &mut impl Write) -> Result<()> {
    let meta = reader.meta();
    let title = match meta.title.present() {
        Some(t) => format!("{t} ({}) · agentlog", meta.id),
        None => format!("{} · agentlog", meta.id),
    };
    let stats = reader.stats().map_err(|e| target.error(e))?;
    let mut header = Vec::new();
    meta.to_header().write_canonical(&mut header);
    write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         style-src 'unsafe-inline'; script-src 'unsafe-inline'; form-action 'none'; \
         base-uri 'none'\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"generator\" content=\"agentlog {}\">\n<title>{}</title>\n<style>\n{CSS}</style>\n\
         </head>\n<body>\n<noscript>This page shows an agentlog session with JavaScript; the \
         events are in the element agentlog-events below, one canonical JSON object each.</noscript>\n",
        env!("CARGO_PKG_VERSION"),
        html_escape(&title)
    )?;
    out.write_all(b"<script type=\"application/json\" id=\"agentlog-session\">")?;
    out.write_all(&script_safe(&header))?;
    out.write_all(b"</script>\n<script type=\"application/json\" id=\"agentlog-stats\">")?;
    out.write_all(&script_safe(stats.to_json().to_string().as_bytes()))?;
    out.write_all(b"</script>\n<script type=\"application/json\" id=\"agentlog-pairs\">")?;
    write_pairs(reader, target, out)?;
    out.write_all(b"</script>\n<script type=\"application/json\" id=\"agentlog-events\">[")?;
    let mut line = Vec::with_capacity(4096);
    for (i, event) in reader.events().enumerate() {
        let event = event.map_err(|e| target.error(e))?;
        line.clear();
        event.write_canonical(&mut line);
        if i > 0 {
            out.write_all(b",")?;
        }
        out.write_all(b"\n")?;
        out.write_all(&script_safe(&line))?;
    }
    out.write_all(b"\n]</script>\n<script>\n")?;
    out.write_all(JS.as_bytes())?;
    out.write_all(b"</script>\n</body>\n</html>\n")?;
    Ok(())
}

/// `[[CALL_SEQ,RESULT_SEQ],…]`: each tool result and the call it answers, found as `show` finds
/// them (docs/events.md §5).
fn write_pairs(reader: &SessionReader, target: &Target, out: &mut impl Write) -> Result<()> {
    let mut layout = Layout::default();
    let mut first = true;
    out.write_all(b"[")?;
    for event in reader.events() {
        let event = event.map_err(|e| target.error(e))?;
        if !shapes_layout(event.event_type()) {
            continue;
        }
        let owned = decode(event, target)?;
        let placed = layout.observe(&owned);
        if event.event_type() == Some(EventType::ToolResult) {
            if let Some((_, _, Some(call))) = placed.answers {
                if !first {
                    out.write_all(b",")?;
                }
                first = false;
                write!(out, "[{call},{}]", owned.seq)?;
            }
        }
    }
    out.write_all(b"]")?;
    Ok(())
}

/// JSON made safe inside a `<script>` element: every `<` (which JSON has only inside strings)
/// written `\u003c`, so no `</script>` or `<!--` can end or change the element. The text still
/// parses to the same value.
fn script_safe(json: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if !json.contains(&b'<') {
        return std::borrow::Cow::Borrowed(json);
    }
    let mut v = Vec::with_capacity(json.len() + 16);
    for &b in json {
        if b == b'<' {
            v.extend_from_slice(b"\\u003c");
        } else {
            v.push(b);
        }
    }
    std::borrow::Cow::Owned(v)
}

/// Text made safe in HTML content and attribute values.
fn html_escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// Starts the system's browser on the page: `$BROWSER` when set, else `open` (macOS) or
/// `xdg-open`. It is not waited for.
fn open_in_browser(path: &std::path::Path) -> Result<()> {
    let abs =
        std::path::absolute(path).map_err(|e| anyhow!("cannot open {}: {e}", path.display()))?;
    let browser = std::env::var_os("BROWSER").filter(|b| !b.is_empty());
    let program = match &browser {
        Some(b) => b.clone(),
        None if cfg!(target_os = "macos") => "open".into(),
        None => "xdg-open".into(),
    };
    Command::new(&program)
        .arg(&abs)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| {
            anyhow!(
                "wrote {}, but cannot start a browser ({}): {e}; open the file yourself, or set \
                 $BROWSER",
                abs.display(),
                program.to_string_lossy()
            )
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_safe_escapes_every_open_angle() {
        let s = br#"{"a":"</script><!-- x"}"#;
        let out = script_safe(s);
        assert!(!out.contains(&b'<'));
        let text = String::from_utf8(out.into_owned()).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["a"], "</script><!-- x");
    }

    #[test]
    fn html_escape_escapes_markup() {
        assert_eq!(html_escape("a<b>&\"'"), "a&lt;b&gt;&amp;&quot;&#39;");
    }
}
