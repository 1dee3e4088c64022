//! The neutral message model: [`Role`], [`Message`] and the immutable list [`Messages`].

use std::fmt;
use std::sync::Arc;

use crate::event::{parse_json, Block, ObjectWriter, Value, WriteJson};

/// Who a message is from, in the neutral projection. Tool results are projected as `user`
/// messages holding `tool_result` blocks (docs/events.md §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// `"user"`
    User,
    /// `"assistant"`
    Assistant,
    /// `"system"`
    System,
}

impl Role {
    /// The role as written in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Assistant => "assistant",
            Self::System => "system",
        }
    }

    /// The role's quoted JSON text.
    fn json(self) -> &'static str {
        match self {
            Self::User => "\"user\"",
            Self::Assistant => "\"assistant\"",
            Self::System => "\"system\"",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One message of the model-visible history: `{"role":…,"content":[…]}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// Who it is from.
    pub role: Role,
    /// The content blocks, exactly as recorded (canonical block form).
    pub content: Vec<Block>,
    /// The seq of the event the message was projected from: the surface node's identity, named
    /// by a later replace. Not part of the JSON; 0 for a message built by hand.
    pub source_seq: u64,
}

impl Message {
    /// A message built by hand (for a request to compare with [`check_request`](super::check_request)):
    /// `source_seq` 0.
    pub fn new(role: Role, content: Vec<Block>) -> Self {
        Self {
            role,
            content,
            source_seq: 0,
        }
    }

    /// Appends the canonical compact JSON `{"role":…,"content":[…]}` to `out` (blocks written
    /// by the event layer's canonical writer, exactly as in the log).
    pub fn write_canonical(&self, out: &mut Vec<u8>) {
        self.write_json(out);
    }

    /// The canonical compact JSON text.
    pub fn to_canonical_string(&self) -> String {
        let mut out = Vec::with_capacity(128);
        self.write_json(&mut out);
        into_string(out)
    }

    /// The message as a JSON [`Value`] (the shape of the `*.messages.json` files): the
    /// canonical text read back, so blocks are written in one place. (A block built by hand
    /// and nested deeper than the parser's [`MAX_DEPTH`](crate::event::MAX_DEPTH) cannot be
    /// read back and comes out as `null`; blocks from the log always can.)
    pub fn to_value(&self) -> Value {
        let mut out = Vec::with_capacity(128);
        self.write_json(&mut out);
        text_to_value(out)
    }
}

impl WriteJson for Message {
    fn write_json(&self, out: &mut Vec<u8>) {
        let mut w = ObjectWriter::begin(out);
        w.raw_member("\"role\":", self.role.json());
        w.member("\"content\":", &self.content);
        w.end();
    }
}

impl fmt::Display for Message {
    /// The canonical compact JSON.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_canonical_string())
    }
}

/// The writer only emits UTF-8 (it copies `str`s and ASCII); the lossy path never replaces.
fn into_string(buf: Vec<u8>) -> String {
    String::from_utf8(buf).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Parses JSON text the canonical writer produced. The writer only writes valid JSON within the
/// nesting limit the parser accepts (every block was read by that parser), so the fallback is
/// never taken.
pub(crate) fn text_to_value(buf: Vec<u8>) -> Value {
    parse_json(&into_string(buf)).unwrap_or(Value::Null)
}

/// The neutral value of one block, as the canonical writer writes it.
pub(crate) fn block_value(block: &Block) -> Value {
    let mut out = Vec::with_capacity(64);
    block.write_json(&mut out);
    text_to_value(out)
}

/// A frozen model-visible history: an immutable, shared list of [`Message`]s.
///
/// A persistent vector underneath: cloning is O(1) and shares every message; a projector that
/// goes on appending never changes a `Messages` it handed out. Equality compares the messages
/// (`source_seq` included); [`check_request`](super::check_request) compares role and content
/// only.
///
/// It also knows the `callId`s of the tool calls whose step ended without a result
/// ([`Messages::closed_unanswered`]): the renderings give those the synthetic error result of
/// docs/events.md §7; the neutral projection shows them as recorded.
#[derive(Clone, Default)]
pub struct Messages(
    pub(crate) imbl::Vector<Arc<Message>>,
    pub(crate) imbl::OrdMap<u64, Arc<str>>,
    /// The calls unanswered in a step still open (in flight): seq → callId.
    pub(crate) imbl::OrdMap<u64, Arc<str>>,
);

impl Messages {
    /// An empty history.
    pub fn new() -> Self {
        Self::default()
    }

    /// The number of messages.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when there are no messages.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The message at `index` (O(log n)).
    pub fn get(&self, index: usize) -> Option<&Message> {
        self.0.get(index).map(|m| &**m)
    }

    /// The last message.
    pub fn last(&self) -> Option<&Message> {
        self.0.last().map(|m| &**m)
    }

    /// The messages in order.
    pub fn iter(&self) -> Iter<'_> {
        Iter(self.0.iter())
    }

    /// A copy of the messages as a plain vector (O(n), clones every message).
    pub fn to_vec(&self) -> Vec<Message> {
        self.iter().cloned().collect()
    }

    /// The tool calls whose step (or turn) ended without a result: `(seq of the tool/call,
    /// callId)`, in seq order. Empty for a history built by hand.
    pub fn closed_unanswered(&self) -> impl Iterator<Item = (u64, &str)> + '_ {
        self.1.iter().map(|(seq, id)| (*seq, &**id))
    }

    /// The tool calls without a result in a step still open (their tools may be running):
    /// `(seq of the tool/call, callId)`, in seq order. Empty for a history built by hand.
    pub fn in_flight(&self) -> impl Iterator<Item = (u64, &str)> + '_ {
        self.2.iter().map(|(seq, id)| (*seq, &**id))
    }

    /// True when both share the same storage (then they are equal). O(1).
    pub fn ptr_eq(&self, other: &Self) -> bool {
        self.0.ptr_eq(&other.0)
    }

    /// Appends the canonical compact JSON array of the messages to `out`.
    pub fn write_canonical(&self, out: &mut Vec<u8>) {
        out.push(b'[');
        for (i, message) in self.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            message.write_json(out);
        }
        out.push(b']');
    }

    /// The canonical compact JSON array (the form of the `*.messages.json` files).
    pub fn to_canonical_string(&self) -> String {
        let mut out = Vec::with_capacity(128 * self.len() + 2);
        self.write_canonical(&mut out);
        into_string(out)
    }

    /// The messages as a JSON array [`Value`].
    pub fn to_value(&self) -> Value {
        Value::Array(self.iter().map(Message::to_value).collect())
    }
}

