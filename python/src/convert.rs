//! Python values to JSON text and JSON text (or a crate `Value`) to Python values.
//!
//! Python → JSON accepts exactly the JSON shapes: `dict` (keys `str`), `list`, `str`, `int`
//! (any size), `float` (finite), `bool`, `None`, and their subclasses. Anything else is a
//! `TypeError` (a tuple too: it would come back as a list, so the round trip would not hold); a
//! `float` NaN or infinity, or nesting deeper than the crate's limit, a `ValueError`.
//!
//! JSON → Python: objects become `dict` (member order kept), arrays `list`, integers `int` (any
//! size), numbers with a fraction or exponent `float`. Member names are interned and cached, so
//! the names every event repeats (`type`, `seq`, `data`, …) are not allocated again.

use std::collections::HashMap;
use std::os::raw::c_char;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString};

use agentlog_core::event::{Value, MAX_DEPTH};

use crate::errors::internal;

// In the stable ABI since 3.10, and exported by every CPython 3 before it: the UTF-8 bytes a
// `str` caches, without the copy `PyUnicode_AsUTF8String` makes (the abi3-py39 build lacks it).
extern "C" {
    fn PyUnicode_AsUTF8AndSize(o: *mut ffi::PyObject, size: *mut ffi::Py_ssize_t) -> *const c_char;
}

/// The UTF-8 text of a `str` (borrowed from the object; a lone surrogate is a `UnicodeEncodeError`).
pub fn str_of<'a>(s: &'a Bound<'_, PyString>) -> PyResult<&'a str> {
    let mut size: ffi::Py_ssize_t = 0;
    // SAFETY: `s` is a live str; the buffer returned belongs to it and lives as long as it does
    // (the borrow of `s` bounds the returned slice); CPython guarantees it is valid UTF-8.
    #[allow(unsafe_code)]
    unsafe {
        let p = PyUnicode_AsUTF8AndSize(s.as_ptr(), &mut size);
        if p.is_null() {
            return Err(PyErr::fetch(s.py()));
        }
        let bytes = std::slice::from_raw_parts(p.cast::<u8>(), size as usize);
        Ok(std::str::from_utf8_unchecked(bytes))
    }
}

/// Writes `obj` as JSON text to `out`.
pub fn to_json(obj: &Bound<'_, PyAny>, out: &mut String) -> PyResult<()> {
    write_value(obj, out, 0)
}

/// What the fast path did with a value of an exact built-in type.
enum Fast {
    Done,
    /// Not an exact `str`, `dict`, `list`, `int` or `float` (or an int beyond 64 bits): the
    /// general path decides.
    Other,
}

/// The exact built-in types, recognised by a pointer comparison of the type, their contents
/// read with the C API (the general path below handles subclasses and everything else).
#[allow(unsafe_code)]
fn write_fast(obj: &Bound<'_, PyAny>, out: &mut String, depth: usize) -> PyResult<Fast> {
    let py = obj.py();
    let p = obj.as_ptr();
    // SAFETY: `p` is a live object (borrowed by `obj`); the type objects are CPython's statics;
    // every call below is given an object of the type it expects. Items of dicts and lists are
    // taken as new references (`from_borrowed_ptr`), so they outlive any change to their container.
    unsafe {
        let t = ffi::Py_TYPE(p);
        if t == std::ptr::addr_of_mut!(ffi::PyUnicode_Type) {
            write_string(str_of(obj.cast_unchecked::<PyString>())?, out);
        } else if t == std::ptr::addr_of_mut!(ffi::PyDict_Type) {
            if depth >= MAX_DEPTH {
                return Err(too_deep());
            }
            out.push('{');
            let mut pos: ffi::Py_ssize_t = 0;
            let mut k: *mut ffi::PyObject = std::ptr::null_mut();
            let mut v: *mut ffi::PyObject = std::ptr::null_mut();
            let mut first = true;
            while ffi::PyDict_Next(p, &mut pos, &mut k, &mut v) != 0 {
                if !first {
                    out.push(',');
                }
                first = false;
                let key = Bound::from_borrowed_ptr(py, k);
                let value = Bound::from_borrowed_ptr(py, v);
                if ffi::Py_TYPE(k) == std::ptr::addr_of_mut!(ffi::PyUnicode_Type) {
                    write_string(str_of(key.cast_unchecked::<PyString>())?, out);
                } else {
                    write_key(&key, out)?;
                }
                out.push(':');
                write_value(&value, out, depth + 1)?;
            }
            out.push('}');
        } else if t == std::ptr::addr_of_mut!(ffi::PyList_Type) {
            if depth >= MAX_DEPTH {
                return Err(too_deep());
            }
            out.push('[');
            let mut i = 0;
            // The length is read again each time: an item's conversion runs no Python code,
            // but this stays right if it did.
            while i < ffi::PyList_Size(p) {
                let item = ffi::PyList_GetItem(p, i);
                if item.is_null() {
                    return Err(PyErr::fetch(py));
                }
                if i > 0 {
                    out.push(',');
                }
                write_value(&Bound::from_borrowed_ptr(py, item), out, depth + 1)?;
                i += 1;
            }
            out.push(']');
        } else if t == std::ptr::addr_of_mut!(ffi::PyLong_Type) {
            let mut overflow = 0;
            let n = ffi::PyLong_AsLongLongAndOverflow(p, &mut overflow);
            if overflow != 0 {
                return Ok(Fast::Other);
            }
            if n == -1 && !ffi::PyErr_Occurred().is_null() {
                return Err(PyErr::fetch(py));
            }
            use std::fmt::Write;
            let _ = write!(out, "{n}");
        } else if t == std::ptr::addr_of_mut!(ffi::PyFloat_Type) {
            write_float(ffi::PyFloat_AsDouble(p), out)?;
        } else {
            return Ok(Fast::Other);
        }
    }
    Ok(Fast::Done)
}

