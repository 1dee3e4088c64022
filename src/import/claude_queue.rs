//! The queue of messages a Claude Code user typed while the agent worked.
//!
//! Claude Code records the queue's operations as `queue-operation` lines: `enqueue` (with the
//! text), then one of `remove` (the message was taken in by the running turn, mid-turn: the model
//! received it), `dequeue` (taken off to run as the next prompt, which a user line then records)
//! or `popAll` (the user pulled the queue back into the input box: withdrawn). Newer versions
//! also write a `queued_command` attachment for each message taken in mid-turn. This keeps the
//! texts waiting, tells which message a `remove` took (its `content`, or the oldest waiting), and
//! makes sure one message taken in is written once when a version records it both ways.

use crate::event::Value;

use super::{get_str, resume_strings};

/// Which record said that a queued message reached the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Taken {
    /// A `queue-operation` `remove`.
    Remove,
    /// A `queued_command` attachment.
    Attachment,
}

/// The queue's state while a file's lines are read.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    /// The texts waiting, oldest first.
    waiting: Vec<String>,
    /// Messages taken in and written in this turn, and which record wrote them: the other
    /// record of the same message writes nothing.
    written: Vec<(Taken, String)>,
}

/// Waiting texts kept in an import's resume state at most (a queue is a few messages).
const MAX_WAITING: usize = 64;

impl Queue {
    /// The queue an earlier run of the file ended with (its resume state's `queue`).
    pub(crate) fn resumed(resume: Option<&Value>) -> Queue {
        Queue {
            waiting: resume_strings(resume, "queue"),
            written: Vec::new(),
        }
    }

    /// The waiting texts, for the next run's resume state (`None` when none wait).
    pub(crate) fn to_value(&self) -> Option<Value> {
        let keep = &self.waiting[self.waiting.len().saturating_sub(MAX_WAITING)..];
        (!keep.is_empty()).then(|| Value::Array(keep.iter().map(|t| t.as_str().into()).collect()))
    }

    /// A `queue-operation` line: updates the queue; for a `remove`, the text of the message the
    /// running turn took in (`None` for the other operations, or when nothing is known of it).
    pub(crate) fn operation(&mut self, v: &Value) -> Option<String> {
        let content = get_str(v, "content").filter(|c| !c.trim().is_empty());
        match get_str(v, "operation")? {
            "enqueue" => {
                if let Some(c) = content {
                    self.waiting.push(c.to_owned());
                }
                None
            }
            // A slash command leaves the queue to run as a command once the turn ends (a
            // `<command-name>` user line records it then): the model never receives its text.
            "remove" => match content {
                Some(c) => {
                    self.forget(c);
                    (!is_slash_command(c)).then(|| c.to_owned())
                }
                // Without its text: the oldest message the user typed. A background task's
                // notification waits in the same queue but reaches the model later as a user
                // line of its own, never taken in by a running turn.
                None => {
                    let i = self.waiting.iter().position(|w| !is_notification(w))?;
                    Some(self.waiting.remove(i)).filter(|t| !is_slash_command(t))
                }
            },
            "dequeue" => {
                match content {
                    Some(c) => self.forget(c),
                    None if !self.waiting.is_empty() => {
                        self.waiting.remove(0);
                    }
                    None => {}
                }
                None
            }
            "popAll" => {
                self.waiting.clear();
                None
            }
            _ => None,
        }
    }

    /// A typed prompt: a waiting message with its text was run as a prompt (older versions
    /// write no operation for it).
    pub(crate) fn prompt(&mut self, text: &str) {
        self.forget(text);
        self.written.clear();
    }

    /// Whether the message `text` that `by` says reached the model is to be written: not when
    /// the other record of the same message wrote it already in this turn.
    pub(crate) fn take(&mut self, by: Taken, text: &str) -> bool {
        match self.written.iter().position(|(t, s)| *t != by && s == text) {
            Some(i) => {
                self.written.remove(i);
                false
            }
            None => {
                self.written.push((by, text.to_owned()));
                true
            }
        }
    }

    fn forget(&mut self, text: &str) {
        if let Some(i) = self.waiting.iter().position(|w| w == text) {
            self.waiting.remove(i);
        }
    }
}

/// A background task's notification (`<task-notification>…`), queued by Claude Code itself.
fn is_notification(text: &str) -> bool {
    text.trim_start().starts_with("<task-notification>")
}

