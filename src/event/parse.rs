//! A hand-written JSON parser for one line into a borrowed tree ([`Raw`]) that remembers where
//! each value starts, so later checks can name a column.
//!
//! Strings without escapes and all numbers borrow from the line; the line is UTF-8 checked once
//! before parsing and never again. Refuses everything RFC 8259 refuses, plus duplicate member
//! names (at any depth) and nesting deeper than [`MAX_DEPTH`].

use std::borrow::Cow;

use super::error::{LineError, ParseErrorKind};
use super::scan::{find_special, same_name};
use super::value::number_len;

/// The deepest nesting of objects and arrays a line may have (the line's own object counts as 1).
pub const MAX_DEPTH: usize = 128;

/// Objects with more members than this are checked for duplicate names by sorting, once, instead
/// of comparing each new name with all earlier ones.
const LINEAR_DUPLICATE_CHECK: usize = 16;

/// What may follow a backslash in a string.
const ESCAPES: &str = "an escape ('\"', '\\', '/', 'b', 'f', 'n', 'r', 't' or 'u')";

/// A parsed JSON value that borrows from the line, with the byte offset where it starts.
#[derive(Debug)]
pub(crate) struct Raw<'a> {
    /// Byte offset of the value's first character in the line.
    pub(crate) pos: usize,
    /// The value.
    pub(crate) kind: RawKind<'a>,
}

/// The JSON value of a [`Raw`].
#[derive(Debug)]
pub(crate) enum RawKind<'a> {
    Null,
    Bool(bool),
    /// The number's exact text (checked against the JSON grammar).
    Number(&'a str),
    String(Cow<'a, str>),
    Array(Vec<Raw<'a>>),
    /// Members in order; no name twice.
    Object(Vec<RawMember<'a>>),
}

/// One member of a [`RawKind::Object`].
#[derive(Debug)]
pub(crate) struct RawMember<'a> {
    pub(crate) key: Cow<'a, str>,
    pub(crate) value: Raw<'a>,
}

impl RawKind<'_> {
    /// The kind of value in English words, for messages.
    pub(crate) fn describe(&self) -> &'static str {
        match self {
            Self::Null => "null",
            Self::Bool(_) => "a boolean",
            Self::Number(_) => "a number",
            Self::String(_) => "a string",
            Self::Array(_) => "an array",
            Self::Object(_) => "an object",
        }
    }
}

/// Parses one line (no line terminator) that must hold exactly one JSON object.
pub(crate) fn parse_line(line: &str) -> Result<Raw<'_>, LineError> {
    let value = parse_json_text(line)?;
    if !matches!(value.kind, RawKind::Object(_)) {
        let found = value.kind.describe();
        return Err(LineError::at(
            value.pos,
            ParseErrorKind::NotAnObject { found },
        ));
    }
    Ok(value)
}

/// Parses a text that holds exactly one JSON value of any kind (whitespace, line breaks included,
/// around and between tokens).
pub(crate) fn parse_json_text(line: &str) -> Result<Raw<'_>, LineError> {
    parse_with(line, None)
}

/// What [`parse_json_text_lenient`] read that the strict parser refuses.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Leniency {
    /// `\u` escapes of lone UTF-16 surrogates, read as U+FFFD.
    pub(crate) lone_surrogates: usize,
    /// Member names that repeat an earlier one of their object: the earlier member keeps its
    /// place and takes the later value, as JavaScript's `JSON.parse` does.
    pub(crate) repeated_names: usize,
}

/// [`parse_json_text`] for text another program wrote (an importer's source line), reading two
/// things JavaScript's `JSON.parse` and `JSON.stringify` accept that RFC 8259 leaves out or
/// refuses here: lone surrogate escapes and repeated member names ([`Leniency`] counts them).
pub(crate) fn parse_json_text_lenient(line: &str) -> Result<(Raw<'_>, Leniency), LineError> {
    let mut leniency = Leniency::default();
    let raw = parse_with(line, Some(&mut leniency))?;
    Ok((raw, leniency))
}

fn parse_with<'a>(line: &'a str, lenient: Option<&mut Leniency>) -> Result<Raw<'a>, LineError> {
    let mut p = Parser {
        src: line,
        bytes: line.as_bytes(),
        pos: 0,
        depth: 0,
        lenient,
    };
    p.skip_ws();
    if p.pos == p.bytes.len() {
        return Err(LineError::without_place(ParseErrorKind::BlankLine));
    }
    let value = p.value()?;
    p.skip_ws();
    if p.pos != p.bytes.len() {
        return Err(LineError::at(p.pos, ParseErrorKind::TrailingCharacters));
    }
    Ok(value)
}

