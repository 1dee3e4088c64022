//! The projection (docs/events.md §5): the model-visible history derived from a session's events,
//! incrementally, as frozen snapshots; its provider renderings; and the check that a request
//! equals what was recorded.
//!
//! - [`Projector`] applies events one at a time ([`Projector::check`] first, to refuse an
//!   append whose `surfaceOp` or tool result cannot be projected). [`Projector::messages`] is
//!   an O(1) immutable snapshot ([`Messages`], a persistent vector of shared [`Message`]s).
//! - [`messages()`] / [`messages_at`] project a whole log, or its first `n` events (the same
//!   names as `Session::messages`, `SessionReader::messages` / `messages_at`).
//! - [`render_openai`], [`render_anthropic`] (and [`render`] by [`Format`]) are views of the
//!   neutral projection.
//! - [`check_request`] and [`check_rendered`] compare a request about to be sent with the
//!   projection and name the first [`Divergence`].
//!
//! ```
//! use agentlog::event::parse_jsonl;
//! use agentlog::projection::{check_rendered, render_openai, Format, Projector, Role};
//!
//! let log = br#"{"type":"user/message","seq":0,"time":1,"data":{"role":"user","content":[{"type":"text","text":"Hi"}]}}
//! {"type":"turn/start","seq":1,"time":2,"data":{"turn":1}}
//! {"type":"step/start","seq":2,"time":3,"data":{"turn":1,"step":1}}
//! {"type":"assistant/message","seq":3,"time":4,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"ls","input":{}}]}}}
//! {"type":"tool/call","seq":4,"time":5,"data":{"turn":1,"step":1,"callId":"c1","name":"ls","arguments":"{}"}}
//! {"type":"tool/result","seq":5,"time":6,"data":{"turn":1,"step":1,"message":{"role":"tool","toolName":"ls","content":"a.txt","isError":false}}}
//! "#;
//! let (_, events) = parse_jsonl(log)?;
//!
//! let mut projector = Projector::new();
//! for event in &events {
//!     projector.check(event)?; // a session refuses the append when this fails
//!     projector.apply(event)?;
//! }
//! let history = projector.messages();
//! assert_eq!(history.len(), 3);
//! assert_eq!(history.get(2).map(|m| m.role), Some(Role::User));
//! // The result's toolUseId was resolved by name: the open "ls" call of turn 1, step 1.
//! assert_eq!(
//!     history.to_canonical_string(),
//!     r#"[{"role":"user","content":[{"type":"text","text":"Hi"}]},{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"ls","input":{}}]},{"role":"user","content":[{"type":"tool_result","toolUseId":"c1","toolName":"ls","content":"a.txt","isError":false}]}]"#
//! );
//!
//! // The same history as OpenAI chat messages, and the check an agent runs before sending it.
//! let request = render_openai(&history);
//! assert_eq!(
//!     request.to_string(),
//!     r#"[{"role":"user","content":"Hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"a.txt"}]"#
//! );
//! assert!(check_rendered(Format::OpenAi, &history, &request).is_ok());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Choices where the rules are silent (docs/events.md §8)
//!
//! - **Order.** Events are applied in increasing seq order, each once; an event whose seq is not
//!   after the last one applied is refused ([`ProjectError::OutOfOrder`]). Seqs may be skipped
//!   (a caller may feed only surface events and `tool/call`s); [`Projector::events_seen`] is the
//!   seq after the last one applied.
//! - **`apply` checks too.** [`Projector::apply`] runs the checks of [`Projector::check`] and
//!   changes nothing when one fails, so a projector never holds a half-applied event.
//! - **Empty assistant message with a replace** is refused ([`ProjectError::EmptyReplacement`]):
//!   an empty assistant message is not a node, so the replace would silently delete the run. An
//!   empty assistant message without a replace is skipped, and a later replace cannot name it.
//! - **Replace.** Both ends must be current nodes and `startSeq`'s node not after `endSeq`'s;
//!   the run between them in surface order (which may hold nodes of earlier replacements) is
//!   replaced by the one new node. Finding the run scans the surface from the front (replaces
//!   are rare); the splice itself shares everything outside the run.
//! - **Tool results.** `toolUseId` is `data.callId` when present (a `callId` given as `null`
//!   counts as absent); else the `callId` of the `tool/call` named by `sourceEventSeqs[0]`; else
//!   the earliest unanswered `tool/call` of the same turn and step with the same name. A result
//!   answers a call of its own turn only (docs/events.md §6): a `callId` is looked up among the
//!   calls of the result's turn (the same id in an earlier turn is another call), and a
//!   `sourceEventSeqs[0]` naming a call of another turn gives that call's id but answers
//!   nothing. A `sourceEventSeqs[0]` that names no `tool/call` falls through to the name rule.
//!   A result that none resolves is refused ([`ProjectError::UnresolvedToolResult`]). A
//!   `callId` that names no `tool/call` of the result's turn is projected as given (that it
//!   must name a call of the same turn is the session's lifecycle rule).
//! - **One answer per call.** A result that resolves to a call already answered is refused
//!   ([`ProjectError::AlreadyAnswered`]): the projection would show a provider two results for
//!   one tool use. By `callId`, an answered call is looked for among the calls of the result's
//!   own turn only, so the check costs the same at any log length. The calls are
//!   queryable ([`Projector::call_answered_by`], [`Projector::open_call`],
//!   [`Projector::open_call_of_turn`], [`Projector::is_answered`],
//!   [`Projector::unanswered_calls`], [`Projector::tool_call`]) so
//!   the session can check its lifecycle rules on the call a result answers, report them in its
//!   own terms, and close open calls after a crash.
//! - **What is left out of a message**: a user message's `envelope` and unknown members; an
//!   assistant message's `provider`, `model`, `replay`, `usage`; a tool result's `error`,
//!   `meta` and the unknown members of its `message`. The `tool_result` block holds exactly
//!   `toolUseId`, `toolName`, `content`, `isError`.
//! - **Renderings**: see [`render_openai`] and [`render_anthropic`] for what each does with
//!   reasoning, tool results, unknown blocks and unknown members.
//! - **Comparing a request**: [`check_rendered`] ignores object member order and compares
//!   numbers by value; see there.

mod check;
mod error;
mod message;
mod projector;
mod render;

pub use check::{check_rendered, check_request, Divergence};
pub use error::{ProjectError, RangeEnd};
pub(crate) use message::{Frozen, FrozenSource};
pub use message::{Iter, Message, Messages, Role};
#[allow(deprecated)]
pub use projector::{derive, derive_at};
pub use projector::{messages, messages_at, Projector, ToolCallInfo};
pub(crate) use projector::{node_message, projector_wants, NodeTable, NODE_ENTRY};
pub use render::{
    render, render_anthropic, render_openai, Format, UnknownFormat, HISTORY_START, OUTCOME_UNKNOWN,
};
