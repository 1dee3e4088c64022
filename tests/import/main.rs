//! The import layer's integration tests, one binary (`cargo test --test import`):
//! `agentlog::import`: Codex rollouts and Claude Code transcripts.
//! See `tests/README.md`.

mod fuzz_sources;
mod import_formats;
mod incremental;
mod newer_formats;
mod overlong_lines;
mod parallel;
mod replaced_file;
mod robustness;
mod sweep_regressions;
mod titles;
mod unwritten_rollout;
mod walk_cycles;
mod written;
