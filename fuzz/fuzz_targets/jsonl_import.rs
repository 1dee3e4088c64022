//! Arbitrary bytes as a JSONL session file: the reader never panics, every accepted line
//! round-trips canonically (also through the archive), and an import is all or nothing. The
//! check lives in `tests/common/fuzz_jsonl.rs`, shared with `tests/fuzz_corpus.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/common/fuzz_jsonl.rs"]
mod fuzz_jsonl;

fuzz_target!(|data: &[u8]| {
    fuzz_jsonl::jsonl_import(data);
});
