//! The event layer's integration tests, one binary (`cargo test --test event`):
//! `agentlog::event`: parsing JSONL, canonical output, refusals, the rkyv archive of events.
//! See `tests/README.md`.

mod examples;
mod json_and_drafts;
mod noncanonical;
mod payload_defaults;
mod refusals;
mod regressions;
mod roundtrip_prop;
mod value_accessors;
