//! rkyv helpers: encode an [`Event`] into a reused buffer, access archived bytes safely (checked,
//! depth-limited), and decode an archive back into an owned event.
//!
//! The archive layout is pinned in Cargo.toml (little endian, aligned primitives, 32-bit relative
//! pointers). Archives need 8-byte alignment; [`encode_event`] starts each one on a 16-byte
//! boundary of its buffer.

use std::cell::RefCell;
use std::fmt;
use std::num::NonZeroUsize;

use rkyv::api::low::to_bytes_in_with_alloc;
use rkyv::api::{access_with_context, deserialize_using};
use rkyv::bytecheck::CheckBytes;
use rkyv::rancor::{self, Strategy};
use rkyv::ser::allocator::Arena;
use rkyv::util::AlignedVec;
use rkyv::validation::archive::ArchiveValidator;
use rkyv::Portable;

use super::parse::MAX_DEPTH;
use super::types::{ArchivedEvent, Event};

/// The deepest archive [`access_event`] accepts, in rkyv subtrees (each vector or out-of-line
/// string is one level). An event the parser admits (JSON nesting up to
/// [`MAX_DEPTH`](crate::event::MAX_DEPTH)) needs about one level per JSON level plus a few;
/// twice that leaves room and still bounds the validator's recursion on hostile bytes.
pub const MAX_ARCHIVE_DEPTH: usize = 2 * MAX_DEPTH + 16;

/// Archives start at a multiple of this in the buffer [`encode_event`] appends to.
pub const ARCHIVE_ALIGN: usize = 16;

/// Encoding, checking or decoding an archive failed.
#[derive(Debug)]
#[non_exhaustive]
pub struct ArchiveError {
    /// What was being done.
    pub op: ArchiveOp,
    source: rancor::Error,
}

/// The archive operation an [`ArchiveError`] comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ArchiveOp {
    /// Serializing an event ([`encode_event`]).
    Encode,
    /// Validating bytes ([`access_event`]): they are not a valid archived event.
    Access,
    /// Deserializing an archive into owned values ([`decode_event`]).
    Decode,
}

impl fmt::Display for ArchiveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.op {
            ArchiveOp::Encode => "cannot encode event",
            ArchiveOp::Access => {
                "invalid event archive (the record's checksum matches, but its bytes are not an \
                 event of this format: written by another program or another version)"
            }
            ArchiveOp::Decode => "cannot decode event archive",
        };
        // rkyv's errors carry details only in debug builds; in release builds their text is a
        // hint for rkyv's developers, not for users.
        if cfg!(debug_assertions) {
            write!(f, "{what}: {}", self.source)
        } else {
            f.write_str(what)
        }
    }
}

impl std::error::Error for ArchiveError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Encodes events with a scratch arena kept between calls.
#[derive(Default)]
pub struct EventEncoder {
    arena: Arena,
}

impl fmt::Debug for EventEncoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventEncoder").finish_non_exhaustive()
    }
}

impl EventEncoder {
    /// A new encoder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends the archive of `event` to `buf`, first padding `buf` with zeros to a multiple of
    /// [`ARCHIVE_ALIGN`]. Returns where the archive starts: it is `buf[start..]`. On error `buf`
    /// is as it was.
    pub fn encode(&mut self, event: &Event, buf: &mut AlignedVec) -> Result<usize, ArchiveError> {
        let old_len = buf.len();
        let start = old_len.next_multiple_of(ARCHIVE_ALIGN);
        buf.resize(start, 0);
        let result =
            to_bytes_in_with_alloc::<_, _, rancor::Error>(event, &mut *buf, self.arena.acquire());
        self.arena.shrink();
        match result {
            Ok(_) => Ok(start),
            Err(source) => {
                buf.resize(old_len, 0);
                Err(ArchiveError {
                    op: ArchiveOp::Encode,
                    source,
                })
            }
        }
    }
}

