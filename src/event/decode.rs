//! From the parsed tree ([`Raw`]) to typed events: member lookup, type checks, enum values,
//! the envelope rules of docs/events.md §2 and the header rule of §4.
//!
//! Strings move out of the tree (no copy when the parser already owns them); numbers in typed
//! integer fields are read from the line's text without allocating; numbers in open values keep
//! their text.

use std::borrow::Cow;
use std::fmt;

use super::blocks::ToolContent;
use super::data::*;
use super::error::{LineError, ParseErrorKind, Quoted};
use super::opt::Opt;
use super::parse::{Raw, RawKind, RawMember};
use super::scan::same_name;
use super::types::{with_event_types, Event, EventData, SessionHeader, SurfaceOp};
use super::value::{parse_i64, parse_u64, Map, Member, Number, Value};

/// Where a member sits in the line, e.g. `data.message.content[2].text`. Built on the stack as
/// decoding descends; turned into text only for an error.
#[derive(Clone, Copy)]
pub(crate) enum Path<'p> {
    /// The line's object.
    Root,
    /// Member `.1` of the object at `.0`.
    Key(&'p Path<'p>, &'p str),
    /// Item `.1` of the array at `.0`.
    Index(&'p Path<'p>, usize),
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Path::Root => Ok(()),
            Path::Key(Path::Root, key) => f.write_str(key),
            Path::Key(parent, key) => write!(f, "{parent}.{key}"),
            Path::Index(parent, i) => write!(f, "{parent}[{i}]"),
        }
    }
}

/// A type that can be read from a parsed JSON value at `path`.
pub(crate) trait Decode: Sized {
    /// Reads the value, or says why it does not fit.
    fn decode(raw: Raw<'_>, path: Path<'_>) -> Result<Self, LineError>;

    /// The value of an absent member; `None` when the member is required.
    fn when_absent() -> Option<Self> {
        None
    }
}

/// The error for a value of the wrong JSON type (or an integer out of range).
pub(crate) fn mistyped(raw: &Raw<'_>, path: Path<'_>, expected: &'static str) -> LineError {
    let found = match &raw.kind {
        RawKind::Number(text) => format!("the number {text}"),
        other => other.describe().to_owned(),
    };
    LineError::at(
        raw.pos,
        ParseErrorKind::MistypedMember {
            path: path.to_string(),
            expected,
            found,
        },
    )
}

/// The error for a required member that is absent from the object at `obj_pos`.
pub(crate) fn missing(obj_pos: usize, path: Path<'_>) -> LineError {
    LineError::at(
        obj_pos,
        ParseErrorKind::MissingMember {
            path: path.to_string(),
        },
    )
}

/// The members of an object (and where it starts), or a mistyped error.
pub(crate) fn expect_object<'a>(
    raw: Raw<'a>,
    path: Path<'_>,
) -> Result<(usize, Vec<RawMember<'a>>), LineError> {
    match raw.kind {
        RawKind::Object(members) => Ok((raw.pos, members)),
        _ => Err(mistyped(&raw, path, "an object")),
    }
}

