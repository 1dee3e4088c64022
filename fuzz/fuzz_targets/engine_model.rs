//! An arbitrary sequence of operations (appends, batches, syncs, crashes, clean reopens, reads,
//! torn tails) checked against a `Vec<Vec<u8>>` model after every operation. The checks live in
//! `tests/common/fuzz_checks.rs`, shared with `tests/fuzz_corpus.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/common/fuzz_checks.rs"]
mod fuzz_checks;

fuzz_target!(|data: &[u8]| {
    fuzz_checks::engine_model(data);
});