thread_local! {
    static ENCODER: RefCell<EventEncoder> = RefCell::new(EventEncoder::new());
}

/// Appends the archive of `event` to `buf` (see [`EventEncoder::encode`]), with a per-thread
/// arena. Returns where the archive starts: it is `buf[start..]`.
pub fn encode_event(event: &Event, buf: &mut AlignedVec) -> Result<usize, ArchiveError> {
    ENCODER.with(|encoder| match encoder.try_borrow_mut() {
        Ok(mut encoder) => encoder.encode(event, buf),
        // Only reachable by re-entering from inside an encode; use a fresh arena then.
        Err(_) => EventEncoder::new().encode(event, buf),
    })
}

/// Checks that `bytes` hold a valid archived event (bounds, alignment, UTF-8, enum tags, nesting
/// at most [`MAX_ARCHIVE_DEPTH`]) and returns it, zero-copy. Bytes from anywhere (a corrupt or
/// hand-crafted file) give an error, never undefined behaviour or a panic. `bytes` must start at
/// an 8-byte aligned address (mapped files and [`encode_event`] output are).
pub fn access_event(bytes: &[u8]) -> Result<&ArchivedEvent, ArchiveError> {
    if crate::log::vouched(bytes) {
        // SAFETY: these are exactly the bytes of a record that a reader's check-ahead thread
        // validated with `archive_is_valid` (this function's checks) and that the reader then
        // handed out on this thread, in a segment map that is still alive: published records
        // never change, so they are still valid (src/log/readahead.rs, "Vouched payloads").
        #[allow(unsafe_code)]
        return Ok(unsafe { rkyv::access_unchecked::<ArchivedEvent>(bytes) });
    }
    access_checked::<ArchivedEvent>(bytes)
}

/// True when `bytes` hold a valid archived event: [`access_event`]'s checks, for a thread that
/// validates records ahead of their reader.
pub(crate) fn archive_is_valid(bytes: &[u8]) -> bool {
    access_checked::<ArchivedEvent>(bytes).is_ok()
}

/// Checked, depth-limited access to any archived type of this layer.
pub(crate) fn access_checked<T>(bytes: &[u8]) -> Result<&T, ArchiveError>
where
    T: Portable + for<'a> CheckBytes<Strategy<ArchiveValidator<'a>, rancor::Error>>,
{
    let depth = NonZeroUsize::new(MAX_ARCHIVE_DEPTH);
    let mut validator = ArchiveValidator::with_max_depth(bytes, depth);
    access_with_context::<T, _, rancor::Error>(bytes, &mut validator).map_err(|source| {
        ArchiveError {
            op: ArchiveOp::Access,
            source,
        }
    })
}

