//! agentlog: append-only, checksummed, memory-mapped logs for LLM agent sessions.
#![deny(unsafe_code)]
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]
#![warn(missing_docs)]

mod error;
pub mod event;
pub mod log;
pub mod project;
pub mod session;
pub mod store;

pub use error::{Error, Result};
