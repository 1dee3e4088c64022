//! The lossless JSON value: numbers keep their text, objects keep their member order.
//!
//! Used for every part of an event whose shape is open (tool inputs, `meta`, `detail`, unknown
//! members, unknown event types). Two values are equal when they would be written the same:
//! `1.0` and `1` are different numbers here, as they are different text in the log.

use std::fmt;

use rkyv::{Archive, Deserialize, Serialize};

/// A JSON value that round-trips exactly: number text and member order survive.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(serialize_bounds(
    __S: rkyv::ser::Writer + rkyv::ser::Allocator,
    __S::Error: rkyv::rancor::Source,
))]
#[rkyv(deserialize_bounds(__D::Error: rkyv::rancor::Source))]
#[rkyv(bytecheck(bounds(__C: rkyv::validation::ArchiveContext)))]
#[rkyv(derive(Debug))]
pub enum Value {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number, as its exact text.
    Number(Number),
    /// A string.
    String(String),
    /// An array.
    Array(#[rkyv(omit_bounds)] Vec<Value>),
    /// An object, members in order.
    Object(#[rkyv(omit_bounds)] Map),
}

/// A JSON number kept as the exact text it was read as (`1.0`, `1E+400`, `-0`,
/// `18446744073709551616`), so it is written back unchanged. Always valid JSON number grammar.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash)]
#[rkyv(derive(Debug))]
pub struct Number(String);

/// A JSON object: members in their order, no name twice.
///
/// The only ways to build one check for duplicates ([`Map::push`], [`Map::try_from`]); the parser
/// refuses duplicate names, so a `Map` never holds one.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[rkyv(derive(Debug))]
pub struct Map(Vec<Member>);

/// One member of a [`Map`].
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct Member {
    /// The member's name.
    pub key: String,
    /// The member's value.
    pub value: Value,
}

/// [`Map::push`] or [`Map::try_from`] was given a name the map already holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DuplicateKey(pub String);

impl fmt::Display for DuplicateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "duplicate member {:?}", self.0)
    }
}

impl std::error::Error for DuplicateKey {}

impl Number {
    /// The number `n`.
    pub fn from_u64(n: u64) -> Self {
        Self(n.to_string())
    }

    /// The number `n`.
    pub fn from_i64(n: i64) -> Self {
        Self(n.to_string())
    }

    /// `text` as a number if it follows the JSON number grammar
    /// (`-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`), else `None`.
    pub fn parse(text: &str) -> Option<Self> {
        (number_len(text.as_bytes(), 0) == Some(text.len())).then(|| Self(text.to_owned()))
    }

