//! Progress bars on standard error, only when it is a terminal and the work is large; never on
//! standard output.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::output::stderr_is_terminal;

/// Below these sizes the work ends before a bar would help.
const MIN_BYTES: u64 = 8 << 20;
const MIN_EVENTS: u64 = 50_000;

/// A progress bar, or nothing.
pub struct Progress(Option<ProgressBar>);

impl Progress {
    fn new(total: Option<u64>, template: &str, what: &str) -> Progress {
        if !stderr_is_terminal() {
            return Progress(None);
        }
        let bar = ProgressBar::with_draw_target(total, ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template(template)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        bar.set_style(style);
        bar.set_message(what.to_string());
        Progress(Some(bar))
    }

    /// A bar counting bytes (`total` when known, e.g. the size of the file read).
    pub fn bytes(total: Option<u64>, what: &str) -> Progress {
        if total.is_some_and(|t| t < MIN_BYTES) {
            return Progress(None);
        }
        let template = match total {
            Some(_) => "{msg} [{bar:30}] {bytes}/{total_bytes} ({eta})",
            None => "{msg} {spinner} {bytes}",
        };
        Progress::new(total, template, what)
    }

    /// A bar counting events.
    pub fn events(total: u64, what: &str) -> Progress {
        if total < MIN_EVENTS {
            return Progress(None);
        }
        Progress::new(
            Some(total),
            "{msg} [{bar:30}] {human_pos}/{human_len} events ({eta})",
            what,
        )
    }

    /// Sets the count done.
    pub fn set(&self, done: u64) {
        if let Some(b) = &self.0 {
            b.set_position(done);
        }
    }

    /// Removes the bar.
    pub fn finish(&self) {
        if let Some(b) = &self.0 {
            b.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}
