//! The session layer's integration tests, one binary (`cargo test --test session`):
//! `agentlog::session`: the lifecycle rules, checkpoints, replay.
//! See `tests/README.md`.

mod checkpoint;
mod lifecycle;
mod regressions;
mod replay;
