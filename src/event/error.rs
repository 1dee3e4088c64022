//! Why a JSONL line was refused: [`ParseError`] and its [`ParseErrorKind`].

use std::fmt;

/// A refused line: where (line, column) and why ([`ParseErrorKind`]).
///
/// `Display` reads like `line 3, column 17: duplicate member "seq"`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// The 1-based line number in the input.
    pub line: u64,
    /// The 1-based column, counted in characters (not bytes), when the error has a place on the
    /// line. A leading BOM on the first line is not counted.
    pub column: Option<u64>,
    /// What is wrong.
    pub kind: ParseErrorKind,
}

/// The reason a line was refused. One variant per refusal rule, so callers and tests can match.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParseErrorKind {
    /// The line is not valid UTF-8; the column points at the first bad byte.
    InvalidUtf8,
    /// The line is empty or holds only whitespace (blank lines are refused, also at the end).
    BlankLine,
    /// The text is not JSON: `expected` says what the grammar wanted, `found` what is there.
    Syntax {
        /// What would have been valid here, e.g. `"',' or '}'"`.
        expected: &'static str,
        /// What the line holds instead, e.g. `"'x'"` or `"end of line"`.
        found: String,
    },
    /// A complete JSON value is followed by more non-whitespace text.
    TrailingCharacters,
    /// The line holds a JSON value that is not an object.
    NotAnObject {
        /// The kind of value found, e.g. `"an array"`.
        found: &'static str,
    },
    /// An object names the same member twice (at any depth); the column is the second one.
    DuplicateMember {
        /// The repeated member name.
        name: String,
    },
    /// `NaN`, `Infinity` or `-Infinity`: JSON has no such numbers.
    NonFiniteNumber {
        /// The literal as written.
        literal: &'static str,
    },
    /// A `\uXXXX` escape names half of a surrogate pair without its other half.
    LoneSurrogate {
        /// The code unit, e.g. `0xD83D`.
        code_unit: u16,
    },
    /// A control character (below U+0020) appears unescaped inside a string.
    ControlCharacter {
        /// The character's code.
        code: u8,
    },
    /// The line is longer than the reader accepts (see
    /// [`JsonlReader::with_max_line`](crate::event::JsonlReader::with_max_line)); nothing of it
    /// was parsed.
    LineTooLong {
        /// The most bytes a line may hold, its line end included.
        limit: u64,
    },
    /// Objects and arrays are nested deeper than [`MAX_DEPTH`](crate::event::MAX_DEPTH).
    TooDeep {
        /// The limit that was exceeded.
        limit: usize,
    },
    /// A required member is absent; the column is the object that lacks it.
    MissingMember {
        /// The member's path, e.g. `data.reason.kind`.
        path: String,
    },
    /// A member has the wrong JSON type or an integer out of range; the column is its value.
    MistypedMember {
        /// The member's path, e.g. `data.turn` or `sourceEventSeqs[2]`.
        path: String,
        /// What the format requires, e.g. `"an unsigned integer"`.
        expected: &'static str,
        /// What was found, e.g. `"a string"` or `"the number -1"`.
        found: String,
    },
    /// A member that takes one of a fixed set of strings has another one.
    UnknownEnumValue {
        /// The member's path, e.g. `data.reason.kind`.
        path: String,
        /// The value found.
        value: String,
        /// The values allowed.
        allowed: &'static [&'static str],
    },
    /// A member whose value is fixed (a message's `role`) has another value.
    WrongConstant {
        /// The member's path, e.g. `data.role`.
        path: String,
        /// The only value allowed.
        expected: &'static str,
        /// The value found.
        found: String,
    },
    /// `surfaceOp` is neither `"append"` nor a valid `{"op":"replace","startSeq":a,"endSeq":b}`.
    InvalidSurfaceOp {
        /// What is wrong with it.
        detail: String,
    },
    /// An event of an unknown type carries `surfaceOp` (its projection would be undefined).
    SurfaceOpOnUnknownType {
        /// The event's type.
        type_name: String,
    },
    /// An event of a known type that is not a surface event carries `surfaceOp`.
    SurfaceOpOnNonSurface {
        /// The event's type.
        type_name: String,
    },
    /// An event's `seq` is not the next one (the first event has seq 0, each next one +1).
    UnexpectedSeq {
        /// The seq the line should have had.
        expected: u64,
        /// The seq it has.
        found: u64,
    },
    /// Reading the input failed.
    Io {
        /// The I/O error's kind.
        kind: std::io::ErrorKind,
        /// The I/O error's message.
        message: String,
    },
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.column {
            Some(column) => write!(f, "line {}, column {}: {}", self.line, column, self.kind),
            None => write!(f, "line {}: {}", self.line, self.kind),
        }
    }
}

impl std::error::Error for ParseError {}

