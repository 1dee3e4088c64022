//! Streaming JSONL (docs/events.md §4): a reader that checks every line and the seq sequence in
//! constant memory, a writer of canonical lines, and one-call helpers.

use std::io::{self, BufRead, Write};

use super::blocks::ToolContent;
use super::decode::{decode_event, decode_event_with, decode_line, to_value, Decoded};
use super::error::{LineError, ParseError, ParseErrorKind};
use super::parse::{parse_json_text, parse_line};
use super::types::{ArchivedEvent, Event, SessionHeader};
use super::value::Value;

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// One line of a session's JSONL file.
// Events are the common case and move on at once; boxing them would cost an allocation a line.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Line {
    /// The session header (only ever the first line).
    Header(SessionHeader),
    /// An event.
    Event(Event),
}

/// Parses one line into an event (seq is not checked against a sequence; no header detection).
/// The line must not contain a line break other than trailing whitespace; errors say line 1.
pub fn parse_event_line(line: &str) -> Result<Event, ParseError> {
    parse_line(line)
        .and_then(decode_event)
        .map(|(event, _)| event)
        .map_err(|e| e.at_line(1, line.as_bytes()))
}

/// Parses a session header line (`{"type":"session",…}` without `seq`).
pub fn parse_header_line(line: &str) -> Result<SessionHeader, ParseError> {
    let raw = parse_line(line).map_err(|e| e.at_line(1, line.as_bytes()))?;
    <SessionHeader as super::decode::Decode>::decode(raw, super::decode::Path::Root)
        .map_err(|e| e.at_line(1, line.as_bytes()))
}

/// An event line whose `seq` and `time` may be left out, for appending: the log assigns them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Draft {
    /// The event; its `seq` and `time` are 0 where the line left them out.
    pub event: Event,
    /// The `seq` the line gave, if any (an appender checks it against the log's length).
    pub seq: Option<u64>,
    /// The `time` the line gave, if any (kept; otherwise the appender sets the clock's).
    pub time: Option<i64>,
}

/// Parses one event line whose `seq` and `time` may be absent (everything else as
/// [`parse_event_line`]).
pub fn parse_draft_line(line: &str) -> Result<Draft, ParseError> {
    let (event, _, given) = parse_line(line)
        .and_then(|raw| decode_event_with(raw, false))
        .map_err(|e| e.at_line(1, line.as_bytes()))?;
    Ok(Draft {
        seq: given.seq.then_some(event.seq),
        time: given.time.then_some(event.time),
        event,
    })
}

/// Parses a text holding one JSON value of any kind (an object, an array, a string, …), keeping
/// member order and the exact text of numbers. Refuses what the line parser refuses (duplicate
/// names, NaN, nesting deeper than [`MAX_DEPTH`](crate::event::MAX_DEPTH), trailing characters);
/// errors name the line and column in `text`.
pub fn parse_json(text: &str) -> Result<Value, ParseError> {
    let bytes = text.as_bytes();
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let skipped = bytes.len() - text.len();
    parse_json_text(text).map(to_value).map_err(|mut e| {
        e.offset = e.offset.map(|o| o + skipped);
        e.in_text(bytes)
    })
}

/// [`parse_json`] for a line another program wrote (an importer's source): also reads lone
/// surrogate escapes (as U+FFFD) and repeated member names (the earlier member keeps its place
/// and takes the later value), which JavaScript's `JSON.parse` accepts and Node's
/// `JSON.stringify` may write. Returns how many of each it read.
pub(crate) fn parse_json_lenient(
    text: &str,
) -> Result<(Value, super::parse::Leniency), ParseError> {
    let bytes = text.as_bytes();
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let skipped = bytes.len() - text.len();
    super::parse::parse_json_text_lenient(text)
        .map(|(raw, leniency)| (to_value(raw), leniency))
        .map_err(|mut e| {
            e.offset = e.offset.map(|o| o + skipped);
            e.in_text(bytes)
        })
}

/// Parses a tool's output as `tool/result` holds it (`message.content`): a JSON string, or an
/// array of content blocks (checked like any event's blocks).
pub fn parse_tool_content(text: &str) -> Result<ToolContent, ParseError> {
    parse_json_text(text)
        .and_then(|raw| {
            <ToolContent as super::decode::Decode>::decode(raw, super::decode::Path::Root)
        })
        .map_err(|e| e.in_text(text.as_bytes()))
}

impl std::str::FromStr for Event {
    type Err = ParseError;

    /// Same as [`parse_event_line`].
    fn from_str(line: &str) -> Result<Self, ParseError> {
        parse_event_line(line)
    }
}

