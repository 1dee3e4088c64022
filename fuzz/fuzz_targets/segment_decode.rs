//! Arbitrary bytes as a segment file (and optionally its index): readers and every recovery
//! mode must never panic. The checks live in `testkit/src/fuzz_checks.rs`, shared with
//! `tests/log/fuzz_corpus.rs`, which replays the corpus as an ordinary test.
#![no_main]

use libfuzzer_sys::fuzz_target;

use testkit::fuzz_checks;

fuzz_target!(|data: &[u8]| {
    fuzz_checks::segment_decode(data);
});
