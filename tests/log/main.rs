//! The log layer's integration tests, one binary (`cargo test --test log`):
//! `agentlog::log`: the storage engine. Round trips, recovery, damage, crashes, power loss,
//! full disks, concurrency (in this process and others), lazy readers, the fuzz corpora.
//! See `tests/README.md`.

mod cold_dictionary;
mod cold_parallel;
mod cold_reads;
mod cold_segments;
mod concurrency;
mod corruption;
mod crash_kill;
mod disk_full;
mod events_roundtrip;
mod fuzz_corpus;
mod group_commit_gather;
mod hint_copy;
mod last_segment_hint;
mod lazy_reader;
mod power_loss;
mod recovery;
mod regressions;
mod roundtrip;
mod stress;
mod sync_in_flight_failure;
mod sync_many_threads_power_loss;
mod tail_pread;
mod verify_ahead;
