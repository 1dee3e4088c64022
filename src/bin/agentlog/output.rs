//! Terminal output: colors (only on a terminal, never with a non-empty `NO_COLOR`), local times, sizes, and
//! short one-line summaries of text.

use std::io::IsTerminal;
use std::sync::OnceLock;

/// ANSI styles, or nothing when color is off.
#[derive(Debug, Clone, Copy)]
pub struct Paint {
    on: bool,
}

/// The colors used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Color {
    Dim,
    Bold,
    Red,
    Green,
    Yellow,
    Blue,
    Magenta,
    Cyan,
}

impl Color {
    fn code(self) -> &'static str {
        match self {
            Color::Dim => "2",
            Color::Bold => "1",
            Color::Red => "31",
            Color::Green => "32",
            Color::Yellow => "33",
            Color::Blue => "34",
            Color::Magenta => "35",
            Color::Cyan => "36",
        }
    }
}

/// True when `NO_COLOR` is set to a non-empty value (no-color.org).
fn no_color() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
}

impl Paint {
    /// Color for standard output: on when it is a terminal and `NO_COLOR` is not set to a
    /// non-empty value (no-color.org: an empty `NO_COLOR=` does not disable color).
    pub fn stdout() -> Paint {
        Paint {
            on: std::io::stdout().is_terminal() && !no_color(),
        }
    }

    /// `text` in `color` (unchanged when color is off).
    pub fn paint(self, color: Color, text: &str) -> String {
        if self.on && !text.is_empty() {
            format!("\x1b[{}m{text}\x1b[0m", color.code())
        } else {
            text.to_string()
        }
    }
}

/// True when standard error is a terminal (progress bars go there, and only then).
pub fn stderr_is_terminal() -> bool {
    std::io::stderr().is_terminal()
}

fn zone() -> &'static jiff::tz::TimeZone {
    static ZONE: OnceLock<jiff::tz::TimeZone> = OnceLock::new();
    ZONE.get_or_init(jiff::tz::TimeZone::system)
}

/// Epoch milliseconds as a local date-time.
pub fn local(ms: i64) -> Option<jiff::ZonedDateTime> {
    let ts = jiff::Timestamp::from_millisecond(ms).ok()?;
    Some(ts.to_zoned_datetime(zone().clone()))
}

/// A local date-time (in the system's time zone) as epoch milliseconds; `None` when out of
/// range. A time the clocks skipped is moved forward by the gap, a time they repeated is its
/// first occurrence (RFC 5545's "compatible" choice).
pub fn local_to_ms(dt: jiff::civil::DateTime) -> Option<i64> {
    Some(zone().to_timestamp(dt).ok()?.as_millisecond())
}

/// The local calendar day of epoch milliseconds (to tell whether events span days).
pub fn local_day(ms: i64) -> Option<jiff::civil::Date> {
    local(ms).map(|z| z.date())
}

/// `HH:MM:SS.mmm` local time, or `YYYY-MM-DD HH:MM:SS.mmm` with `date`.
pub fn event_time(ms: i64, date: bool) -> String {
    match local(ms) {
        Some(z) if date => z.strftime("%Y-%m-%d %H:%M:%S%.3f").to_string(),
        Some(z) => z.strftime("%H:%M:%S%.3f").to_string(),
        None => format!("@{ms}"),
    }
}

/// `YYYY-MM-DD HH:MM` local time.
pub fn date_time(ms: i64) -> String {
    match local(ms) {
        Some(z) => z.strftime("%Y-%m-%d %H:%M").to_string(),
        None => format!("@{ms}"),
    }
}

/// A byte count for people: `512 B`, `4.0 KiB`, `1.5 MiB`.
pub fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64 / 1024.0;
    let mut unit = UNITS[0];
    for u in &UNITS[1..] {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    format!("{v:.1} {unit}")
}

/// The first `max` characters of `text` on one line: line breaks and tabs shown as spaces,
/// other control characters left out, runs of spaces collapsed, `…` when cut.
pub fn one_line(text: &str, max: usize) -> String {
    let mut out = String::new();
    let mut n = 0;
    let mut space = false;
    for c in text.trim().chars() {
        let c = if c.is_whitespace() { ' ' } else { c };
        if c.is_control() {
            continue;
        }
        if c == ' ' {
            if space {
                continue;
            }
            space = true;
        } else {
            space = false;
        }
        if n == max {
            out.push('…');
            return out;
        }
        out.push(c);
        n += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_cuts_and_flattens() {
        assert_eq!(one_line("a\nb\r\n\tc", 80), "a b c");
        assert_eq!(one_line("abcdef", 3), "abc…");
        assert_eq!(one_line("abc", 3), "abc");
        assert_eq!(one_line("x\u{1b}[31my", 10), "x[31my");
    }

    #[test]
    fn sizes() {
        assert_eq!(size(10), "10 B");
        assert_eq!(size(2048), "2.0 KiB");
        assert_eq!(size(3 << 20), "3.0 MiB");
    }

    #[test]
    fn paint_off_is_plain() {
        let p = Paint { on: false };
        assert_eq!(p.paint(Color::Red, "x"), "x");
        let p = Paint { on: true };
        assert_eq!(p.paint(Color::Red, "x"), "\x1b[31mx\x1b[0m");
    }
}
