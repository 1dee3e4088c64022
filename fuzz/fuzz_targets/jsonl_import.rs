//! Arbitrary bytes as a JSONL session file: the reader never panics, every accepted line
//! round-trips canonically (also through the archive), and an import is all or nothing. The
//! check lives in `testkit/src/fuzz_jsonl.rs`, shared with `tests/log/fuzz_corpus.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

use testkit::fuzz_jsonl;

fuzz_target!(|data: &[u8]| {
    fuzz_jsonl::jsonl_import(data);
});