/// Deserializes an archived event into an owned [`Event`]. Fails only if a collection in the
/// archive is too large to allocate.
pub fn decode_event(archived: &ArchivedEvent) -> Result<Event, ArchiveError> {
    deserialize_using::<Event, _, rancor::Error>(archived, &mut ()).map_err(|source| ArchiveError {
        op: ArchiveOp::Decode,
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::value::ArchivedValue;

    /// Builds by hand an archive of `depth` arrays nested in each other: `[[[…[]…]]]`. Each node
    /// is an `ArchivedValue::Array` whose vector points at the node before it.
    fn nested_arrays(depth: usize) -> AlignedVec {
        const NODE: usize = 12; // tag u8, 3 padding, relative offset i32, length u32
        assert_eq!(size_of::<ArchivedValue>(), NODE);
        assert_eq!(align_of::<ArchivedValue>(), 4);
        // The tag of `Array` is its variant index.
        let array_tag = 4u8;
        let mut buf = AlignedVec::<16>::new();
        for level in 0..depth {
            let mut node = [0u8; NODE];
            node[0] = array_tag;
            // The offset field (at +4) points back to the previous node, one item; the innermost
            // array is empty and points at its own start.
            let (offset, len) = if level == 0 {
                (-4i32, 0u32)
            } else {
                (-((NODE + 4) as i32), 1)
            };
            node[4..8].copy_from_slice(&offset.to_le_bytes());
            node[8..12].copy_from_slice(&len.to_le_bytes());
            buf.extend_from_slice(&node);
        }
        buf
    }

    #[test]
    fn hand_made_nesting_within_the_limit_is_accepted() {
        let bytes = nested_arrays(100);
        let mut value = access_checked::<ArchivedValue>(&bytes).unwrap();
        let mut levels = 1;
        while let Some([inner]) = value.as_array() {
            value = inner;
            levels += 1;
        }
        assert_eq!(levels, 100);
    }

    #[test]
    fn hand_made_deep_nesting_is_refused_not_a_crash() {
        // Every vector counts as a level, and so does the root.
        assert!(access_checked::<ArchivedValue>(&nested_arrays(MAX_ARCHIVE_DEPTH - 2)).is_ok());
        for depth in [MAX_ARCHIVE_DEPTH - 1, 100_000] {
            let bytes = nested_arrays(depth);
            let err = access_checked::<ArchivedValue>(&bytes).unwrap_err();
            assert_eq!(err.op, ArchiveOp::Access);
        }
    }

    #[test]
    fn everything_the_parser_admits_passes_the_depth_check() {
        // 128 levels: the line, `data`, then alternating arrays and objects down to a string
        // long enough to be stored out of line (one more subtree).
        let mut inner = format!("\"{}\"", "x".repeat(64));
        for level in 0..crate::event::MAX_DEPTH - 2 {
            inner = if level % 2 == 0 {
                format!("[{inner}]")
            } else {
                format!("{{\"k\":{inner}}}")
            };
        }
        let line = format!(r#"{{"type":"x/y","seq":0,"time":1,"data":{{"v":{inner}}}}}"#);
        let event = crate::event::parse_event_line(&line).unwrap();
        let mut buf = AlignedVec::<16>::new();
        encode_event(&event, &mut buf).unwrap();
        let archived = access_event(&buf).unwrap();
        assert_eq!(archived.to_canonical_string(), line);
    }

    #[test]
    fn garbage_and_truncation_are_errors() {
        let event = crate::event::parse_event_line(
            r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1,"x":[1,"a",{"b":null}]}}"#,
        )
        .unwrap();
        let mut buf = AlignedVec::<16>::new();
        let start = encode_event(&event, &mut buf).unwrap();
        assert_eq!(start, 0);
        let archived = access_event(&buf).unwrap();
        assert_eq!(decode_event(archived).unwrap(), event);
        assert!(access_event(&[]).is_err());
        for cut in 0..buf.len() {
            // a prefix copied to an aligned buffer: must not panic, whatever it says
            let mut prefix = AlignedVec::<16>::new();
            prefix.extend_from_slice(&buf[..cut]);
            let _ = access_event(&prefix);
        }
        for i in 0..buf.len() {
            for bit in 0..8 {
                let mut flipped = AlignedVec::<16>::new();
                flipped.extend_from_slice(&buf);
                flipped[i] ^= 1 << bit;
                if let Ok(archived) = access_event(&flipped) {
                    // whatever validates must also write and decode without panicking
                    let _ = archived.to_canonical_string();
                    let _ = decode_event(archived);
                }
            }
        }
    }

    #[test]
    fn appending_pads_to_the_archive_alignment() {
        let event = crate::event::parse_event_line(
            r#"{"type":"step/end","seq":7,"time":-3,"data":{"turn":1,"step":2}}"#,
        )
        .unwrap();
        let mut buf = AlignedVec::<16>::new();
        buf.extend_from_slice(b"header");
        let start = encode_event(&event, &mut buf).unwrap();
        assert_eq!(start, 16);
        assert_eq!(&buf[..6], b"header");
        let archived = access_event(&buf[start..]).unwrap();
        assert_eq!(archived.seq(), 7);
        assert_eq!(archived.time(), -3);
        let second = encode_event(&event, &mut buf).unwrap();
        assert_eq!(second % ARCHIVE_ALIGN, 0);
        assert_eq!(access_event(&buf[second..]).unwrap().seq(), 7);
    }

    /// Format version 2: an archive pays for its own payload, not for the largest event type,
    /// and absent optional envelope members are null pointers. These small events take fewer
    /// bytes archived than as canonical JSON (a `turn/end` does not: its `reason` holds an
    /// inline optional `error`; 104 bytes for a 103-byte line).
    #[test]
    fn small_events_archive_smaller_than_their_json() {
        for line in [
            r#"{"type":"step/end","seq":12345,"time":1755000000000,"data":{"turn":3,"step":2}}"#,
            r#"{"type":"turn/start","seq":12345,"time":1755000000000,"data":{"turn":3}}"#,
            r#"{"type":"assistant/chunk","seq":12345,"time":1755000000000,"data":{"turn":3,"step":2,"chunk":{"type":"text-delta","text":"the parser"}}}"#,
        ] {
            let event = crate::event::parse_event_line(line).unwrap();
            let mut buf = AlignedVec::<16>::new();
            encode_event(&event, &mut buf).unwrap();
            assert!(
                buf.len() < line.len(),
                "{} B archived for {line}",
                buf.len()
            );
            assert_eq!(access_event(&buf).unwrap().to_canonical_string(), line);
        }
    }

    /// The archived sizes docs/format.md gives for format version 2.
    #[test]
    fn archived_layout_is_the_documented_one() {
        use crate::event::archived::{ArchivedChunk, ArchivedEventData, ArchivedStepEnd};
        assert_eq!(size_of::<ArchivedEvent>(), 40);
        assert_eq!(align_of::<ArchivedEvent>(), 8);
        assert_eq!(size_of::<ArchivedEventData>(), 8);
        assert_eq!(size_of::<ArchivedStepEnd>(), 24);
        assert_eq!(size_of::<ArchivedChunk>(), 24);
    }

    /// The table of docs/format.md: archive sizes of three small events.
    #[test]
    fn small_event_sizes_are_the_documented_ones() {
        for (line, archive) in [
            (
                r#"{"type":"step/end","seq":12345,"time":1755000000000,"data":{"turn":3,"step":2}}"#,
                64,
            ),
            (
                r#"{"type":"turn/start","seq":12345,"time":1755000000000,"data":{"turn":3}}"#,
                56,
            ),
            (
                r#"{"type":"assistant/chunk","seq":12345,"time":1755000000000,"data":{"turn":3,"step":2,"chunk":{"type":"text-delta","text":"the parser"}}}"#,
                104,
            ),
        ] {
            let event = crate::event::parse_event_line(line).unwrap();
            let mut buf = AlignedVec::<16>::new();
            encode_event(&event, &mut buf).unwrap();
            assert_eq!(buf.len(), archive, "{line}");
        }
    }

    #[test]
    fn optional_envelope_members_round_trip() {
        for line in [
            r#"{"type":"system/message","seq":4,"time":1,"data":{"role":"system","content":[]},"surfaceOp":"append","sourceEventSeqs":[]}"#,
            r#"{"type":"system/message","seq":4,"time":1,"data":{"role":"system","content":[]},"surfaceOp":{"op":"replace","startSeq":1,"endSeq":3,"x":null},"sourceEventSeqs":[1,2,3]}"#,
            r#"{"type":"system/message","seq":4,"time":1,"data":{"role":"system","content":[]}}"#,
        ] {
            let event = crate::event::parse_event_line(line).unwrap();
            let mut buf = AlignedVec::<16>::new();
            encode_event(&event, &mut buf).unwrap();
            let archived = access_event(&buf).unwrap();
            assert_eq!(archived.to_canonical_string(), line);
            assert_eq!(decode_event(archived).unwrap(), event);
        }
    }
}