/// A slash command (`/model`, `/compact keep the tests`): a `/`, a name of letters, digits,
/// `-`, `_` or `:` starting with a letter, then the end or a space. A path (`/tmp/x`) is not.
fn is_slash_command(text: &str) -> bool {
    let Some(rest) = text.trim().strip_prefix('/') else {
        return false;
    };
    let name_end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let name = &rest[..name_end];
    name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(q: &mut Queue, line: &str) -> Option<String> {
        q.operation(&crate::event::parse_json(line).unwrap())
    }

    #[test]
    fn a_remove_takes_its_content_or_the_oldest_waiting() {
        let mut q = Queue::default();
        op(&mut q, r#"{"operation":"enqueue","content":"a"}"#);
        op(&mut q, r#"{"operation":"enqueue","content":"b"}"#);
        op(&mut q, r#"{"operation":"enqueue","content":"c"}"#);
        assert_eq!(
            op(&mut q, r#"{"operation":"remove","content":"b"}"#),
            Some("b".into())
        );
        assert_eq!(op(&mut q, r#"{"operation":"remove"}"#), Some("a".into()));
        assert_eq!(op(&mut q, r#"{"operation":"dequeue"}"#), None);
        assert_eq!(op(&mut q, r#"{"operation":"remove"}"#), None);
    }

    #[test]
    fn a_remove_without_its_text_never_takes_a_task_notification() {
        let mut q = Queue::default();
        op(
            &mut q,
            r#"{"operation":"enqueue","content":"<task-notification>\n<task-id>b1</task-id>"}"#,
        );
        op(
            &mut q,
            r#"{"operation":"enqueue","content":"new beads were added"}"#,
        );
        assert_eq!(
            op(&mut q, r#"{"operation":"remove"}"#),
            Some("new beads were added".into())
        );
        assert_eq!(op(&mut q, r#"{"operation":"remove"}"#), None);
    }

    #[test]
    fn a_removed_slash_command_never_reaches_the_model() {
        let mut q = Queue::default();
        op(&mut q, r#"{"operation":"enqueue","content":"/model"}"#);
        assert_eq!(op(&mut q, r#"{"operation":"remove"}"#), None);
        op(
            &mut q,
            r#"{"operation":"enqueue","content":"/compact keep the tests"}"#,
        );
        assert_eq!(
            op(
                &mut q,
                r#"{"operation":"remove","content":"/compact keep the tests"}"#
            ),
            None
        );
        // A path is text the user typed, not a command.
        op(
            &mut q,
            r#"{"operation":"enqueue","content":"/tmp/x fails"}"#,
        );
        assert_eq!(
            op(&mut q, r#"{"operation":"remove"}"#),
            Some("/tmp/x fails".into())
        );
        assert_eq!(q.to_value(), None);
        assert!(!is_slash_command("/"));
        assert!(!is_slash_command("/9lives"));
        assert!(is_slash_command(" /mcp:tool-name arg"));
    }

    #[test]
    fn a_prompt_or_pop_all_empties_what_it_took() {
        let mut q = Queue::default();
        op(
            &mut q,
            r#"{"operation":"enqueue","content":"run as a prompt"}"#,
        );
        op(&mut q, r#"{"operation":"enqueue","content":"taken in"}"#);
        q.prompt("run as a prompt");
        assert_eq!(
            op(&mut q, r#"{"operation":"remove"}"#),
            Some("taken in".into())
        );
        op(&mut q, r#"{"operation":"enqueue","content":"withdrawn"}"#);
        op(&mut q, r#"{"operation":"popAll"}"#);
        assert_eq!(op(&mut q, r#"{"operation":"remove"}"#), None);
        assert_eq!(q.to_value(), None);
    }

    #[test]
    fn one_message_recorded_both_ways_is_written_once() {
        let mut q = Queue::default();
        assert!(q.take(Taken::Remove, "x"));
        assert!(!q.take(Taken::Attachment, "x"));
        assert!(q.take(Taken::Attachment, "y"));
        assert!(!q.take(Taken::Remove, "y"));
        // The same text queued twice: each record pair is one message.
        assert!(q.take(Taken::Remove, "x"));
        assert!(q.take(Taken::Remove, "x"));
        assert!(!q.take(Taken::Attachment, "x"));
        assert!(!q.take(Taken::Attachment, "x"));
    }

    #[test]
    fn the_waiting_texts_go_on_in_the_next_run() {
        let mut q = Queue::default();
        op(&mut q, r#"{"operation":"enqueue","content":"later"}"#);
        let saved =
            crate::event::parse_json(&format!(r#"{{"queue":{}}}"#, q.to_value().unwrap())).unwrap();
        let mut next = Queue::resumed(Some(&saved));
        assert_eq!(
            op(&mut next, r#"{"operation":"remove"}"#),
            Some("later".into())
        );
    }
}