/// Parses a whole JSONL file held in memory: the header if the first line is one, and the events
/// (seq checked from 0). Stops at the first refused line.
pub fn parse_jsonl(input: &[u8]) -> Result<(Option<SessionHeader>, Vec<Event>), ParseError> {
    let mut header = None;
    let mut events = Vec::new();
    for line in JsonlReader::new(input) {
        match line? {
            Line::Header(h) => header = Some(h),
            Line::Event(e) => events.push(e),
        }
    }
    Ok((header, events))
}

/// Parses `text` (line number `line`) into a header or event.
fn parse_text(text: &str, line: u64, allow_header: bool) -> Result<Decoded, ParseError> {
    parse_line(text)
        .and_then(|raw| decode_line(raw, allow_header))
        .map_err(|e| e.at_line(line, text.as_bytes()))
}

/// The longest line [`JsonlReader`] accepts unless told otherwise: 256 MiB (sixteen times the
/// default maximum event size, room for any escaping).
pub const DEFAULT_MAX_LINE: u64 = 256 << 20;

/// The longest JSONL line that can hold an event of `max_event_size` bytes (the size of its
/// stored archive, `max_event_size` in `agentlog.toml`): six times that (a control character
/// stored as one byte is written `\u001f`, six; nothing else grows more), at least 1 MiB.
/// `import` and `append` refuse a longer line as soon as they have read that much of it, so no
/// event the log holds is ever refused when its export is read back, and memory stays bounded.
pub fn max_line_for(max_event_size: u64) -> u64 {
    max_event_size.saturating_mul(6).max(1 << 20)
}

/// What [`read_line_bounded`] read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoundedLine {
    /// The input is at its end: nothing was read.
    End,
    /// A line of this many bytes (its `\n` included, when it has one) is in the buffer.
    Line(usize),
    /// The line is longer than the limit: the buffer holds its first `limit` bytes, and the
    /// rest is still unread ([`skip_line`] reads on to the next line without keeping it).
    TooLong,
}

/// Reads one line, through its `\n`, into `buf` (cleared first), reading at most `limit` bytes:
/// memory stays bounded whatever the input. A last line without `\n` is a line. A longer line
/// is refused as soon as `limit` bytes of it were read, the rest left unread: an endless line
/// (`/dev/zero`) is refused at once. A caller that goes on after it calls [`skip_line`].
pub fn read_line_bounded<R: BufRead>(
    input: &mut R,
    buf: &mut Vec<u8>,
    limit: u64,
) -> std::io::Result<BoundedLine> {
    buf.clear();
    let n = std::io::Read::take(&mut *input, limit).read_until(b'\n', buf)?;
    if n == 0 {
        return Ok(BoundedLine::End);
    }
    if n as u64 >= limit && buf.last() != Some(&b'\n') && !input.fill_buf()?.is_empty() {
        return Ok(BoundedLine::TooLong);
    }
    Ok(BoundedLine::Line(n))
}

