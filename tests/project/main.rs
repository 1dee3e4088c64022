//! The project layer's integration tests, one binary (`cargo test --test project`):
//! `agentlog::projection`: the projection of a session into messages and its provider renderings.
//! See `tests/README.md`.

mod examples;
mod prop;
mod regressions;
mod rules;
