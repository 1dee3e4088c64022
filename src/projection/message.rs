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

/// Where the messages of a frozen prefix come from (a checkpoint's node table and the log):
/// each one is built the first time it is read.
pub(crate) trait FrozenSource: Send + Sync {
    /// The number of messages.
    fn len(&self) -> usize;
    /// The seq of the event message `i` is projected from (the node's identity) and a tool
    /// result's resolved `toolUseId`, without building the message. `i < len()`.
    fn entry(&self, i: usize) -> (u64, Option<&str>);
    /// Builds message `i` (`i < len()`). Never fails: a message whose event cannot be read
    /// (the log was damaged after the checkpoint was written) is a stand-in system message
    /// that says so.
    fn load(&self, i: usize) -> Message;
}

/// Messages built on first use, in chunks: the cells of a chunk are allocated when one of its
/// messages is first read, so a frozen prefix costs O(len / CHUNK) to set up.
const CHUNK: usize = 1024;

/// One chunk of a frozen prefix: a cell per message, filled on first use.
type Chunk = Box<[std::sync::OnceLock<Arc<Message>>]>;

/// A frozen prefix of the surface: messages read lazily from a [`FrozenSource`].
pub(crate) struct Frozen {
    source: Box<dyn FrozenSource>,
    chunks: Box<[std::sync::OnceLock<Chunk>]>,
}

impl Frozen {
    pub(crate) fn new(source: Box<dyn FrozenSource>) -> Frozen {
        let n = source.len().div_ceil(CHUNK);
        Frozen {
            source,
            chunks: (0..n).map(|_| std::sync::OnceLock::new()).collect(),
        }
    }

    fn len(&self) -> usize {
        self.source.len()
    }

    pub(crate) fn entry(&self, i: usize) -> (u64, Option<&str>) {
        self.source.entry(i)
    }

    /// Message `i` (`None` past the end), built on first use.
    fn get(&self, i: usize) -> Option<&Arc<Message>> {
        if i >= self.len() {
            return None;
        }
        let c = i / CHUNK;
        let chunk = self.chunks.get(c)?.get_or_init(|| {
            let n = CHUNK.min(self.len() - c * CHUNK);
            (0..n).map(|_| std::sync::OnceLock::new()).collect()
        });
        Some(
            chunk
                .get(i % CHUNK)?
                .get_or_init(|| Arc::new(self.source.load(i))),
        )
    }
}

impl fmt::Debug for Frozen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Frozen({} messages)", self.len())
    }
}

/// The surface: a frozen prefix (the first `frozen_len` messages of a checkpoint's table, built
/// on first use) followed by a persistent vector of messages.
#[derive(Clone, Default, Debug)]
pub(crate) struct Surface {
    frozen: Option<Arc<Frozen>>,
    frozen_len: usize,
    tail: imbl::Vector<Arc<Message>>,
}