    /// Wraps text the parser already checked against the number grammar.
    pub(crate) fn from_checked(text: &str) -> Self {
        Self(text.to_owned())
    }
}

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The accessors of [`Number`] and [`ArchivedNumber`], written once for both (the archived
/// text is read in place).
macro_rules! number_accessors {
    ($($number:ty),*) => {$(
        impl $number {
            /// The exact text.
            pub fn as_str(&self) -> &str {
                self.0.as_str()
            }

            /// The value if the text is a plain integer in `u64` range (no fraction, no exponent,
            /// no sign).
            pub fn as_u64(&self) -> Option<u64> {
                parse_u64(self.as_str())
            }

            /// The value if the text is a plain integer in `i64` range (no fraction, no
            /// exponent).
            pub fn as_i64(&self) -> Option<i64> {
                parse_i64(self.as_str())
            }

            /// The nearest `f64`, or `None` when the magnitude is beyond `f64` (like `1E+400`).
            pub fn as_f64(&self) -> Option<f64> {
                self.as_str().parse::<f64>().ok().filter(|f| f.is_finite())
            }
        }
    )*};
}

number_accessors!(Number, ArchivedNumber);

/// A plain decimal `u64`: digits only, no sign, no leading zero (JSON grammar), in range.
pub(crate) fn parse_u64(text: &str) -> Option<u64> {
    let bytes = text.as_bytes();
    if bytes.is_empty() || (bytes.len() > 1 && bytes[0] == b'0') {
        return None;
    }
    let mut n: u64 = 0;
    for &b in bytes {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    Some(n)
}

/// A plain decimal `i64` (optional `-`, digits, no leading zero), in range. `-0` is refused: it
/// is not how any `i64` is written, so accepting it would change the text on the way back.
pub(crate) fn parse_i64(text: &str) -> Option<i64> {
    match text.strip_prefix('-') {
        Some(digits) => {
            let magnitude = parse_u64(digits)?;
            if magnitude == 0 {
                return None;
            }
            0i64.checked_sub_unsigned(magnitude)
        }
        None => i64::try_from(parse_u64(text)?).ok(),
    }
}

/// The length of the JSON number starting at `bytes[start]`, or `None` if none starts there.
/// The number ends at the first byte that cannot continue it.
pub(crate) fn number_len(bytes: &[u8], start: usize) -> Option<usize> {
    let digits = |mut i: usize| {
        let from = i;
        while bytes.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        (i > from).then_some(i)
    };
    let mut i = start;
    if bytes.get(i) == Some(&b'-') {
        i += 1;
    }
    i = match bytes.get(i) {
        Some(b'0') => i + 1,
        Some(b'1'..=b'9') => digits(i)?,
        _ => return None,
    };
    if bytes.get(i) == Some(&b'.') {
        i = digits(i + 1)?;
    }
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(bytes.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        i = digits(i)?;
    }
    Some(i - start)
}

impl Map {
    /// An empty map.
    pub fn new() -> Self {
        Self(Vec::new())
    }

    /// Wraps members the parser already checked for duplicate names.
    pub(crate) fn from_unique(members: Vec<Member>) -> Self {
        Self(members)
    }

    /// The number of members.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when the map has no members.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value of member `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.iter().find(|m| m.key == key).map(|m| &m.value)
    }

    /// The value of member `key`, mutable.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Value> {
        self.0
            .iter_mut()
            .find(|m| m.key == key)
            .map(|m| &mut m.value)
    }

    /// True when the map has a member `key`.
    pub fn contains_key(&self, key: &str) -> bool {
        self.0.iter().any(|m| m.key == key)
    }

    /// The members in order, as `(name, value)`.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &Value)> {
        self.0.iter().map(|m| (m.key.as_str(), &m.value))
    }

    /// The member names in order.
    pub fn keys(&self) -> impl ExactSizeIterator<Item = &str> {
        self.0.iter().map(|m| m.key.as_str())
    }

    /// The members in order.
    pub fn members(&self) -> &[Member] {
        &self.0
    }

    /// The members in order as `(name, value)`, the values mutable (names cannot change, so the
    /// map never gets a duplicate).
    pub fn values_mut(&mut self) -> impl ExactSizeIterator<Item = (&str, &mut Value)> {
        self.0.iter_mut().map(|m| (m.key.as_str(), &mut m.value))
    }

    /// Appends a member, or refuses it if the name is already there (the map is unchanged then).
    pub fn push(&mut self, key: impl Into<String>, value: Value) -> Result<(), DuplicateKey> {
        let key = key.into();
        if self.contains_key(&key) {
            return Err(DuplicateKey(key));
        }
        self.0.push(Member { key, value });
        Ok(())
    }

    /// Removes member `key`, keeping the others in order, and returns its value.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        let i = self.0.iter().position(|m| m.key == key)?;
        Some(self.0.remove(i).value)
    }

    /// The members, consuming the map.
    pub fn into_members(self) -> Vec<Member> {
        self.0
    }
}

impl TryFrom<Vec<Member>> for Map {
    type Error = DuplicateKey;

    /// Builds a map from members, refusing the first name that appears twice.
    fn try_from(members: Vec<Member>) -> Result<Self, DuplicateKey> {
        let mut names: Vec<&str> = members.iter().map(|m| m.key.as_str()).collect();
        names.sort_unstable();
        if let Some(pair) = names.windows(2).find(|pair| pair[0] == pair[1]) {
            return Err(DuplicateKey(pair[0].to_owned()));
        }
        Ok(Self(members))
    }
}

impl<'a> IntoIterator for &'a Map {
    type Item = &'a Member;
    type IntoIter = std::slice::Iter<'a, Member>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl ArchivedMap {
    /// The number of members.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when the map has no members.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value of member `key`.
    pub fn get(&self, key: &str) -> Option<&ArchivedValue> {
        self.0.iter().find(|m| m.key == key).map(|m| &m.value)
    }

    /// The members in order, as `(name, value)`.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &ArchivedValue)> {
        self.0.iter().map(|m| (m.key.as_str(), &m.value))
    }

    /// The member names in order.
    pub fn keys(&self) -> impl ExactSizeIterator<Item = &str> {
        self.0.iter().map(|m| m.key.as_str())
    }

    /// The members in order.
    pub fn members(&self) -> &[ArchivedMember] {
        self.0.as_slice()
    }
}