/// A key that is not an exact str: a str subclass is written as its text, anything else refused.
fn write_key(k: &Bound<'_, PyAny>, out: &mut String) -> PyResult<()> {
    let Ok(key) = k.cast::<PyString>() else {
        return Err(PyTypeError::new_err(format!(
            "a JSON object's keys are str, not {} ({})",
            type_name(k),
            k.repr().map(|r| r.to_string()).unwrap_or_default()
        )));
    };
    write_string(str_of(key)?, out);
    Ok(())
}

fn write_float(v: f64, out: &mut String) -> PyResult<()> {
    if !v.is_finite() {
        return Err(PyValueError::new_err(format!(
            "{v} is not a JSON number (NaN and infinities are refused)"
        )));
    }
    // The shortest text that reads back as the same float, with a `.0` or an exponent so that
    // it reads back as a float, not an int.
    use std::fmt::Write;
    let _ = write!(out, "{v:?}");
    Ok(())
}

fn write_value(obj: &Bound<'_, PyAny>, out: &mut String, depth: usize) -> PyResult<()> {
    if let Fast::Done = write_fast(obj, out, depth)? {
        return Ok(());
    }
    if let Ok(s) = obj.cast::<PyString>() {
        write_string(str_of(s)?, out);
    } else if let Ok(d) = obj.cast::<PyDict>() {
        if depth >= MAX_DEPTH {
            return Err(too_deep());
        }
        out.push('{');
        for (i, (k, v)) in d.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            write_key(&k, out)?;
            out.push(':');
            write_value(&v, out, depth + 1)?;
        }
        out.push('}');
    } else if let Ok(l) = obj.cast::<PyList>() {
        if depth >= MAX_DEPTH {
            return Err(too_deep());
        }
        out.push('[');
        for (i, v) in l.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            write_value(&v, out, depth + 1)?;
        }
        out.push(']');
    } else if obj.is_none() {
        out.push_str("null");
    } else if let Ok(b) = obj.cast::<PyBool>() {
        out.push_str(if b.is_true() { "true" } else { "false" });
    } else if let Ok(i) = obj.cast::<PyInt>() {
        match i.extract::<i64>() {
            Ok(n) => {
                use std::fmt::Write;
                let _ = write!(out, "{n}");
            }
            Err(_) => write_big_int(i, out)?,
        }
    } else if let Ok(f) = obj.cast::<PyFloat>() {
        write_float(f.value(), out)?;
    } else if let Some(text) = decimal_text(obj)? {
        out.push_str(&text);
    } else {
        return Err(PyTypeError::new_err(format!(
            "{} is not a JSON value (accepted: dict with str keys, list, str, int, float, bool, \
             None)",
            type_name(obj)
        )));
    }
    Ok(())
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

fn too_deep() -> PyErr {
    PyValueError::new_err(format!(
        "nested deeper than {MAX_DEPTH} levels (or a dict or list that contains itself)"
    ))
}

