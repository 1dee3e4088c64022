//! A Codex rollout or a Claude Code transcript, real or damaged, imported as `agentlog import`
//! does, in one run or two: nothing panics, every session is sound, a closed import leaves
//! nothing open and gives the file back, and the unchanged file imports as nothing new. The
//! check lives in `testkit/src/fuzz_source.rs`, shared with `tests/import/fuzz_sources.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

use testkit::fuzz_source;

fuzz_target!(|data: &[u8]| {
    fuzz_source::source_import(data);
});