impl fmt::Display for ParseErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidUtf8 => f.write_str("invalid UTF-8"),
            Self::BlankLine => f.write_str("blank line (every line must hold one JSON object)"),
            Self::Syntax { expected, found } => write!(f, "expected {expected}, found {found}"),
            Self::TrailingCharacters => f.write_str("unexpected text after the JSON value"),
            Self::NotAnObject { found } => write!(f, "expected a JSON object, found {found}"),
            Self::DuplicateMember { name } => write!(f, "duplicate member {}", Quoted(name)),
            Self::NonFiniteNumber { literal } => {
                write!(f, "{literal} is not a JSON number (JSON has no NaN or infinities)")
            }
            Self::LoneSurrogate { code_unit } => {
                write!(f, "lone surrogate \\u{code_unit:04X} in a string escape")
            }
            Self::ControlCharacter { code } => write!(
                f,
                "unescaped control character U+{code:04X} in a string (write it as an escape)"
            ),
            Self::LineTooLong { limit } => write!(
                f,
                "the line is longer than {limit} bytes, the most a line may hold (no event that \
                 large can be stored; a file without line ends is not JSONL)"
            ),
            Self::TooDeep { limit } => {
                write!(f, "objects and arrays nested deeper than {limit} levels")
            }
            Self::MissingMember { path } => write!(f, "missing member {path}"),
            Self::MistypedMember {
                path,
                expected,
                found,
            } => write!(f, "{path}: expected {expected}, found {found}"),
            Self::UnknownEnumValue {
                path,
                value,
                allowed,
            } => {
                write!(f, "{path}: unknown value {}, expected one of ", Quoted(value))?;
                for (i, allowed) in allowed.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{}", Quoted(allowed))?;
                }
                Ok(())
            }
            Self::WrongConstant {
                path,
                expected,
                found,
            } => write!(
                f,
                "{path} must be {}, found {}",
                Quoted(expected),
                Quoted(found)
            ),
            Self::InvalidSurfaceOp { detail } => write!(
                f,
                "invalid surfaceOp: {detail} (expected \"append\" or \
                 {{\"op\":\"replace\",\"startSeq\":…,\"endSeq\":…}})"
            ),
            Self::SurfaceOpOnUnknownType { type_name } => write!(
                f,
                "event type {} is unknown and carries surfaceOp (its projection would be undefined)",
                Quoted(type_name)
            ),
            Self::SurfaceOpOnNonSurface { type_name } => write!(
                f,
                "event type {} is not a surface event and cannot carry surfaceOp",
                Quoted(type_name)
            ),
            Self::UnexpectedSeq { expected, found } => {
                write!(f, "seq {found} out of order: expected seq {expected}")
            }
            Self::Io { message, .. } => write!(f, "read failed: {message}"),
        }
    }
}

/// Displays a string in double quotes with JSON escapes, so odd names stay readable.
pub(crate) struct Quoted<'a>(pub(crate) &'a str);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = Vec::with_capacity(self.0.len() + 2);
        crate::event::write::write_str(self.0, &mut out);
        f.write_str(&String::from_utf8_lossy(&out))
    }
}

/// An error before it knows its line: a byte offset into the line (if it has a place) and the kind.
/// The kind is boxed to keep `Result`s small on the parser's hot path (errors are rare).
#[derive(Debug)]
pub(crate) struct LineError {
    pub(crate) offset: Option<usize>,
    pub(crate) kind: Box<ParseErrorKind>,
}

impl LineError {
    /// An error at byte `offset` of the line.
    pub(crate) fn at(offset: usize, kind: ParseErrorKind) -> Self {
        Self {
            offset: Some(offset),
            kind: Box::new(kind),
        }
    }

    /// An error of the whole line (no column).
    pub(crate) fn without_place(kind: ParseErrorKind) -> Self {
        Self {
            offset: None,
            kind: Box::new(kind),
        }
    }

    /// Places the error on line `line` of the input, turning the byte offset into a character
    /// column. `text` is the line as parsed (after any BOM); called on the error path only.
    pub(crate) fn at_line(self, line: u64, text: &[u8]) -> ParseError {
        ParseError {
            line,
            column: self.offset.map(|offset| char_column(text, offset)),
            kind: *self.kind,
        }
    }
}

impl LineError {
    /// Converts into a [`ParseError`] for a text that may span several lines: the line and the
    /// column are those of byte `offset` in `text`.
    pub(crate) fn in_text(self, text: &[u8]) -> ParseError {
        let (line, column) = match self.offset {
            Some(offset) => {
                let end = offset.min(text.len());
                let line_start = text[..end]
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |i| i + 1);
                let line = text[..line_start].iter().filter(|&&b| b == b'\n').count() as u64 + 1;
                (
                    line,
                    Some(char_column(&text[line_start..], end - line_start)),
                )
            }
            None => (1, None),
        };
        ParseError {
            line,
            column,
            kind: *self.kind,
        }
    }
}

/// The 1-based character column of byte `offset` in `text`: one plus the number of characters
/// that start before it. Works on any prefix, valid UTF-8 or not (continuation bytes don't count).
fn char_column(text: &[u8], offset: usize) -> u64 {
    let end = offset.min(text.len());
    let chars = text[..end].iter().filter(|&&b| b & 0xC0 != 0x80).count();
    chars as u64 + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_count_characters_not_bytes() {
        let text = "{\"é🚀\":x}".as_bytes();
        let x = text.iter().position(|&b| b == b'x').unwrap();
        assert_eq!(char_column(text, x), 7);
        assert_eq!(char_column(text, 0), 1);
        assert_eq!(char_column(text, 10_000), 9);
    }

    #[test]
    fn display_names_line_and_column() {
        let e = ParseError {
            line: 3,
            column: Some(17),
            kind: ParseErrorKind::DuplicateMember { name: "seq".into() },
        };
        assert_eq!(e.to_string(), "line 3, column 17: duplicate member \"seq\"");
        let e = ParseError {
            line: 2,
            column: None,
            kind: ParseErrorKind::UnexpectedSeq {
                expected: 1,
                found: 5,
            },
        };
        assert_eq!(e.to_string(), "line 2: seq 5 out of order: expected seq 1");
    }
}