fn write_string(s: &str, out: &mut String) {
    out.push('"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let esc: &str = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0..=0x1f => "",
            _ => continue,
        };
        out.push_str(&s[start..i]);
        if esc.is_empty() {
            use std::fmt::Write;
            let _ = write!(out, "\\u{b:04x}");
        } else {
            out.push_str(esc);
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// FNV-1a: member names are short; SipHash cost more than the lookup saved.
#[derive(Default)]
pub struct Fnv(u64);

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for &b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

/// Interned member names, reused across events (bounded: names of user data may be anything).
#[derive(Default)]
pub struct Keys {
    map: HashMap<Box<[u8]>, Py<PyString>, std::hash::BuildHasherDefault<Fnv>>,
}

const MAX_CACHED_KEYS: usize = 4096;
const MAX_CACHED_KEY_LEN: usize = 64;

impl Keys {
    fn get<'py>(&mut self, py: Python<'py>, key: &str) -> Bound<'py, PyString> {
        if let Some(k) = self.map.get(key.as_bytes()) {
            return k.bind(py).clone();
        }
        let k = PyString::intern(py, key);
        if key.len() <= MAX_CACHED_KEY_LEN && self.map.len() < MAX_CACHED_KEYS {
            self.map.insert(key.as_bytes().into(), k.clone().unbind());
        }
        k
    }
}

/// Parses JSON text (written by the crate: valid, canonical) into Python values.
pub fn from_json<'py>(
    py: Python<'py>,
    text: &[u8],
    keys: &mut Keys,
) -> PyResult<Bound<'py, PyAny>> {
    let mut p = Parser {
        py,
        s: text,
        i: 0,
        keys,
        scratch: String::new(),
    };
    let v = p.value(0)?;
    p.ws();
    if p.i != p.s.len() {
        return Err(p.bad("trailing characters"));
    }
    Ok(v)
}

struct Parser<'a, 'py> {
    py: Python<'py>,
    s: &'a [u8],
    i: usize,
    keys: &'a mut Keys,
    scratch: String,
}

