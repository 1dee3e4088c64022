//! `Session::append_draft` owns its draft: once the event is written, the content the projection
//! keeps (a message's blocks, a tool result's output) moves into the history instead of being
//! copied (issue 14, a cheaper session append). A counting allocator sees an append of a 1 MiB
//! user message or tool result allocate far less than the content's size; the history, the log
//! and the subscribers still get the whole content.

use testkit::session as session_common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use agentlog::event::{Block, EventData, ToolContent};
use agentlog::session::Notice;
use session_common::{append, d, new_session};

struct Counting;

thread_local! {
    /// Whether this thread's allocations are counted now (tests run on several threads).
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    /// Bytes this thread allocated while counting.
    static BYTES: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is passed on to the system allocator unchanged; the count is kept in
// const-initialized thread locals (which do not allocate).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

fn count(bytes: usize) {
    if COUNTING.try_with(Cell::get).unwrap_or(false) {
        let _ = BYTES.try_with(|n| n.set(n.get() + bytes as u64));
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Bytes this thread allocated while `f` ran, and what it returned.
fn allocated<R>(f: impl FnOnce() -> R) -> (u64, R) {
    let before = BYTES.with(Cell::get);
    COUNTING.with(|c| c.set(true));
    let r = f();
    COUNTING.with(|c| c.set(false));
    (BYTES.with(Cell::get) - before, r)
}

const BIG: usize = 1 << 20;

fn user_line(text: &str) -> String {
    format!(
        r#"{{"type":"user/message","data":{{"role":"user","content":[{{"type":"text","text":"{text}"}}]}}}}"#
    )
}

fn result_line(output: &str) -> String {
    format!(
        r#"{{"type":"tool/result","data":{{"turn":1,"step":1,"message":{{"role":"tool","toolName":"cat","content":"{output}","isError":false}},"callId":"c1"}}}}"#
    )
}

fn text_of(block: &Block) -> &str {
    match block {
        Block::Text { text, .. } => text,
        other => panic!("not a text block: {other:?}"),
    }
}

fn output_of(block: &Block) -> &str {
    match block {
        Block::ToolResult {
            content: ToolContent::Text(t),
            ..
        } => t,
        other => panic!("not a tool result with text: {other:?}"),
    }
}

#[test]
fn large_message_and_result_move_into_the_history() {
    let dir = tempfile::tempdir().unwrap();
    let s = new_session(dir.path());
    // The session's encode buffer grows to a large event once; later ones reuse it.
    append(&s, &user_line(&"w".repeat(BIG)));

    let text = "u".repeat(BIG);
    let draft = d(&user_line(&text));
    let (bytes, seq) = allocated(|| s.append_draft(draft).unwrap());
    let seq = seq.unwrap();
    assert!(
        bytes < (BIG / 4) as u64,
        "appending a 1 MiB user message allocated {bytes} bytes (a copy of its text?)"
    );
    let history = s.messages();
    let last = history.last().unwrap();
    assert_eq!(last.source_seq, seq);
    assert_eq!(text_of(&last.content[0]), text);

    append(&s, r#"{"type":"turn/start","data":{"turn":1}}"#);
    append(&s, r#"{"type":"step/start","data":{"turn":1,"step":1}}"#);
    append(
        &s,
        r#"{"type":"tool/call","data":{"turn":1,"step":1,"callId":"c1","name":"cat","arguments":"{}"}}"#,
    );
    let output = "o".repeat(BIG);
    let draft = d(&result_line(&output));
    let (bytes, seq) = allocated(|| s.append_draft(draft).unwrap());
    let seq = seq.unwrap();
    assert!(
        bytes < (BIG / 4) as u64,
        "appending a 1 MiB tool result allocated {bytes} bytes (a copy of its output?)"
    );
    let history = s.messages();
    let last = history.last().unwrap();
    assert_eq!(last.source_seq, seq);
    assert_eq!(output_of(&last.content[0]), output);
    match &last.content[0] {
        Block::ToolResult {
            tool_use_id,
            tool_name,
            is_error,
            ..
        } => {
            assert_eq!(tool_use_id, "c1");
            assert_eq!(tool_name, "cat");
            assert!(!is_error);
        }
        other => panic!("{other:?}"),
    }
    // The log holds the whole event, read back from disk.
    let e = s.reader().get_owned(seq).unwrap();
    match &e.data {
        EventData::ToolResult(r) => {
            assert_eq!(r.message.tool_name, "cat");
            assert_eq!(r.message.content, ToolContent::Text(output.clone()));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn subscribers_and_history_both_get_the_whole_content() {
    let dir = tempfile::tempdir().unwrap();
    let s = new_session(dir.path());
    let rx = s.subscribe();
    let text = "s".repeat(1000);
    let seq = append(&s, &user_line(&text)).unwrap();
    assert_eq!(text_of(&s.messages().last().unwrap().content[0]), text);
    let notice = rx.try_recv().unwrap();
    match notice {
        Notice::Appended(e) => {
            assert_eq!(e.seq, seq);
            match &e.data {
                EventData::UserMessage(m) => assert_eq!(text_of(&m.content[0]), text),
                other => panic!("{other:?}"),
            }
        }
        other => panic!("{other:?}"),
    }
    // A dropped receiver: appends go on, the history still fills.
    drop(rx);
    let seq = append(&s, &user_line("after")).unwrap();
    let seq2 = append(&s, &user_line("and again")).unwrap();
    assert_eq!(seq2, seq + 1);
    assert_eq!(s.messages().len(), 3);
    assert_eq!(
        text_of(&s.messages().last().unwrap().content[0]),
        "and again"
    );
}