/// Reads on through the next `\n` (or to the end of the input) without keeping anything, in the
/// reader's own buffer: after [`BoundedLine::TooLong`], the input is then at the next line.
pub fn skip_line<R: BufRead>(input: &mut R) -> std::io::Result<()> {
    loop {
        let (done, used) = match input.fill_buf() {
            Ok([]) => return Ok(()),
            Ok(chunk) => match chunk.iter().position(|&b| b == b'\n') {
                Some(i) => (true, i + 1),
                None => (false, chunk.len()),
            },
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        input.consume(used);
        if done {
            return Ok(());
        }
    }
}

/// Reads a JSONL session line by line, yielding the header (if the first line is one) and the
/// events, each checked; refuses the first bad line and then ends.
///
/// Checks, besides each line's JSON and event rules: the seqs count up by one from the first seq
/// (0 unless [`JsonlReader::with_first_seq`]); no blank lines (a final empty line, `…\n\n`, too);
/// valid UTF-8. Accepts a BOM on the first line, `\r\n` line ends and a missing final `\n`.
/// One line buffer is reused, so memory stays flat for any file size.
pub struct JsonlReader<R> {
    input: R,
    buf: Vec<u8>,
    max_line: u64,
    lines: u64,
    bytes: u64,
    next_seq: u64,
    done: bool,
}

impl<R: BufRead> JsonlReader<R> {
    /// A reader whose first event must have seq 0.
    pub fn new(input: R) -> Self {
        Self {
            input,
            buf: Vec::new(),
            max_line: DEFAULT_MAX_LINE,
            lines: 0,
            bytes: 0,
            next_seq: 0,
            done: false,
        }
    }

    /// Refuses a line longer than `bytes` (its line end included) with
    /// [`ParseErrorKind::LineTooLong`], after reading at most that much of it: memory stays
    /// bounded whatever the input (a binary file, `/dev/zero`). Default: [`DEFAULT_MAX_LINE`].
    #[must_use]
    pub fn with_max_line(mut self, bytes: u64) -> Self {
        self.max_line = bytes.max(1);
        self
    }

    /// Expects the first event to have seq `seq` (for input that continues a log).
    pub fn with_first_seq(mut self, seq: u64) -> Self {
        self.next_seq = seq;
        self
    }

    /// Lines read so far (including a refused one).
    pub fn lines_read(&self) -> u64 {
        self.lines
    }

    /// Bytes read so far, line ends included (for progress).
    pub fn bytes_read(&self) -> u64 {
        self.bytes
    }

    /// The seq the next event must have.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The underlying reader.
    pub fn into_inner(self) -> R {
        self.input
    }

    fn read_line(&mut self) -> Result<Option<Line>, ParseError> {
        let io_error = |line: u64, e: std::io::Error| ParseError {
            line,
            column: None,
            kind: ParseErrorKind::Io {
                kind: e.kind(),
                message: e.to_string(),
            },
        };
        let n = match read_line_bounded(&mut self.input, &mut self.buf, self.max_line) {
            Ok(BoundedLine::End) => return Ok(None),
            Ok(BoundedLine::Line(n)) => n,
            Ok(BoundedLine::TooLong) => {
                self.lines += 1;
                return Err(ParseError {
                    line: self.lines,
                    column: None,
                    kind: ParseErrorKind::LineTooLong {
                        limit: self.max_line,
                    },
                });
            }
            Err(e) => return Err(io_error(self.lines + 1, e)),
        };
        self.lines += 1;
        self.bytes += n as u64;
        let line = self.lines;
        let mut text: &[u8] = &self.buf;
        if let Some(rest) = text.strip_suffix(b"\n") {
            text = rest.strip_suffix(b"\r").unwrap_or(rest);
        }
        if line == 1 {
            if self.buf == BOM {
                // A file that holds a BOM and nothing else: empty, as a file without it.
                return Ok(None);
            }
            text = text.strip_prefix(BOM).unwrap_or(text);
        }
        let text = std::str::from_utf8(text).map_err(|e| {
            LineError::at(e.valid_up_to(), ParseErrorKind::InvalidUtf8).at_line(line, text)
        })?;
        match parse_text(text, line, line == 1)? {
            Decoded::Header(header) => Ok(Some(Line::Header(header))),
            Decoded::Event(event, seq_pos) => {
                if event.seq != self.next_seq {
                    let kind = ParseErrorKind::UnexpectedSeq {
                        expected: self.next_seq,
                        found: event.seq,
                    };
                    return Err(LineError::at(seq_pos, kind).at_line(line, text.as_bytes()));
                }
                self.next_seq = event.seq.saturating_add(1);
                Ok(Some(Line::Event(event)))
            }
        }
    }
}

impl<R: BufRead> Iterator for JsonlReader<R> {
    type Item = Result<Line, ParseError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let item = self.read_line().transpose();
        if !matches!(item, Some(Ok(_))) {
            self.done = true;
        }
        item
    }
}

/// Writes canonical JSONL: each header or event as one compact line ended by `\n`.
pub struct JsonlWriter<W> {
    output: W,
    buf: Vec<u8>,
    lines: u64,
}

impl<W: Write> JsonlWriter<W> {
    /// A writer into `output` (wrap files in a `BufWriter`).
    pub fn new(output: W) -> Self {
        Self {
            output,
            buf: Vec::with_capacity(4096),
            lines: 0,
        }
    }

    /// Writes the session header line.
    pub fn write_header(&mut self, header: &SessionHeader) -> io::Result<()> {
        self.buf.clear();
        header.write_canonical(&mut self.buf);
        self.finish_line()
    }

    /// Writes an event line.
    pub fn write_event(&mut self, event: &Event) -> io::Result<()> {
        self.buf.clear();
        event.write_canonical(&mut self.buf);
        self.finish_line()
    }

    /// Writes an event line straight from its archive, without deserializing it.
    pub fn write_archived(&mut self, event: &ArchivedEvent) -> io::Result<()> {
        self.buf.clear();
        event.write_canonical(&mut self.buf);
        self.finish_line()
    }

    fn finish_line(&mut self) -> io::Result<()> {
        self.buf.push(b'\n');
        self.output.write_all(&self.buf)?;
        self.lines += 1;
        Ok(())
    }

    /// Lines written so far.
    pub fn lines_written(&self) -> u64 {
        self.lines
    }

    /// Flushes the output.
    pub fn flush(&mut self) -> io::Result<()> {
        self.output.flush()
    }

    /// The output, after a flush.
    pub fn into_inner(mut self) -> io::Result<W> {
        self.output.flush()?;
        Ok(self.output)
    }
}