impl<'py> Parser<'_, 'py> {
    fn bad(&self, what: &str) -> PyErr {
        internal(format!(
            "the crate's JSON output could not be read back at byte {}: {what}",
            self.i
        ))
    }

    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\n' | b'\r' | b'\t') {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn expect(&mut self, c: u8) -> PyResult<()> {
        self.ws();
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            Err(self.bad(&format!("expected {:?}", c as char)))
        }
    }

    fn value(&mut self, depth: usize) -> PyResult<Bound<'py, PyAny>> {
        if depth > MAX_DEPTH + 8 {
            return Err(self.bad("too deep"));
        }
        self.ws();
        match self.peek() {
            Some(b'{') => {
                self.i += 1;
                let d = PyDict::new(self.py);
                self.ws();
                if self.peek() == Some(b'}') {
                    self.i += 1;
                    return Ok(d.into_any());
                }
                loop {
                    self.ws();
                    let key = {
                        let text = self.string_text()?;
                        // `string_text` leaves the text in `scratch` or points into `s`.
                        match text {
                            Text::Slice(a, b) => {
                                let k = std::str::from_utf8(&self.s[a..b])
                                    .map_err(|_| self.bad("invalid UTF-8"))?;
                                self.keys.get(self.py, k)
                            }
                            Text::Scratch => {
                                let k = std::mem::take(&mut self.scratch);
                                let key = self.keys.get(self.py, &k);
                                self.scratch = k;
                                key
                            }
                        }
                    };
                    self.expect(b':')?;
                    let v = self.value(depth + 1)?;
                    d.set_item(key, v)?;
                    self.ws();
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {
                            self.i += 1;
                            return Ok(d.into_any());
                        }
                        _ => return Err(self.bad("expected ',' or '}'")),
                    }
                }
            }
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                self.ws();
                if self.peek() == Some(b']') {
                    self.i += 1;
                } else {
                    loop {
                        items.push(self.value(depth + 1)?);
                        self.ws();
                        match self.peek() {
                            Some(b',') => self.i += 1,
                            Some(b']') => {
                                self.i += 1;
                                break;
                            }
                            _ => return Err(self.bad("expected ',' or ']'")),
                        }
                    }
                }
                Ok(PyList::new(self.py, items)?.into_any())
            }
            Some(b'"') => match self.string_text()? {
                Text::Slice(a, b) => {
                    let t = std::str::from_utf8(&self.s[a..b])
                        .map_err(|_| self.bad("invalid UTF-8"))?;
                    Ok(PyString::new(self.py, t).into_any())
                }
                Text::Scratch => Ok(PyString::new(self.py, &self.scratch).into_any()),
            },
            Some(b't') => self.literal(b"true", PyBool::new(self.py, true).to_owned().into_any()),
            Some(b'f') => self.literal(b"false", PyBool::new(self.py, false).to_owned().into_any()),
            Some(b'n') => self.literal(b"null", self.py.None().into_bound(self.py)),
            Some(b'-' | b'0'..=b'9') => {
                let start = self.i;
                let mut float = false;
                while let Some(c) = self.peek() {
                    match c {
                        b'0'..=b'9' | b'-' | b'+' => {}
                        b'.' | b'e' | b'E' => float = true,
                        _ => break,
                    }
                    self.i += 1;
                }
                let text = std::str::from_utf8(&self.s[start..self.i])
                    .map_err(|_| self.bad("invalid number"))?;
                number(self.py, text, float).map_err(|_| self.bad("invalid number"))
            }
            _ => Err(self.bad("expected a value")),
        }
    }

    fn literal(&mut self, word: &[u8], v: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        if self.s[self.i..].starts_with(word) {
            self.i += word.len();
            Ok(v)
        } else {
            Err(self.bad("expected a literal"))
        }
    }

    /// Reads a string (at its opening quote): its text is `s[a..b]` when it has no escape,
    /// else it is left in `scratch`.
    fn string_text(&mut self) -> PyResult<Text> {
        if self.peek() != Some(b'"') {
            return Err(self.bad("expected a string"));
        }
        self.i += 1;
        let start = self.i;
        while let Some(c) = self.peek() {
            match c {
                b'"' => {
                    self.i += 1;
                    return Ok(Text::Slice(start, self.i - 1));
                }
                b'\\' => break,
                _ => self.i += 1,
            }
        }
        // With escapes: decode into scratch.
        let mut buf = std::mem::take(&mut self.scratch);
        buf.clear();
        let mut seg = start;
        loop {
            match self.peek() {
                None => {
                    self.scratch = buf;
                    return Err(self.bad("unterminated string"));
                }
                Some(b'"') => {
                    buf.push_str(
                        std::str::from_utf8(&self.s[seg..self.i])
                            .map_err(|_| self.bad("invalid UTF-8"))?,
                    );
                    self.i += 1;
                    self.scratch = buf;
                    return Ok(Text::Scratch);
                }
                Some(b'\\') => {
                    buf.push_str(
                        std::str::from_utf8(&self.s[seg..self.i])
                            .map_err(|_| self.bad("invalid UTF-8"))?,
                    );
                    self.i += 1;
                    let c = self.peek().ok_or_else(|| self.bad("unterminated escape"))?;
                    self.i += 1;
                    match c {
                        b'"' => buf.push('"'),
                        b'\\' => buf.push('\\'),
                        b'/' => buf.push('/'),
                        b'b' => buf.push('\u{8}'),
                        b'f' => buf.push('\u{c}'),
                        b'n' => buf.push('\n'),
                        b'r' => buf.push('\r'),
                        b't' => buf.push('\t'),
                        b'u' => {
                            let hi = self.hex4()?;
                            let code = if (0xD800..0xDC00).contains(&hi)
                                && self.s[self.i..].starts_with(b"\\u")
                            {
                                self.i += 2;
                                let lo = self.hex4()?;
                                0x10000 + ((hi - 0xD800) << 10) + (lo.wrapping_sub(0xDC00) & 0x3ff)
                            } else {
                                hi
                            };
                            buf.push(char::from_u32(code).ok_or_else(|| self.bad("bad \\u"))?);
                        }
                        _ => return Err(self.bad("bad escape")),
                    }
                    seg = self.i;
                }
                Some(_) => self.i += 1,
            }
        }
    }

    fn hex4(&mut self) -> PyResult<u32> {
        let h = self
            .s
            .get(self.i..self.i + 4)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .ok_or_else(|| self.bad("bad \\u escape"))?;
        self.i += 4;
        Ok(h)
    }
}

enum Text {
    Slice(usize, usize),
    Scratch,
}

/// The most digits converted between an int and its text in one step: CPython refuses more
/// than 4300 (`sys.set_int_max_str_digits`), so longer ones go in parts.
const INT_DIGITS_AT_ONCE: usize = 4000;

/// A JSON number's text as a Python int (no fraction or exponent) or float; a number a float
/// cannot hold (`1E+400`, which would become infinity, or `1e-400`, which would become 0) is
/// a `decimal.Decimal` of the exact text: its value is kept, and it goes back as the same
/// number (in `Decimal`'s notation: `1e-400` as `1E-400`).
fn number<'py>(py: Python<'py>, text: &str, float: bool) -> PyResult<Bound<'py, PyAny>> {
    if !float {
        if let Ok(n) = text.parse::<i64>() {
            return Ok(n.into_pyobject(py)?.into_any());
        }
        return big_int(py, text);
    }
    let v: f64 = text
        .parse()
        .map_err(|_| PyValueError::new_err(format!("bad number {text}")))?;
    let mantissa = text.split(['e', 'E']).next().unwrap_or(text);
    let lost = !v.is_finite() || (v == 0.0 && mantissa.bytes().any(|c| matches!(c, b'1'..=b'9')));
    if lost {
        return py.import("decimal")?.getattr("Decimal")?.call1((text,));
    }
    Ok(PyFloat::new(py, v).into_any())
}

