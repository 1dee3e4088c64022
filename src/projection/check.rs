//! "What the model sees is what was recorded": compare a request about to be sent with the
//! projection.

use std::fmt;

use crate::event::{parse_json, Number, Value};

use super::message::Messages;
use super::render::{render, Format};

/// The longest excerpt of a value a [`Divergence`] holds, in characters.
const EXCERPT_CHARS: usize = 80;

/// The first place where a request differs from the recorded projection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Divergence {
    /// The index of the message, in the request's message array (for OpenAI, the rendered array,
    /// where tool messages are separate); `None` when the divergence is outside the messages
    /// (Anthropic's top-level `system`, a top-level member).
    pub index: Option<usize>,
    /// Where, as a path from the root of the compared JSON: `$[3].content[0].text`,
    /// `$.messages[2].content`, `$.system[0].text`.
    pub path: String,
    /// A short excerpt of the recorded value there (compact JSON, cut at 80 characters),
    /// `(absent)` when the recording has nothing there.
    pub expected: String,
    /// A short excerpt of the request's value there, `(absent)` when it has nothing there.
    pub found: String,
}

impl fmt::Display for Divergence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.index {
            Some(i) => write!(f, "request diverges from the recording at message {i}, ")?,
            None => f.write_str("request diverges from the recording ")?,
        }
        write!(
            f,
            "{}: recorded {}, request has {}",
            self.path, self.expected, self.found
        )
    }
}

impl std::error::Error for Divergence {}

/// Checks that the neutral messages of a request equal the recorded projection: same roles,
/// same content as JSON values (member order of objects ignored, numbers compared by value).
/// `source_seq` is not compared. Returns the first divergence in message order.
pub fn check_request(recorded: &Messages, request: &Messages) -> Result<(), Divergence> {
    let same = recorded.len() == request.len()
        && recorded
            .iter()
            .zip(request.iter())
            .all(|(a, b)| a.role == b.role && a.content == b.content);
    if same {
        return Ok(());
    }
    check_rendered(Format::Neutral, recorded, &request.to_value())
}

/// Checks that `request` (the JSON an agent is about to send, in `format`) equals the rendering
/// of the recorded projection in that format ([`render`]).
///
/// JSON values are compared with object member order ignored, numbers by value where both texts
/// are numbers (`1.0` = `1` = `1e0`, exactly, at any magnitude), everything else exactly. For
/// [`Format::OpenAi`], a string member `arguments` is compared as JSON when both sides parse as
/// JSON, since models write tool arguments with their own spacing and member order. The first
/// divergence is returned: objects are walked in the recording's member order, then members only
/// the request has; arrays item by item, then the longer one's extra items.
pub fn check_rendered(
    format: Format,
    recorded: &Messages,
    request: &Value,
) -> Result<(), Divergence> {
    let expected = render(format, recorded);
    let mut path = Vec::new();
    match first_divergence(&expected, request, &mut path, format == Format::OpenAi) {
        None => Ok(()),
        Some((expected, found)) => Err(Divergence {
            index: message_index(format, &path),
            path: path_text(&path),
            expected,
            found,
        }),
    }
}

/// One step of a path into a JSON value.
#[derive(Clone, Debug)]
enum Step {
    Key(String),
    Index(usize),
}

/// The first divergence between `a` (recorded) and `b` (request) as excerpts; `path` is left
/// pointing at it.
fn first_divergence(
    a: &Value,
    b: &Value,
    path: &mut Vec<Step>,
    json_arguments: bool,
) -> Option<(String, String)> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (key, va) in x.iter() {
                path.push(Step::Key(key.to_owned()));
                match y.get(key) {
                    None => return Some((excerpt(va), ABSENT.to_owned())),
                    Some(vb) => {
                        let inner = if json_arguments && key == "arguments" {
                            arguments_divergence(va, vb)
                        } else {
                            first_divergence(va, vb, path, json_arguments)
                        };
                        if inner.is_some() {
                            return inner;
                        }
                    }
                }
                path.pop();
            }
            let (key, vb) = y.iter().find(|(key, _)| !x.contains_key(key))?;
            path.push(Step::Key(key.to_owned()));
            Some((ABSENT.to_owned(), excerpt(vb)))
        }
        (Value::Array(x), Value::Array(y)) => {
            for (i, (va, vb)) in x.iter().zip(y).enumerate() {
                path.push(Step::Index(i));
                let inner = first_divergence(va, vb, path, json_arguments);
                if inner.is_some() {
                    return inner;
                }
                path.pop();
            }
            let n = x.len().min(y.len());
            path.push(Step::Index(n));
            match (x.get(n), y.get(n)) {
                (Some(va), _) => Some((excerpt(va), ABSENT.to_owned())),
                (None, Some(vb)) => Some((ABSENT.to_owned(), excerpt(vb))),
                (None, None) => {
                    path.pop();
                    None
                }
            }
        }
        (Value::Number(x), Value::Number(y)) => {
            (!numbers_equal(x, y)).then(|| (excerpt(a), excerpt(b)))
        }
        _ => (a != b).then(|| (excerpt(a), excerpt(b))),
    }
}

