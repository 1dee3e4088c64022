//! The session layer's integration tests, one binary (`cargo test --test session`):
//! `agentlog::session`: the lifecycle rules, checkpoints, replay.
//! See `tests/README.md`.

mod append_copies;
mod checkpoint;
mod checkpoint_views;
mod lifecycle;
mod open_report;
mod project_error;
mod regressions;
mod replay;
mod salvage_interrupted;