/// Sorts an object's members into the slots of the known `keys` (in that order) and the rest,
/// which become the `extra` map in their original order.
pub(crate) fn split_members<'a, const N: usize>(
    members: Vec<RawMember<'a>>,
    keys: &[&str; N],
) -> ([Option<Raw<'a>>; N], Map) {
    let mut slots = [const { None }; N];
    let mut extra = Vec::new();
    for member in members {
        match keys.iter().position(|k| same_name(k, &member.key)) {
            Some(i) => slots[i] = Some(member.value),
            None => extra.push(Member {
                key: member.key.into_owned(),
                value: to_value(member.value),
            }),
        }
    }
    (slots, Map::from_unique(extra))
}

/// Decodes member `key` of the object at `path` (which starts at `obj_pos`) from its slot.
pub(crate) fn field<T: Decode>(
    slot: Option<Raw<'_>>,
    key: &str,
    path: Path<'_>,
    obj_pos: usize,
) -> Result<T, LineError> {
    let path = Path::Key(&path, key);
    match slot {
        Some(raw) => T::decode(raw, path),
        None => T::when_absent().ok_or_else(|| missing(obj_pos, path)),
    }
}

/// Removes member `key` from `members` and checks that it is the string `expected` (a message's
/// `role`, the header's `type`).
pub(crate) fn take_constant(
    members: &mut Vec<RawMember<'_>>,
    key: &str,
    expected: &'static str,
    path: Path<'_>,
    obj_pos: usize,
) -> Result<(), LineError> {
    let path = Path::Key(&path, key);
    let i = members
        .iter()
        .position(|m| m.key == key)
        .ok_or_else(|| missing(obj_pos, path))?;
    let value = members.remove(i).value;
    match &value.kind {
        RawKind::String(s) if s == expected => Ok(()),
        RawKind::String(s) => Err(LineError::at(
            value.pos,
            ParseErrorKind::WrongConstant {
                path: path.to_string(),
                expected,
                found: s.clone().into_owned(),
            },
        )),
        _ => Err(mistyped(&value, path, "a string")),
    }
}

/// Converts a parsed value into an owned [`Value`] (numbers keep their text).
pub(crate) fn to_value(raw: Raw<'_>) -> Value {
    match raw.kind {
        RawKind::Null => Value::Null,
        RawKind::Bool(b) => Value::Bool(b),
        RawKind::Number(text) => Value::Number(Number::from_checked(text)),
        RawKind::String(s) => Value::String(s.into_owned()),
        RawKind::Array(items) => Value::Array(items.into_iter().map(to_value).collect()),
        RawKind::Object(members) => Value::Object(to_map(members)),
    }
}

/// Converts parsed members into an owned [`Map`], in order.
pub(crate) fn to_map(members: Vec<RawMember<'_>>) -> Map {
    Map::from_unique(
        members
            .into_iter()
            .map(|m| Member {
                key: m.key.into_owned(),
                value: to_value(m.value),
            })
            .collect(),
    )
}

impl Decode for u64 {
    fn decode(raw: Raw<'_>, path: Path<'_>) -> Result<Self, LineError> {
        match raw.kind {
            RawKind::Number(text) => parse_u64(text).or_else(|| minus_zero(text)),
            _ => None,
        }
        .ok_or_else(|| mistyped(&raw, path, "an unsigned integer"))
    }
}

impl Decode for i64 {
    fn decode(raw: Raw<'_>, path: Path<'_>) -> Result<Self, LineError> {
        match raw.kind {
            RawKind::Number(text) => parse_i64(text).or_else(|| minus_zero(text).map(|_| 0)),
            _ => None,
        }
        .ok_or_else(|| mistyped(&raw, path, "an integer"))
    }
}

/// `-0` in a typed integer member (`seq`, `time`, `turn`, `step`, token counts) is the integer 0:
/// JSON's grammar allows it and it equals 0 as a JSON value, so like any non-canonical input it
/// is accepted and exported in canonical form, `0`. (`-0.0`, `0.0`, `1e2` are not integers and
/// stay refused.)
fn minus_zero(text: &str) -> Option<u64> {
    (text == "-0").then_some(0)
}

impl Decode for bool {
    fn decode(raw: Raw<'_>, path: Path<'_>) -> Result<Self, LineError> {
        match raw.kind {
            RawKind::Bool(b) => Ok(b),
            _ => Err(mistyped(&raw, path, "a boolean")),
        }
    }
}

impl Decode for String {
    fn decode(raw: Raw<'_>, path: Path<'_>) -> Result<Self, LineError> {
        match raw.kind {
            RawKind::String(s) => Ok(s.into_owned()),
            _ => Err(mistyped(&raw, path, "a string")),
        }
    }
}

impl Decode for Value {
    fn decode(raw: Raw<'_>, _path: Path<'_>) -> Result<Self, LineError> {
        Ok(to_value(raw))
    }
}

impl Decode for Map {
    fn decode(raw: Raw<'_>, path: Path<'_>) -> Result<Self, LineError> {
        let (_, members) = expect_object(raw, path)?;
        Ok(to_map(members))
    }
}

impl<T: Decode> Decode for Vec<T> {
    fn decode(raw: Raw<'_>, path: Path<'_>) -> Result<Self, LineError> {
        match raw.kind {
            RawKind::Array(items) => items
                .into_iter()
                .enumerate()
                .map(|(i, item)| T::decode(item, Path::Index(&path, i)))
                .collect(),
            _ => Err(mistyped(&raw, path, "an array")),
        }
    }
}

impl<T: Decode> Decode for Opt<T> {
    fn decode(raw: Raw<'_>, path: Path<'_>) -> Result<Self, LineError> {
        match raw.kind {
            RawKind::Null => Ok(Opt::Null),
            _ => T::decode(raw, path).map(Opt::Present),
        }
    }

    fn when_absent() -> Option<Self> {
        Some(Opt::Absent)
    }
}

impl Decode for ToolContent {
    fn decode(raw: Raw<'_>, path: Path<'_>) -> Result<Self, LineError> {
        match raw.kind {
            RawKind::String(s) => Ok(ToolContent::Text(s.into_owned())),
            RawKind::Array(_) => Vec::decode(raw, path).map(ToolContent::Blocks),
            _ => Err(mistyped(&raw, path, "a string or an array of blocks")),
        }
    }
}

/// Reads a member that holds one of a fixed set of strings.
fn decode_name<T>(
    raw: Raw<'_>,
    path: Path<'_>,
    from_name: fn(&str) -> Option<T>,
    allowed: &'static [&'static str],
) -> Result<T, LineError> {
    match &raw.kind {
        RawKind::String(s) => from_name(s).ok_or_else(|| {
            LineError::at(
                raw.pos,
                ParseErrorKind::UnknownEnumValue {
                    path: path.to_string(),
                    value: s.clone().into_owned(),
                    allowed,
                },
            )
        }),
        _ => Err(mistyped(&raw, path, "a string")),
    }
}

