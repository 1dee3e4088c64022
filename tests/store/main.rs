//! The store layer's integration tests, one binary (`cargo test --test store`):
//! `agentlog::store`: import and export, fork, search and statistics over a store.
//! See `tests/README.md`.

mod cold_store;
mod create_race;
mod errors;
mod fork;
mod search;
mod search_alloc;
mod secrets_corpus;
mod secrets_mixed;
mod secrets_regressions;
mod stats;
mod store;