/// An integer's decimal text as a Python int, in parts of at most [`INT_DIGITS_AT_ONCE`]
/// digits.
fn big_int<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    let int = py.get_type::<PyInt>();
    let (negative, digits) = match text.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, text),
    };
    if digits.len() <= INT_DIGITS_AT_ONCE {
        return int.call1((text,));
    }
    let mut value = 0i64.into_pyobject(py)?.into_any();
    let mut at = 0;
    while at < digits.len() {
        let end = (at + INT_DIGITS_AT_ONCE).min(digits.len());
        let part = int.call1((&digits[at..end],))?;
        let scale = 10i64.into_pyobject(py)?.pow((end - at) as u32, py.None())?;
        value = value.mul(scale)?.add(part)?;
        at = end;
    }
    if negative {
        value = value.neg()?;
    }
    Ok(value)
}

/// A Python int beyond 64 bits as its decimal text (`int.__repr__`, also for a subclass, whose
/// own repr may be anything; in parts when it has more digits than CPython converts at once).
fn write_big_int(i: &Bound<'_, PyInt>, out: &mut String) -> PyResult<()> {
    let py = i.py();
    let int = py.get_type::<PyInt>();
    if let Ok(text) = int.call_method1("__repr__", (i,)) {
        out.push_str(str_of(text.cast::<PyString>()?)?);
        return Ok(());
    }
    // Too many digits for one conversion: parts of INT_DIGITS_AT_ONCE digits, lowest first.
    let zero = 0i64.into_pyobject(py)?;
    let negative = i.lt(&zero)?;
    let mut rest = if negative {
        i.neg()?
    } else {
        i.clone().into_any()
    };
    let unit = 10i64
        .into_pyobject(py)?
        .pow(INT_DIGITS_AT_ONCE as u32, py.None())?;
    let mut parts: Vec<String> = Vec::new();
    while rest.gt(&zero)? {
        let pair = rest.divmod(&unit)?;
        let part = int.call_method1("__repr__", (pair.get_item(1)?,))?;
        parts.push(str_of(part.cast::<PyString>()?)?.to_string());
        rest = pair.get_item(0)?;
    }
    if negative {
        out.push('-');
    }
    for (k, part) in parts.iter().rev().enumerate() {
        if k == 0 {
            out.push_str(part);
        } else {
            // Every part but the highest has all its digits, leading zeros included.
            out.push_str(&"0".repeat(INT_DIGITS_AT_ONCE - part.len()));
            out.push_str(part);
        }
    }
    Ok(())
}

/// The JSON text of a finite `decimal.Decimal` (how numbers a float cannot hold come out),
/// `None` for any other object. A NaN or infinite Decimal is refused, as float ones are.
fn decimal_text(obj: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
    let py = obj.py();
    let decimal = py.import("decimal")?.getattr("Decimal")?;
    if !obj.is_instance(&decimal)? {
        return Ok(None);
    }
    if !obj.call_method0("is_finite")?.is_truthy()? {
        return Err(PyValueError::new_err(format!(
            "{} is not a JSON number (NaN and infinity have no JSON form)",
            obj.repr()?
        )));
    }
    let text = obj.str()?;
    let text = str_of(&text)?;
    // `Decimal("1E+400")` reads "1E+400", `Decimal("2.50")` "2.50": JSON numbers as they are.
    Ok(Some(text.to_string()))
}

/// A crate `Value` (numbers as their exact text) as a Python value.
pub fn value_to_py<'py>(
    py: Python<'py>,
    v: &Value,
    keys: &mut Keys,
) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => {
            let t = n.as_str();
            number(py, t, t.bytes().any(|c| matches!(c, b'.' | b'e' | b'E')))?
        }
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let items = items
                .iter()
                .map(|i| value_to_py(py, i, keys))
                .collect::<PyResult<Vec<_>>>()?;
            PyList::new(py, items)?.into_any()
        }
        Value::Object(map) => {
            let d = PyDict::new(py);
            for (k, v) in map.iter() {
                d.set_item(keys.get(py, k), value_to_py(py, v, keys)?)?;
            }
            d.into_any()
        }
    })
}