struct Parser<'a, 'l> {
    src: &'a str,
    bytes: &'a [u8],
    pos: usize,
    depth: usize,
    /// Set for [`parse_json_text_lenient`]: what it read that is refused otherwise.
    lenient: Option<&'l mut Leniency>,
}

impl<'a> Parser<'a, '_> {
    #[inline]
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    #[inline]
    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    /// A syntax error at the current position: what was expected and what is there.
    fn unexpected(&self, expected: &'static str) -> LineError {
        let found = match self
            .src
            .get(self.pos..)
            .and_then(|rest| rest.chars().next())
        {
            None => "end of line".to_owned(),
            Some(c) if c.is_control() => format!("U+{:04X}", u32::from(c)),
            Some(c) => format!("'{c}'"),
        };
        LineError::at(self.pos, ParseErrorKind::Syntax { expected, found })
    }

    fn value(&mut self) -> Result<Raw<'a>, LineError> {
        let pos = self.pos;
        let kind = match self.peek() {
            Some(b'{') => self.object()?,
            Some(b'[') => self.array()?,
            Some(b'"') => RawKind::String(self.string()?),
            Some(b't') => self.literal("true", RawKind::Bool(true))?,
            Some(b'f') => self.literal("false", RawKind::Bool(false))?,
            Some(b'n') => self.literal("null", RawKind::Null)?,
            Some(b'-' | b'0'..=b'9') => self.number()?,
            Some(b'N') if self.bytes[pos..].starts_with(b"NaN") => {
                return Err(non_finite(pos, "NaN"))
            }
            Some(b'I') if self.bytes[pos..].starts_with(b"Infinity") => {
                return Err(non_finite(pos, "Infinity"))
            }
            _ => return Err(self.unexpected("a JSON value")),
        };
        Ok(Raw { pos, kind })
    }

    fn literal(&mut self, word: &'static str, kind: RawKind<'a>) -> Result<RawKind<'a>, LineError> {
        if self.bytes[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(kind)
        } else {
            Err(self.unexpected("a JSON value"))
        }
    }

    fn number(&mut self) -> Result<RawKind<'a>, LineError> {
        let start = self.pos;
        match number_len(self.bytes, start) {
            Some(len) => {
                self.pos += len;
                Ok(RawKind::Number(&self.src[start..self.pos]))
            }
            None if self.bytes[start..].starts_with(b"-Infinity") => {
                Err(non_finite(start, "-Infinity"))
            }
            None => {
                // Point at the byte that broke the grammar.
                self.pos = start + 1;
                while self.peek().is_some_and(|b| b.is_ascii_digit()) {
                    self.pos += 1;
                }
                if let Some(b'.' | b'e' | b'E') = self.peek() {
                    self.pos += 1;
                    if let Some(b'+' | b'-') = self.peek() {
                        self.pos += 1;
                    }
                }
                Err(self.unexpected("a digit"))
            }
        }
    }

    fn enter(&mut self) -> Result<(), LineError> {
        if self.depth == MAX_DEPTH {
            return Err(LineError::at(
                self.pos,
                ParseErrorKind::TooDeep { limit: MAX_DEPTH },
            ));
        }
        self.depth += 1;
        Ok(())
    }

    fn array(&mut self) -> Result<RawKind<'a>, LineError> {
        self.enter()?;
        self.pos += 1;
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            self.depth -= 1;
            return Ok(RawKind::Array(items));
        }
        loop {
            self.skip_ws();
            items.push(self.value()?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    self.depth -= 1;
                    return Ok(RawKind::Array(items));
                }
                _ => return Err(self.unexpected("',' or ']'")),
            }
        }
    }

    fn object(&mut self) -> Result<RawKind<'a>, LineError> {
        self.enter()?;
        self.pos += 1;
        let mut members: Vec<RawMember<'a>> = Vec::with_capacity(8);
        // Byte offsets of the names, for duplicate errors on big objects.
        let mut key_positions: Vec<usize> = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            self.depth -= 1;
            return Ok(RawKind::Object(members));
        }
        loop {
            self.skip_ws();
            if self.peek() != Some(b'"') {
                return Err(self.unexpected("a member name in double quotes"));
            }
            let key_pos = self.pos;
            let key = self.string()?;
            // Leniently, a repeated name: the earlier member takes the value that follows.
            let mut repeat = None;
            if let Some(l) = self.lenient.as_deref_mut() {
                repeat = members.iter().position(|m| same_name(&m.key, &key));
                l.repeated_names += usize::from(repeat.is_some());
            } else if members.len() < LINEAR_DUPLICATE_CHECK {
                if members.iter().any(|m| same_name(&m.key, &key)) {
                    return Err(duplicate(key_pos, key));
                }
            } else {
                if key_positions.is_empty() {
                    key_positions.resize(members.len(), 0);
                }
                key_positions.push(key_pos);
            }
            self.skip_ws();
            if self.peek() != Some(b':') {
                return Err(self.unexpected("':'"));
            }
            self.pos += 1;
            self.skip_ws();
            let value = self.value()?;
            match repeat.and_then(|i| members.get_mut(i)) {
                Some(m) => m.value = value,
                None => members.push(RawMember { key, value }),
            }
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    self.depth -= 1;
                    if members.len() > LINEAR_DUPLICATE_CHECK {
                        check_duplicates(&members, &key_positions)?;
                    }
                    return Ok(RawKind::Object(members));
                }
                _ => return Err(self.unexpected("',' or '}'")),
            }
        }
    }

    /// Parses the string whose opening quote is at `self.pos`. Borrows when there is no escape.
    fn string(&mut self) -> Result<Cow<'a, str>, LineError> {
        let start = self.pos + 1;
        let end = find_special(self.bytes, start);
        match self.bytes.get(end) {
            Some(b'"') => {
                self.pos = end + 1;
                Ok(Cow::Borrowed(&self.src[start..end]))
            }
            Some(b'\\') => {
                let mut owned = String::with_capacity(end - start + 16);
                owned.push_str(&self.src[start..end]);
                self.pos = end;
                self.escaped_string(owned).map(Cow::Owned)
            }
            Some(&b) => Err(control(end, b)),
            None => {
                self.pos = end;
                Err(self.unexpected("'\"' to close the string"))
            }
        }
    }

    /// Continues a string at the backslash at `self.pos`, with the text before it in `out`.
    fn escaped_string(&mut self, mut out: String) -> Result<String, LineError> {
        loop {
            let escape_pos = self.pos;
            self.pos += 1;
            let c = match self.peek() {
                Some(b'u') => {
                    self.pos += 1;
                    self.unicode_escape(escape_pos)?
                }
                Some(b) => {
                    let c = match b {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        _ => return Err(self.unexpected(ESCAPES)),
                    };
                    self.pos += 1;
                    c
                }
                None => return Err(self.unexpected(ESCAPES)),
            };
            out.push(c);
            let start = self.pos;
            let end = find_special(self.bytes, start);
            out.push_str(&self.src[start..end]);
            match self.bytes.get(end) {
                Some(b'"') => {
                    self.pos = end + 1;
                    return Ok(out);
                }
                Some(b'\\') => self.pos = end,
                Some(&b) => return Err(control(end, b)),
                None => {
                    self.pos = end;
                    return Err(self.unexpected("'\"' to close the string"));
                }
            }
        }
    }

    /// Reads the four hex digits after `\u` (at `self.pos`), and the low surrogate escape that
    /// must follow a high one. `escape_pos` is the backslash, where a lone surrogate is reported.
    fn unicode_escape(&mut self, escape_pos: usize) -> Result<char, LineError> {
        let unit = self.hex4()?;
        let code = match unit {
            0xD800..=0xDBFF => {
                if self.bytes.get(self.pos..self.pos + 2) != Some(b"\\u") {
                    return self.lone(escape_pos, unit);
                }
                let next = self.pos;
                self.pos += 2;
                let low = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&low) {
                    // Leniently, the escape after it is read on its own.
                    self.pos = next;
                    return self.lone(escape_pos, unit);
                }
                0x10000 + ((u32::from(unit) - 0xD800) << 10) + (u32::from(low) - 0xDC00)
            }
            0xDC00..=0xDFFF => return self.lone(escape_pos, unit),
            _ => u32::from(unit),
        };
        char::from_u32(code).ok_or_else(|| lone_surrogate(escape_pos, unit))
    }

    /// A lone surrogate escape: refused, or leniently U+FFFD.
    fn lone(&mut self, escape_pos: usize, unit: u16) -> Result<char, LineError> {
        match self.lenient.as_deref_mut() {
            Some(l) => {
                l.lone_surrogates += 1;
                Ok('\u{FFFD}')
            }
            None => Err(lone_surrogate(escape_pos, unit)),
        }
    }

    fn hex4(&mut self) -> Result<u16, LineError> {
        let mut v: u16 = 0;
        for _ in 0..4 {
            let digit = match self.peek() {
                Some(b @ b'0'..=b'9') => b - b'0',
                Some(b @ b'a'..=b'f') => b - b'a' + 10,
                Some(b @ b'A'..=b'F') => b - b'A' + 10,
                _ => return Err(self.unexpected("a hex digit")),
            };
            v = (v << 4) | u16::from(digit);
            self.pos += 1;
        }
        Ok(v)
    }
}