/// The accessors of [`Value`] and [`ArchivedValue`], written once for both (the archived ones
/// borrow from the archive): the same names, the same answers.
macro_rules! value_accessors {
    ($($value:ident: $number:ty, $map:ty;)*) => {$(
        impl $value {
            /// The kind of value as English words: `"null"`, `"a boolean"`, `"a number"`,
            /// `"a string"`, `"an array"` or `"an object"`.
            pub fn kind(&self) -> &'static str {
                match self {
                    Self::Null => "null",
                    Self::Bool(_) => "a boolean",
                    Self::Number(_) => "a number",
                    Self::String(_) => "a string",
                    Self::Array(_) => "an array",
                    Self::Object(_) => "an object",
                }
            }

            /// True for `null`.
            pub fn is_null(&self) -> bool {
                matches!(self, Self::Null)
            }

            /// The boolean, if this is one.
            pub fn as_bool(&self) -> Option<bool> {
                match self {
                    Self::Bool(b) => Some(*b),
                    _ => None,
                }
            }

            /// The number, if this is one.
            pub fn as_number(&self) -> Option<&$number> {
                match self {
                    Self::Number(n) => Some(n),
                    _ => None,
                }
            }

            /// The number as `u64`, if this is a number written as a plain integer in range.
            pub fn as_u64(&self) -> Option<u64> {
                self.as_number().and_then(<$number>::as_u64)
            }

            /// The number as `i64`, if this is a number written as a plain integer in range.
            pub fn as_i64(&self) -> Option<i64> {
                self.as_number().and_then(<$number>::as_i64)
            }

            /// The number as a finite `f64`, if this is a number.
            pub fn as_f64(&self) -> Option<f64> {
                self.as_number().and_then(<$number>::as_f64)
            }

            /// The string, if this is one.
            pub fn as_str(&self) -> Option<&str> {
                match self {
                    Self::String(s) => Some(s.as_str()),
                    _ => None,
                }
            }

            /// The items, if this is an array.
            pub fn as_array(&self) -> Option<&[$value]> {
                match self {
                    Self::Array(items) => Some(items.as_slice()),
                    _ => None,
                }
            }

            /// The members, if this is an object.
            pub fn as_object(&self) -> Option<&$map> {
                match self {
                    Self::Object(map) => Some(map),
                    _ => None,
                }
            }

            /// The value of member `key`, if this is an object that has it.
            pub fn get(&self, key: &str) -> Option<&$value> {
                self.as_object().and_then(|map| map.get(key))
            }
        }
    )*};
}

value_accessors! {
    Value: Number, Map;
    ArchivedValue: ArchivedNumber, ArchivedMap;
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Self::Bool(b)
    }
}

impl From<u64> for Value {
    fn from(n: u64) -> Self {
        Self::Number(Number::from_u64(n))
    }
}

impl From<i64> for Value {
    fn from(n: i64) -> Self {
        Self::Number(Number::from_i64(n))
    }
}

impl From<Number> for Value {
    fn from(n: Number) -> Self {
        Self::Number(n)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Self::String(s.to_owned())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Self::String(s)
    }
}

impl From<Vec<Value>> for Value {
    fn from(items: Vec<Value>) -> Self {
        Self::Array(items)
    }
}

impl From<Map> for Value {
    fn from(map: Map) -> Self {
        Self::Object(map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_grammar() {
        for ok in [
            "0",
            "-0",
            "1.0",
            "1E+400",
            "1e-7",
            "-2.5e10",
            "18446744073709551616",
            "10",
        ] {
            assert_eq!(Number::parse(ok).unwrap().as_str(), ok);
        }
        for bad in [
            "", "-", "01", "1.", ".5", "1e", "1e+", "+1", "NaN", "Infinity", "1 ", " 1", "0x1",
            "--1",
        ] {
            assert!(Number::parse(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn number_conversions() {
        let n = |s| Number::parse(s).unwrap();
        assert_eq!(n("18446744073709551615").as_u64(), Some(u64::MAX));
        assert_eq!(n("18446744073709551616").as_u64(), None);
        assert_eq!(n("-1").as_u64(), None);
        assert_eq!(n("1.0").as_u64(), None);
        assert_eq!(n("-9223372036854775808").as_i64(), Some(i64::MIN));
        assert_eq!(n("9223372036854775808").as_i64(), None);
        assert_eq!(n("-0").as_i64(), None);
        assert_eq!(n("1E+400").as_f64(), None);
        assert_eq!(n("-2.5e10").as_f64(), Some(-2.5e10));
        assert_eq!(Number::from_i64(-5).as_str(), "-5");
        assert_eq!(Number::from_u64(u64::MAX).as_str(), "18446744073709551615");
    }

    #[test]
    fn map_refuses_duplicates_and_keeps_order() {
        let mut m = Map::new();
        m.push("b", Value::Null).unwrap();
        m.push("a", Value::from(1u64)).unwrap();
        assert_eq!(
            m.push("b", Value::Bool(true)),
            Err(DuplicateKey("b".into()))
        );
        assert_eq!(m.keys().collect::<Vec<_>>(), ["b", "a"]);
        assert_eq!(m.get("a").and_then(Value::as_u64), Some(1));
        m.push("c", "x".into()).unwrap();
        assert_eq!(m.remove("a"), Some(Value::from(1u64)));
        assert_eq!(m.keys().collect::<Vec<_>>(), ["b", "c"]);
        assert_eq!(m.len(), 2);
        let dup = vec![
            Member {
                key: "x".into(),
                value: Value::Null,
            },
            Member {
                key: "x".into(),
                value: Value::Null,
            },
        ];
        assert_eq!(Map::try_from(dup), Err(DuplicateKey("x".into())));
    }
}
