//! The canonical writer (docs/events.md §4): compact JSON, known members in canonical order then
//! the unknown ones, strings escaped as serde_json escapes them, numbers as their text.
//!
//! Every type is written by one [`WriteJson`] impl, and each archived type (`ArchivedEvent`, …)
//! by an impl generated from the same body, so export can write straight from a mapped archive
//! without deserializing. The member tables live in `schema.rs`.

use std::fmt;

use rkyv::boxed::ArchivedBox;
use rkyv::niche::niched_option::NichedOption;
use rkyv::niche::niching::Niching;
use rkyv::option::ArchivedOption;
use rkyv::rend::{i64_le, u64_le};
use rkyv::string::ArchivedString;
use rkyv::vec::ArchivedVec;
use rkyv::Archive;

use super::blocks::{ArchivedToolContent, ToolContent};
use super::data::{ArchivedDecision, ArchivedReasonKind, Decision, ReasonKind};
use super::opt::{ArchivedOpt, Opt};
use super::scan::find_special;
use super::types::{
    with_event_types, ArchivedEvent, ArchivedEventData, ArchivedSessionHeader, ArchivedSurfaceOp,
    Event, EventData, SessionHeader, SurfaceOp,
};
use super::value::{ArchivedMap, ArchivedNumber, ArchivedValue, Map, Number, Value};

/// A value that writes itself as canonical JSON.
pub(crate) trait WriteJson {
    /// Appends the canonical JSON text of `self` to `out`.
    fn write_json(&self, out: &mut Vec<u8>);

    /// True for an optional member that is absent: [`ObjectWriter::member`] leaves it out.
    fn is_absent(&self) -> bool {
        false
    }
}

/// Writes one JSON object member by member, placing the commas.
pub(crate) struct ObjectWriter<'o> {
    out: &'o mut Vec<u8>,
    first: bool,
}

impl<'o> ObjectWriter<'o> {
    /// Opens the object.
    pub(crate) fn begin(out: &'o mut Vec<u8>) -> Self {
        out.push(b'{');
        Self { out, first: true }
    }

    fn separator(&mut self) {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
    }

    /// Writes a member whose name and value are fixed JSON text: `key` is `"\"role\":"`,
    /// `value` is `"\"user\""`.
    pub(crate) fn raw_member(&mut self, key: &str, value: &str) {
        self.separator();
        self.out.extend_from_slice(key.as_bytes());
        self.out.extend_from_slice(value.as_bytes());
    }

    /// Writes a member (`key` is the quoted name and colon, e.g. `"\"seq\":"`) unless the
    /// value is an absent optional.
    pub(crate) fn member<T: WriteJson + ?Sized>(&mut self, key: &str, value: &T) {
        if value.is_absent() {
            return;
        }
        self.separator();
        self.out.extend_from_slice(key.as_bytes());
        value.write_json(self.out);
    }

    /// Writes a member whose name needs escaping.
    fn named_member<T: WriteJson + ?Sized>(&mut self, key: &str, value: &T) {
        self.separator();
        write_str(key, self.out);
        self.out.push(b':');
        value.write_json(self.out);
    }

    /// Writes the unknown members, in their order.
    pub(crate) fn extra(&mut self, extra: &impl Members) {
        extra.write_members(self);
    }

    /// Writes the unknown members but the one named `skip`, in their order.
    pub(crate) fn extra_except(&mut self, extra: &impl Members, skip: &str) {
        extra.write_members_except(self, skip);
    }

    /// Closes the object.
    pub(crate) fn end(self) {
        self.out.push(b'}');
    }
}

/// A map whose members can be written into an open object: [`Map`] and [`ArchivedMap`].
pub(crate) trait Members {
    /// Writes each member into `w`.
    fn write_members(&self, w: &mut ObjectWriter<'_>);

    /// Writes each member but the one named `skip` into `w`.
    fn write_members_except(&self, w: &mut ObjectWriter<'_>, skip: &str);
}

impl Members for Map {
    fn write_members(&self, w: &mut ObjectWriter<'_>) {
        for (key, value) in self.iter() {
            w.named_member(key, value);
        }
    }

    fn write_members_except(&self, w: &mut ObjectWriter<'_>, skip: &str) {
        for (key, value) in self.iter().filter(|(key, _)| *key != skip) {
            w.named_member(key, value);
        }
    }
}

impl<T: Members> Members for ArchivedBox<T> {
    fn write_members(&self, w: &mut ObjectWriter<'_>) {
        self.get().write_members(w);
    }

    fn write_members_except(&self, w: &mut ObjectWriter<'_>, skip: &str) {
        self.get().write_members_except(w, skip);
    }
}

impl Members for ArchivedMap {
    fn write_members(&self, w: &mut ObjectWriter<'_>) {
        for (key, value) in self.iter() {
            w.named_member(key, value);
        }
    }

    fn write_members_except(&self, w: &mut ObjectWriter<'_>, skip: &str) {
        for (key, value) in self.iter().filter(|(key, _)| *key != skip) {
            w.named_member(key, value);
        }
    }
}

/// Appends `s` as a JSON string, escaped as serde_json escapes: `\"`, `\\`, `\n`, `\r`, `\t`,
/// `\b`, `\f`, other control characters as `\u00xx` (lowercase hex); everything else raw.
pub(crate) fn write_str(s: &str, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut start = 0;
    loop {
        let i = find_special(bytes, start);
        out.extend_from_slice(&bytes[start..i]);
        let Some(&b) = bytes.get(i) else { break };
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0C => out.extend_from_slice(b"\\f"),
            _ => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 0xF)],
            ]),
        }
        start = i + 1;
    }
    out.push(b'"');
}