impl Surface {
    /// A surface whose messages are all frozen.
    pub(crate) fn frozen(frozen: Frozen) -> Surface {
        Surface {
            frozen_len: frozen.len(),
            frozen: Some(Arc::new(frozen)),
            tail: imbl::Vector::new(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.frozen_len + self.tail.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn frozen_ref(&self) -> Option<&Frozen> {
        self.frozen.as_deref()
    }

    pub(crate) fn get(&self, i: usize) -> Option<&Arc<Message>> {
        if i < self.frozen_len {
            self.frozen_ref()?.get(i)
        } else {
            self.tail.get(i - self.frozen_len)
        }
    }

    /// The seq and a tool result's `toolUseId` of node `i`, without building a frozen message.
    pub(crate) fn entry(&self, i: usize) -> Option<(u64, Option<&str>)> {
        if i < self.frozen_len {
            return self.frozen_ref().map(|f| f.entry(i));
        }
        let m = self.tail.get(i - self.frozen_len)?;
        let id = match m.content.as_slice() {
            [Block::ToolResult { tool_use_id, .. }] => Some(tool_use_id.as_str()),
            _ => None,
        };
        Some((m.source_seq, id))
    }

    /// The seqs of the nodes, in order (frozen ones without building their messages).
    pub(crate) fn seqs(&self) -> impl Iterator<Item = u64> + '_ {
        let frozen = self.frozen_ref();
        (0..self.frozen_len)
            .filter_map(move |i| frozen.map(|f| f.entry(i).0))
            .chain(self.tail.iter().map(|m| m.source_seq))
    }

    pub(crate) fn push_back(&mut self, m: Arc<Message>) {
        self.tail.push_back(m);
    }

    /// Replaces the nodes at positions `start..=end` (`start <= end < len`) by `m`. Frozen
    /// nodes after the run are built (a replace inside the frozen prefix is rare: compactions).
    pub(crate) fn replace(&mut self, start: usize, end: usize, m: Arc<Message>) {
        if start >= self.frozen_len {
            let (s, e) = (start - self.frozen_len, end - self.frozen_len);
            let mut run = self.tail.split_off(s);
            let after = run.split_off((e - s + 1).min(run.len()));
            self.tail.push_back(m);
            self.tail.append(after);
            return;
        }
        let mut next = imbl::Vector::new();
        next.push_back(m);
        if end < self.frozen_len {
            if let Some(f) = self.frozen_ref() {
                for i in end + 1..self.frozen_len {
                    if let Some(m) = f.get(i) {
                        next.push_back(Arc::clone(m));
                    }
                }
            }
            next.append(std::mem::take(&mut self.tail));
        } else {
            let e = end - self.frozen_len;
            let after = self.tail.split_off((e + 1).min(self.tail.len()));
            next.append(after);
        }
        self.tail = next;
        self.frozen_len = start;
        if start == 0 {
            self.frozen = None;
        }
    }

    fn last(&self) -> Option<&Arc<Message>> {
        match self.tail.last() {
            Some(m) => Some(m),
            None => self.frozen_len.checked_sub(1).and_then(|i| self.get(i)),
        }
    }

    fn ptr_eq(&self, other: &Self) -> bool {
        let frozen = match (&self.frozen, &other.frozen) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        frozen && self.frozen_len == other.frozen_len && self.tail.ptr_eq(&other.tail)
    }

    pub(crate) fn iter(&self) -> Iter<'_> {
        Iter {
            frozen: self.frozen_ref(),
            front: 0,
            back: self.frozen_len,
            tail: self.tail.iter(),
        }
    }
}

/// A frozen model-visible history: an immutable, shared list of [`Message`]s.
///
/// A persistent vector underneath: cloning is O(1) and shares every message; a projector that
/// goes on appending never changes a `Messages` it handed out. Equality compares the messages
/// (`source_seq` included); [`check_request`](super::check_request) compares role and content
/// only.
///
/// A history restored from a session's checkpoint (docs/design.md) reads the messages before
/// the checkpoint lazily: each is decoded from its event in the log the first time it is read
/// (`get`, `iter`, `to_value`, …), so restoring costs the same at any length. Should that event
/// no longer be readable (the log was damaged after the checkpoint was written), the message
/// is a `system` message whose text starts with `agentlog:` and names the seq and the error.
///
/// It also knows the `callId`s of the tool calls whose step ended without a result
/// ([`Messages::closed_unanswered`]): the renderings give those the synthetic error result of
/// docs/events.md §7; the neutral projection shows them as recorded.
#[derive(Clone, Default)]
pub struct Messages(
    pub(crate) Surface,
    pub(crate) imbl::OrdMap<u64, Arc<str>>,
    /// The calls unanswered in a step still open (in flight): seq → callId.
    pub(crate) imbl::OrdMap<u64, Arc<str>>,
    /// The seq of the last `step/end` or `turn/end` ([`Messages::last_step_end`]).
    pub(crate) Option<u64>,
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
        self.0.iter()
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

    /// The seq of the last `step/end` or `turn/end` applied: every message before it belongs to
    /// a step that has ended. `None` before one, and for a history built by hand.
    pub(crate) fn last_step_end(&self) -> Option<u64> {
        self.3
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
            || (self.len() == other.len() && self.iter().zip(other.iter()).all(|(a, b)| a == b))
    }
}

impl Eq for Messages {}

impl FromIterator<Message> for Messages {
    fn from_iter<I: IntoIterator<Item = Message>>(iter: I) -> Self {
        Self(
            Surface {
                tail: iter.into_iter().map(Arc::new).collect(),
                ..Surface::default()
            },
            imbl::OrdMap::new(),
            imbl::OrdMap::new(),
            None,
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
pub struct Iter<'a> {
    frozen: Option<&'a Frozen>,
    /// The frozen messages not yet handed out: `front..back`.
    front: usize,
    back: usize,
    tail: imbl::vector::Iter<'a, Arc<Message>, imbl::shared_ptr::DefaultSharedPtr>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a Message;

    fn next(&mut self) -> Option<&'a Message> {
        while self.front < self.back {
            let i = self.front;
            self.front += 1;
            if let Some(m) = self.frozen.and_then(|f| f.get(i)) {
                return Some(m);
            }
        }
        self.tail.next().map(|m| &**m)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.back - self.front + self.tail.len();
        (n, Some(n))
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if let Some(m) = self.tail.next_back() {
            return Some(m);
        }
        while self.back > self.front {
            self.back -= 1;
            if let Some(m) = self.frozen.and_then(|f| f.get(self.back)) {
                return Some(m);
            }
        }
        None
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl std::iter::FusedIterator for Iter<'_> {}
