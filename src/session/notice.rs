//! Subscriptions: appended events and lifecycle notices, as they happen.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};

use crate::event::{Event, ReasonKind};

/// Something that happened in a session.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Notice {
    /// An event was appended (every append, before the notices it causes).
    Appended(Arc<Event>),
    /// A `turn/start` was appended.
    TurnStarted {
        /// The turn.
        turn: u64,
        /// The `turn/start`'s seq.
        seq: u64,
    },
    /// A `turn/end` with reason `completed` was appended.
    TurnCompleted {
        /// The turn.
        turn: u64,
        /// The `turn/end`'s seq.
        seq: u64,
    },
    /// A `turn/end` with any other reason (`error`, `aborted`, `blocked`, `max-tokens`,
    /// `interrupted`) was appended.
    TurnFailed {
        /// The turn.
        turn: u64,
        /// How it ended.
        reason: ReasonKind,
        /// The `turn/end`'s seq.
        seq: u64,
    },
    /// A `tool/call` was appended: the agent invokes a tool.
    ToolInvoked {
        /// `callId`.
        call_id: String,
        /// The tool's name.
        name: String,
        /// The `tool/call`'s seq.
        seq: u64,
    },
    /// An `approval/request` was appended: the session awaits the user's confirmation.
    AwaitingConfirmation {
        /// The call waiting for approval.
        call_id: String,
        /// The tool.
        tool: String,
        /// The `approval/request`'s seq.
        seq: u64,
    },
}

/// The subscribers of one session (or store).
#[derive(Debug, Default)]
pub(crate) struct Subscribers<T> {
    senders: Mutex<Vec<Sender<T>>>,
    /// `senders.len()`, read without the lock: an append with nobody listening (the common
    /// case) checks this alone.
    count: AtomicUsize,
}

impl<T: Clone> Subscribers<T> {
    pub(crate) fn new() -> Self {
        Subscribers {
            senders: Mutex::new(Vec::new()),
            count: AtomicUsize::new(0),
        }
    }

    /// A new receiver of everything sent from now on.
    pub(crate) fn subscribe(&self) -> Receiver<T> {
        let (tx, rx) = channel();
        let mut senders = crate::util::lock(&self.senders);
        senders.push(tx);
        self.count.store(senders.len(), Ordering::Release);
        rx
    }

    /// True when somebody listens (so notices are built only then).
    pub(crate) fn any(&self) -> bool {
        self.count.load(Ordering::Acquire) > 0
    }

    /// Sends to every live receiver, forgetting the ones that were dropped.
    pub(crate) fn send(&self, items: &[T]) {
        let mut senders = crate::util::lock(&self.senders);
        senders.retain(|tx| items.iter().all(|item| tx.send(item.clone()).is_ok()));
        self.count.store(senders.len(), Ordering::Release);
    }
}