impl fmt::Debug for Messages {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl fmt::Display for Messages {
    /// The canonical compact JSON array.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_canonical_string())
    }
}

impl PartialEq for Messages {
    fn eq(&self, other: &Self) -> bool {
        self.ptr_eq(other)
            || (self.len() == other.len() && self.0.iter().zip(other.0.iter()).all(|(a, b)| a == b))
    }
}

impl Eq for Messages {}

impl FromIterator<Message> for Messages {
    fn from_iter<I: IntoIterator<Item = Message>>(iter: I) -> Self {
        Self(
            iter.into_iter().map(Arc::new).collect(),
            imbl::OrdMap::new(),
            imbl::OrdMap::new(),
        )
    }
}

impl From<Vec<Message>> for Messages {
    fn from(messages: Vec<Message>) -> Self {
        messages.into_iter().collect()
    }
}

impl<'a> IntoIterator for &'a Messages {
    type Item = &'a Message;
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

/// The messages of a [`Messages`], in order.
#[derive(Clone)]
pub struct Iter<'a>(imbl::vector::Iter<'a, Arc<Message>, imbl::shared_ptr::DefaultSharedPtr>);

impl<'a> Iterator for Iter<'a> {
    type Item = &'a Message;

    fn next(&mut self) -> Option<&'a Message> {
        self.0.next().map(|m| &**m)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back().map(|m| &**m)
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl std::iter::FusedIterator for Iter<'_> {}
