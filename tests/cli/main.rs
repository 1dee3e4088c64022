//! The cli layer's integration tests, one binary (`cargo test --test cli`):
//! the `agentlog` command line: every command, its errors and exit codes, damage reports,
//! and `ship`/`restore` with a real nats-server.
//! See `tests/README.md`.

mod browser_common;
mod cli_common;
mod cold;
mod damage_log;
mod damage_salvage;
mod damage_store;
mod errors;
mod live;
mod manage;
mod progress;
mod regressions;
mod resume;
mod roundtrip;
mod search;
mod secrets;
mod secrets_redact;
mod ship_follow;
mod ship_nats;
mod ship_status;
mod usability;
mod view;
mod view_browser;