/// Appends `n` in plain decimal.
pub(crate) fn write_u64(mut n: u64, out: &mut Vec<u8>) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

/// Appends `n` in plain decimal.
pub(crate) fn write_i64(n: i64, out: &mut Vec<u8>) {
    if n < 0 {
        out.push(b'-');
    }
    write_u64(n.unsigned_abs(), out);
}

impl WriteJson for str {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_str(self, out);
    }
}

impl WriteJson for String {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_str(self, out);
    }
}

impl WriteJson for ArchivedString {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_str(self.as_str(), out);
    }
}

impl WriteJson for u64 {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_u64(*self, out);
    }
}

impl WriteJson for u64_le {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_u64(self.to_native(), out);
    }
}

impl WriteJson for i64 {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_i64(*self, out);
    }
}

impl WriteJson for i64_le {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_i64(self.to_native(), out);
    }
}

impl WriteJson for bool {
    fn write_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(if *self { b"true" } else { b"false" });
    }
}

/// Writes the items of a slice as a JSON array.
fn write_array<T: WriteJson>(items: &[T], out: &mut Vec<u8>) {
    out.push(b'[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        item.write_json(out);
    }
    out.push(b']');
}

impl<T: WriteJson> WriteJson for Vec<T> {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_array(self, out);
    }
}

impl<T: WriteJson> WriteJson for ArchivedVec<T> {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_array(self.as_slice(), out);
    }
}

impl<T: WriteJson> WriteJson for Option<T> {
    fn write_json(&self, out: &mut Vec<u8>) {
        match self {
            Some(v) => v.write_json(out),
            None => out.extend_from_slice(b"null"),
        }
    }

    fn is_absent(&self) -> bool {
        self.is_none()
    }
}

impl<T: WriteJson> WriteJson for ArchivedOption<T> {
    fn write_json(&self, out: &mut Vec<u8>) {
        match self.as_ref() {
            Some(v) => v.write_json(out),
            None => out.extend_from_slice(b"null"),
        }
    }

    fn is_absent(&self) -> bool {
        self.is_none()
    }
}

impl<T: WriteJson> WriteJson for ArchivedBox<T> {
    fn write_json(&self, out: &mut Vec<u8>) {
        self.get().write_json(out);
    }

    fn is_absent(&self) -> bool {
        self.get().is_absent()
    }
}

/// An optional member archived as a nullable pointer (`MapNiche<AsBox>`): absent when null.
impl<T: WriteJson, N: Niching<T> + ?Sized> WriteJson for NichedOption<T, N> {
    fn write_json(&self, out: &mut Vec<u8>) {
        match self.as_ref() {
            Some(v) => v.write_json(out),
            None => out.extend_from_slice(b"null"),
        }
    }

    fn is_absent(&self) -> bool {
        self.is_none()
    }
}

impl<T: WriteJson> WriteJson for Opt<T> {
    fn write_json(&self, out: &mut Vec<u8>) {
        match self {
            Opt::Present(v) => v.write_json(out),
            Opt::Absent | Opt::Null => out.extend_from_slice(b"null"),
        }
    }

    fn is_absent(&self) -> bool {
        Opt::is_absent(self)
    }
}

impl<T: Archive> WriteJson for ArchivedOpt<T>
where
    T::Archived: WriteJson,
{
    fn write_json(&self, out: &mut Vec<u8>) {
        match self {
            ArchivedOpt::Present(v) => v.write_json(out),
            ArchivedOpt::Absent | ArchivedOpt::Null => out.extend_from_slice(b"null"),
        }
    }

    fn is_absent(&self) -> bool {
        ArchivedOpt::is_absent(self)
    }
}

impl WriteJson for Number {
    fn write_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.as_str().as_bytes());
    }
}

impl WriteJson for ArchivedNumber {
    fn write_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.as_str().as_bytes());
    }
}

/// Implements [`WriteJson`] for an owned type and its archived twin from one body.
macro_rules! write_both {
    ($($ty:ty),+ => |$self:ident, $out:ident| $body:block) => {
        $(impl WriteJson for $ty {
            fn write_json(&$self, $out: &mut Vec<u8>) $body
        })+
    };
}

write_both!(Map, ArchivedMap => |self, out| {
    let mut w = ObjectWriter::begin(out);
    w.extra(self);
    w.end();
});

