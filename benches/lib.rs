//! agentlog's benchmarks: `cargo bench -p agentlog-benches [--bench NAME]` from the repository
//! root. Each bench is a file beside this one; `testkit/` (feature `peers`) holds the generators and the peers
//! (JSONL with serde_json, SQLite) they share. This library is empty: the package exists so that
//! the crate's `cargo test` never builds criterion or SQLite.
