//! An arbitrary sequence of operations (appends, batches, syncs, crashes, clean reopens, reads,
//! torn tails) checked against a `Vec<Vec<u8>>` model after every operation. The checks live in
//! `testkit/src/fuzz_checks.rs`, shared with `tests/log/fuzz_corpus.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

use testkit::fuzz_checks;

fuzz_target!(|data: &[u8]| {
    fuzz_checks::engine_model(data);
});
