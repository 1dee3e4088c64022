//! Progress bars on standard error, only when it is a terminal and the work is large; never on
//! standard output.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::output::stderr_is_terminal;

/// Below these sizes the work ends before a bar would help.
const MIN_BYTES: u64 = 8 << 20;
const MIN_EVENTS: u64 = 50_000;

/// A progress bar, or nothing.
pub struct Progress(Option<ProgressBar>, Shown);

/// When a bar is drawn.
#[derive(Clone, Copy)]
enum Shown {
    /// From the start (the work is known to be long).
    Now,
    /// Hidden until this much is done (the size of the work is not known: stdin).
    From(u64),
}

impl Progress {
    fn new(total: Option<u64>, template: &str, what: &str, shown: Shown) -> Progress {
        if !stderr_is_terminal() {
            return Progress(None, shown);
        }
        let target = match shown {
            Shown::Now => ProgressDrawTarget::stderr(),
            Shown::From(_) => ProgressDrawTarget::hidden(),
        };
        let bar = ProgressBar::with_draw_target(total, target);
        let style = ProgressStyle::with_template(template)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        bar.set_style(style);
        bar.set_message(what.to_string());
        Progress(Some(bar), shown)
    }

    /// A bar counting bytes (`total` when known, e.g. the size of the file read).
    pub fn bytes(total: Option<u64>, what: &str) -> Progress {
        if total.is_some_and(|t| t < MIN_BYTES) {
            return Progress(None, Shown::Now);
        }
        let template = match total {
            Some(_) => "{msg} [{bar:30}] {bytes}/{total_bytes} ({eta})",
            None => "{msg} {spinner} {bytes}",
        };
        // Of unknown size (stdin): drawn once as much is read as makes a bar worth it.
        let shown = match total {
            Some(_) => Shown::Now,
            None => Shown::From(MIN_BYTES),
        };
        Progress::new(total, template, what, shown)
    }

    /// A bar counting events.
    pub fn events(total: u64, what: &str) -> Progress {
        if total < MIN_EVENTS {
            return Progress(None, Shown::Now);
        }
        Progress::new(
            Some(total),
            "{msg} [{bar:30}] {human_pos}/{human_len} events ({eta})",
            what,
            Shown::Now,
        )
    }

    /// Sets the count done.
    pub fn set(&mut self, done: u64) {
        if let Some(b) = &self.0 {
            if let Shown::From(at) = self.1 {
                if done >= at {
                    b.set_draw_target(ProgressDrawTarget::stderr());
                    self.1 = Shown::Now;
                }
            }
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