impl Decode for ReasonKind {
    fn decode(raw: Raw<'_>, path: Path<'_>) -> Result<Self, LineError> {
        decode_name(raw, path, ReasonKind::from_name, ReasonKind::NAMES)
    }
}

impl Decode for Decision {
    fn decode(raw: Raw<'_>, path: Path<'_>) -> Result<Self, LineError> {
        decode_name(raw, path, Decision::from_name, Decision::NAMES)
    }
}

/// `surfaceOp`: `"append"` or `{"op":"replace","startSeq":a,"endSeq":b, …}`. Every way of
/// getting it wrong is an [`ParseErrorKind::InvalidSurfaceOp`], placed where the fault is.
fn decode_surface_op(raw: Raw<'_>) -> Result<SurfaceOp, LineError> {
    let pos = raw.pos;
    let invalid = |offset: Option<usize>, detail: String| {
        LineError::at(
            offset.unwrap_or(pos),
            ParseErrorKind::InvalidSurfaceOp { detail },
        )
    };
    match raw.kind {
        RawKind::String(s) if s == "append" => Ok(SurfaceOp::Append),
        RawKind::String(s) => Err(invalid(None, format!("unknown operation {}", Quoted(&s)))),
        RawKind::Object(members) => {
            let path = Path::Key(&Path::Root, "surfaceOp");
            let ([op, start, end], extra) = split_members(members, &["op", "startSeq", "endSeq"]);
            match op {
                Some(Raw {
                    kind: RawKind::String(s),
                    ..
                }) if s == "replace" => {}
                Some(Raw {
                    kind: RawKind::String(s),
                    pos,
                }) => return Err(invalid(Some(pos), format!("unknown op {}", Quoted(&s)))),
                Some(other) => {
                    let found = other.kind.describe();
                    return Err(invalid(
                        Some(other.pos),
                        format!("op must be a string, found {found}"),
                    ));
                }
                None => return Err(invalid(None, "missing member surfaceOp.op".to_owned())),
            }
            let as_invalid = |e: LineError| invalid(e.offset, e.kind.to_string());
            let start_seq = field(start, "startSeq", path, pos).map_err(as_invalid)?;
            let end_seq = field(end, "endSeq", path, pos).map_err(as_invalid)?;
            Ok(SurfaceOp::Replace {
                start_seq,
                end_seq,
                extra,
            })
        }
        other => Err(invalid(None, format!("found {}", other.describe()))),
    }
}

macro_rules! decode_data {
    ($($variant:ident($data:ident) = $name:literal,)*) => {
        /// Decodes `data` by the event's `type`; an unknown type keeps its object verbatim.
        fn decode_data(
            type_name: Cow<'_, str>,
            raw: Raw<'_>,
            path: Path<'_>,
        ) -> Result<EventData, LineError> {
            match &*type_name {
                $($name => $data::decode(raw, path).map(EventData::$variant),)*
                _ => Ok(EventData::Unknown(UnknownEvent {
                    data: Map::decode(raw, path)?,
                    type_name: type_name.into_owned(),
                })),
            }
        }
    };
}
with_event_types!(decode_data);

/// One decoded line: the session header (first line only) or an event.
#[allow(clippy::large_enum_variant)] // see `Line`
pub(crate) enum Decoded {
    /// The session header.
    Header(SessionHeader),
    /// An event, and the byte offset of its `seq` value (for sequence errors).
    Event(Event, usize),
}