fn non_finite(pos: usize, literal: &'static str) -> LineError {
    LineError::at(pos, ParseErrorKind::NonFiniteNumber { literal })
}

fn control(pos: usize, code: u8) -> LineError {
    LineError::at(pos, ParseErrorKind::ControlCharacter { code })
}

fn lone_surrogate(pos: usize, code_unit: u16) -> LineError {
    LineError::at(pos, ParseErrorKind::LoneSurrogate { code_unit })
}

fn duplicate(pos: usize, key: Cow<'_, str>) -> LineError {
    LineError::at(
        pos,
        ParseErrorKind::DuplicateMember {
            name: key.into_owned(),
        },
    )
}

/// Finds a duplicate name in a big object by sorting. Reports the duplicate a left-to-right
/// reader meets first: the smallest position that repeats an earlier name.
/// `positions[i]` is the name offset of member `i` (0 for the first members, which were checked
/// one by one as they came and cannot be the later half of a pair).
fn check_duplicates(members: &[RawMember<'_>], positions: &[usize]) -> Result<(), LineError> {
    let mut order: Vec<usize> = (0..members.len()).collect();
    order.sort_unstable_by(|&a, &b| members[a].key.cmp(&members[b].key).then(a.cmp(&b)));
    let first_repeat = order
        .windows(2)
        .filter(|w| members[w[0]].key == members[w[1]].key)
        .map(|w| w[1])
        .min();
    match first_repeat {
        Some(i) => Err(duplicate(
            positions.get(i).copied().unwrap_or(0),
            members[i].key.clone(),
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lenient(text: &str) -> (String, Leniency) {
        match parse_json_text_lenient(text) {
            Ok((raw, l)) => (super::super::decode::to_value(raw).to_string(), l),
            Err(e) => panic!("{text}: {e:?}"),
        }
    }

    /// The lenient reading, as JavaScript's `JSON.parse` reads: a lone surrogate is U+FFFD and
    /// the escape after a high one that is not its low half is a character of its own; a
    /// repeated name keeps the first place and the last value, at any depth and object size.
    /// The strict parser refuses all of it.
    #[test]
    fn lenient_reads_lone_surrogates_and_repeated_names() {
        let cases = [
            (r#"["a\ud83d"]"#, r#"["a�"]"#, (1, 0)),
            (r#"["\ud83d\u0041\ude00"]"#, r#"["�A�"]"#, (2, 0)),
            (r#"["\ud83d\ude00"]"#, r#"["😀"]"#, (0, 0)),
            (r#"{"a":1,"b":2,"a":3}"#, r#"{"a":3,"b":2}"#, (0, 1)),
            (
                r#"{"x":{"k":[1],"k":{"k":0,"k":1}}}"#,
                r#"{"x":{"k":{"k":1}}}"#,
                (0, 2),
            ),
        ];
        for (text, want, (lone, repeated)) in cases {
            let (got, l) = lenient(text);
            assert_eq!(got, want, "{text}");
            assert_eq!(
                (l.lone_surrogates, l.repeated_names),
                (lone, repeated),
                "{text}"
            );
            assert_eq!(
                parse_json_text(text).is_err(),
                lone + repeated > 0,
                "{text}"
            );
        }
        let many: Vec<String> = (0..40).map(|i| format!("\"m{i}\":{i}")).collect();
        let text = format!("{{{},\"m3\":\"last\"}}", many.join(","));
        let (got, l) = lenient(&text);
        assert!(
            got.starts_with(r#"{"m0":0,"m1":1,"m2":2,"m3":"last","m4":4"#),
            "{got}"
        );
        assert_eq!(l.repeated_names, 1);
    }
}