/// Compares two `arguments` strings as JSON when both parse, else as strings.
fn arguments_divergence(a: &Value, b: &Value) -> Option<(String, String)> {
    if let (Some(x), Some(y)) = (a.as_str(), b.as_str()) {
        if let (Ok(x), Ok(y)) = (parse_json(x), parse_json(y)) {
            return first_divergence(&x, &y, &mut Vec::new(), false)
                .map(|_| (excerpt(a), excerpt(b)));
        }
    }
    (a != b).then(|| (excerpt(a), excerpt(b)))
}

const ABSENT: &str = "(absent)";

/// Compact JSON of `value`, cut at [`EXCERPT_CHARS`] characters with `…`.
fn excerpt(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(EXCERPT_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// The message index a path points into: the first index of a top-level array, or of the
/// `messages` member of Anthropic's object.
fn message_index(format: Format, path: &[Step]) -> Option<usize> {
    match (format, path) {
        (Format::Anthropic, [Step::Key(key), Step::Index(i), ..]) if key == "messages" => Some(*i),
        (Format::Neutral | Format::OpenAi, [Step::Index(i), ..]) => Some(*i),
        _ => None,
    }
}

fn path_text(path: &[Step]) -> String {
    let mut out = String::from("$");
    for step in path {
        match step {
            Step::Index(i) => out.push_str(&format!("[{i}]")),
            Step::Key(key) if is_identifier(key) => {
                out.push('.');
                out.push_str(key);
            }
            Step::Key(key) => out.push_str(&format!("[{}]", Value::String(key.clone()))),
        }
    }
    out
}

fn is_identifier(key: &str) -> bool {
    let mut chars = key.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// True when two JSON numbers have the same value, compared exactly as decimals (`1.0` = `1`,
/// `-0` = `0`, `1E+400` = `10e399`). Numbers whose exponent does not fit an `i64` are compared
/// by text.
pub(crate) fn numbers_equal(a: &Number, b: &Number) -> bool {
    match (Decimal::parse(a.as_str()), Decimal::parse(b.as_str())) {
        (Some(x), Some(y)) => x == y,
        _ => a.as_str() == b.as_str(),
    }
}

/// A decimal value `±0.digits × 10^exponent`, digits without leading or trailing zeros; zero has
/// no digits, no sign and exponent 0.
#[derive(Debug, PartialEq, Eq)]
struct Decimal {
    negative: bool,
    digits: String,
    exponent: i64,
}

impl Decimal {
    fn parse(text: &str) -> Option<Self> {
        let (negative, text) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (mantissa, exponent) = match text.find(['e', 'E']) {
            Some(i) => (&text[..i], text[i + 1..].parse::<i64>().ok()?),
            None => (text, 0),
        };
        let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        let all: String = int.chars().chain(frac.chars()).collect();
        let leading = all.len() - all.trim_start_matches('0').len();
        let digits = all.trim_start_matches('0').trim_end_matches('0');
        if digits.is_empty() {
            return Some(Self {
                negative: false,
                digits: String::new(),
                exponent: 0,
            });
        }
        let int_len = i64::try_from(int.len()).ok()?;
        let leading = i64::try_from(leading).ok()?;
        Some(Self {
            negative,
            digits: digits.to_owned(),
            exponent: exponent.checked_add(int_len)?.checked_sub(leading)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(text: &str) -> Number {
        Number::parse(text).unwrap()
    }

    #[test]
    fn numbers_compare_by_value() {
        for (a, b) in [
            ("1", "1.0"),
            ("1", "1e0"),
            ("100", "1E+2"),
            ("0.001", "1e-3"),
            ("-0", "0"),
            ("0.0", "0e10"),
            ("1E+400", "10e399"),
            ("18446744073709551616", "1.8446744073709551616e19"),
            ("-2.5e10", "-25000000000"),
        ] {
            assert!(numbers_equal(&n(a), &n(b)), "{a} = {b}");
        }
        for (a, b) in [
            ("1", "2"),
            ("1", "-1"),
            ("0.1", "0.01"),
            ("1E+400", "1E+401"),
            ("18446744073709551616", "18446744073709551617"),
            ("10", "1"),
        ] {
            assert!(!numbers_equal(&n(a), &n(b)), "{a} != {b}");
        }
    }

    #[test]
    fn paths_quote_odd_keys() {
        let path = [
            Step::Key("messages".into()),
            Step::Index(2),
            Step::Key("a b".into()),
        ];
        assert_eq!(path_text(&path), "$.messages[2][\"a b\"]");
        assert_eq!(message_index(Format::Anthropic, &path), Some(2));
        assert_eq!(message_index(Format::OpenAi, &path), None);
    }

    #[test]
    fn excerpts_are_cut() {
        let long = Value::String("é".repeat(200));
        let text = excerpt(&long);
        assert_eq!(text.chars().count(), EXCERPT_CHARS + 1);
        assert!(text.ends_with('…'));
    }
}