// `Self::` paths name the owned and the archived variants alike.
write_both!(Value, ArchivedValue => |self, out| {
    match self {
        Self::Null => out.extend_from_slice(b"null"),
        Self::Bool(b) => b.write_json(out),
        Self::Number(n) => n.write_json(out),
        Self::String(s) => s.write_json(out),
        Self::Array(items) => items.write_json(out),
        Self::Object(map) => map.write_json(out),
    }
});

write_both!(ReasonKind, ArchivedReasonKind, Decision, ArchivedDecision => |self, out| {
    write_str(self.as_str(), out);
});

write_both!(ToolContent, ArchivedToolContent => |self, out| {
    match self {
        Self::Text(s) => s.write_json(out),
        Self::Blocks(blocks) => blocks.write_json(out),
    }
});

write_both!(SurfaceOp, ArchivedSurfaceOp => |self, out| {
    match self {
        Self::Append => out.extend_from_slice(b"\"append\""),
        Self::Replace { start_seq, end_seq, extra } => {
            let mut w = ObjectWriter::begin(out);
            w.raw_member("\"op\":", "\"replace\"");
            w.member("\"startSeq\":", start_seq);
            w.member("\"endSeq\":", end_seq);
            w.extra(extra);
            w.end();
        }
    }
});

macro_rules! write_data {
    ($($variant:ident($data:ident) = $name:literal,)*) => {
        // `EventData` writes its payload: the `data` object.
        write_both!(EventData, ArchivedEventData => |self, out| {
            match self {
                $(Self::$variant(data) => data.write_json(out),)*
                Self::Unknown(unknown) => unknown.data.write_json(out),
            }
        });
    };
}
with_event_types!(write_data);

write_both!(Event, ArchivedEvent => |self, out| {
    let mut w = ObjectWriter::begin(out);
    w.member("\"type\":", self.data.type_name());
    w.member("\"seq\":", &self.seq);
    w.member("\"time\":", &self.time);
    w.member("\"data\":", &self.data);
    w.member("\"surfaceOp\":", &self.surface_op);
    w.member("\"sourceEventSeqs\":", &self.source_event_seqs);
    w.extra(&self.extra);
    w.end();
});

/// Canonical text as a `String`. The writer only ever emits UTF-8 (it copies `str`s and ASCII),
/// so the lossy conversion never replaces anything.
fn into_string(buf: Vec<u8>) -> String {
    String::from_utf8(buf).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// `write_canonical` and `to_canonical_string` on the public types.
macro_rules! canonical_api {
    ($($ty:ty),+) => {
        $(impl $ty {
            /// Appends the canonical JSON line (without the `\n`) to `out`.
            pub fn write_canonical(&self, out: &mut Vec<u8>) {
                self.write_json(out);
            }

            /// The canonical JSON line (without the `\n`).
            pub fn to_canonical_string(&self) -> String {
                let mut out = Vec::with_capacity(256);
                self.write_json(&mut out);
                into_string(out)
            }

            /// The event as a lossless JSON [`Value`](super::Value): the canonical JSON object,
            /// members in canonical order, numbers as written (`to_value().to_string()` equals
            /// [`to_canonical_string`](Self::to_canonical_string)).
            pub fn to_value(&self) -> super::Value {
                let text = self.to_canonical_string();
                // The canonical writer's output always parses; were it ever not to, the text is
                // kept whole rather than lost.
                super::parse_json(&text).unwrap_or(super::Value::String(text))
            }
        })+
    };
}
canonical_api!(Event, ArchivedEvent, SessionHeader, ArchivedSessionHeader);

/// `Display` as canonical compact JSON.
macro_rules! display_json {
    ($($ty:ty),+) => {
        $(impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let mut out = Vec::new();
                self.write_json(&mut out);
                f.write_str(&into_string(out))
            }
        })+
    };
}
display_json!(
    Value,
    ArchivedValue,
    Map,
    ArchivedMap,
    ToolContent,
    ArchivedToolContent
);

#[cfg(test)]
mod tests {
    use super::*;

    fn escaped(s: &str) -> String {
        let mut out = Vec::new();
        write_str(s, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn strings_are_escaped_like_serde_json() {
        let mut all = String::new();
        for c in (0u32..0x80).chain([0x7F, 0x2028, 0x1F680, 0xE9]) {
            all.push(char::from_u32(c).unwrap());
        }
        all.push_str("/\\\"end");
        assert_eq!(escaped(&all), serde_json::to_string(&all).unwrap());
        assert_eq!(escaped(""), "\"\"");
        assert_eq!(escaped("\u{1}\u{1f}"), "\"\\u0001\\u001f\"");
    }

    #[test]
    fn integers_are_plain_decimal() {
        for n in [0u64, 1, 9, 10, 99, 1_755_000_000_000, u64::MAX] {
            let mut out = Vec::new();
            write_u64(n, &mut out);
            assert_eq!(out, n.to_string().as_bytes());
        }
        for n in [i64::MIN, -1, 0, i64::MAX] {
            let mut out = Vec::new();
            write_i64(n, &mut out);
            assert_eq!(out, n.to_string().as_bytes());
        }
    }
}