/// True when an object is a session header: its `type` is `"session"` and it has no `seq`.
fn is_header(members: &[RawMember<'_>]) -> bool {
    let mut session = false;
    for m in members {
        match &*m.key {
            "seq" => return false,
            "type" => session = matches!(&m.value.kind, RawKind::String(s) if s == "session"),
            _ => {}
        }
    }
    session
}

/// Decodes one line's object. A header is recognised only when `allow_header` (the first line).
pub(crate) fn decode_line(raw: Raw<'_>, allow_header: bool) -> Result<Decoded, LineError> {
    match raw.kind {
        RawKind::Object(members) if allow_header && is_header(&members) => {
            let raw = Raw {
                pos: raw.pos,
                kind: RawKind::Object(members),
            };
            SessionHeader::decode(raw, Path::Root).map(Decoded::Header)
        }
        kind => {
            let (event, seq_pos) = decode_event(Raw { pos: raw.pos, kind })?;
            Ok(Decoded::Event(event, seq_pos))
        }
    }
}

/// Decodes an event line's object; also returns the byte offset of its `seq` value.
pub(crate) fn decode_event(raw: Raw<'_>) -> Result<(Event, usize), LineError> {
    decode_event_with(raw, true).map(|(event, seq_pos, _)| (event, seq_pos))
}

/// Which of `seq` and `time` a draft line gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Given {
    pub(crate) seq: bool,
    pub(crate) time: bool,
}

/// Decodes an event object; with `require_envelope` off, `seq` and `time` may be left out (they
/// are then 0 in the event, and [`Given`] says so).
pub(crate) fn decode_event_with(
    raw: Raw<'_>,
    require_envelope: bool,
) -> Result<(Event, usize, Given), LineError> {
    let root = Path::Root;
    let (obj_pos, members) = expect_object(raw, root)?;
    let ([ty, seq, time, data, surface_op, source_event_seqs], extra) = split_members(
        members,
        &[
            "type",
            "seq",
            "time",
            "data",
            "surfaceOp",
            "sourceEventSeqs",
        ],
    );
    let type_name = match ty {
        Some(Raw {
            kind: RawKind::String(s),
            ..
        }) => s,
        Some(other) => return Err(mistyped(&other, Path::Key(&root, "type"), "a string")),
        None => return Err(missing(obj_pos, Path::Key(&root, "type"))),
    };
    let seq_pos = seq.as_ref().map_or(obj_pos, |raw| raw.pos);
    let given = Given {
        seq: seq.is_some(),
        time: time.is_some(),
    };
    let seq = if given.seq || require_envelope {
        field(seq, "seq", root, obj_pos)?
    } else {
        0
    };
    let time = if given.time || require_envelope {
        field(time, "time", root, obj_pos)?
    } else {
        0
    };
    let data_path = Path::Key(&root, "data");
    let data = match data {
        Some(raw) => decode_data(type_name, raw, data_path)?,
        None => return Err(missing(obj_pos, data_path)),
    };
    let surface_op = match surface_op {
        None => None,
        Some(raw) => {
            let type_name = data.type_name().to_owned();
            match data.event_type() {
                None => {
                    return Err(LineError::at(
                        raw.pos,
                        ParseErrorKind::SurfaceOpOnUnknownType { type_name },
                    ))
                }
                Some(t) if !t.is_surface() => {
                    return Err(LineError::at(
                        raw.pos,
                        ParseErrorKind::SurfaceOpOnNonSurface { type_name },
                    ))
                }
                Some(_) => Some(decode_surface_op(raw)?),
            }
        }
    };
    let source_event_seqs = match source_event_seqs {
        None => None,
        Some(raw) => Some(Vec::<u64>::decode(
            raw,
            Path::Key(&root, "sourceEventSeqs"),
        )?),
    };
    let event = Event {
        seq,
        time,
        data,
        surface_op,
        source_event_seqs,
        extra,
    };
    Ok((event, seq_pos, given))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_render_like_javascript() {
        let root = Path::Root;
        let data = Path::Key(&root, "data");
        let content = Path::Key(&data, "content");
        let item = Path::Index(&content, 2);
        let text = Path::Key(&item, "text");
        assert_eq!(text.to_string(), "data.content[2].text");
        assert_eq!(
            Path::Index(&Path::Key(&root, "sourceEventSeqs"), 0).to_string(),
            "sourceEventSeqs[0]"
        );
        assert_eq!(root.to_string(), "");
    }
}
