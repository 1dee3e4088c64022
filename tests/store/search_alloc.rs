//! A search allocates nothing for an event that does not match: a counting allocator sees no
//! allocation at all while a session of thousands of events is scanned with filters that match
//! nothing (every filter, an ASCII and a non-ASCII needle), nor for matches; the tool filter's
//! set of call ids grows by doubling, a few times per session.

use testkit::search as search_common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::ops::ControlFlow;

use agentlog::session::SessionReader;
use agentlog::store::{ImportOptions, Query, Store};

struct Counting;

thread_local! {
    /// Whether this thread's allocations are counted now (tests run on several threads).
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    /// This thread's allocations counted.
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is passed on to the system allocator unchanged; the count is kept in
// const-initialized thread locals (which do not allocate).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

fn count() {
    if COUNTING.try_with(Cell::get).unwrap_or(false) {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made by this thread while `f` runs.
fn allocations(f: impl FnOnce()) -> u64 {
    let before = ALLOCATIONS.with(Cell::get);
    COUNTING.with(|c| c.set(true));
    f();
    COUNTING.with(|c| c.set(false));
    ALLOCATIONS.with(Cell::get) - before
}

fn session(store: &Store, id: &str, turns: u64) -> SessionReader {
    let text = search_common::generate(7, turns);
    store
        .import(
            text.as_bytes(),
            ImportOptions {
                id: Some(id.into()),
                title: None,
            },
            |_| {},
        )
        .unwrap();
    store.open_reader(id).unwrap()
}

#[test]
fn no_allocation_for_events_that_do_not_match() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let reader = session(&store, "big", 400);
    assert!(reader.len() > 9_000, "{}", reader.len());
    // The reader read its last event with pread when it opened and maps a segment when a read
    // first needs it: one pass first, so that what is counted is per event, not that map.
    reader
        .search(&Query::new().turn(1_000_000), |_| ControlFlow::Continue(()))
        .unwrap();
    let nothing = [
        Query::new().text("zz-not-there"),
        Query::new().text("ÉCOLE-NOT-THERE"),
        Query::new().tool("no-such-tool"),
        Query::new().turn(1_000_000),
        Query::new().since(i64::MAX),
        Query::new().event_type("nope/*"),
        Query::new()
            .event_type("tool/*")
            .event_type("user/message")
            .turn(3)
            .tool("no-such-tool")
            .since(0)
            .until(i64::MAX)
            .text("zz-not-there"),
    ];
    for q in &nothing {
        let mut stats = None;
        let n = allocations(|| {
            stats = Some(reader.search(q, |_| ControlFlow::Continue(())).unwrap());
        });
        let stats = stats.unwrap();
        assert_eq!(stats.matches, 0, "{q:?}");
        assert_eq!(stats.events_scanned, reader.len());
        assert_eq!(n, 0, "{q:?}: {n} allocations");
    }
}

#[test]
fn matching_costs_a_bounded_few_allocations() {
    // The tool filter remembers the call ids of its tool (borrowed from the log: the set grows
    // like a vector, by doubling, and is cleared at each turn).
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let reader = session(&store, "big", 400);
    let q = Query::new().tool("bash").text("zz-not-there");
    let mut matches = 0;
    let n = allocations(|| {
        let stats = reader.search(&q, |_| ControlFlow::Continue(())).unwrap();
        matches = stats.matches;
    });
    assert_eq!(matches, 0);
    assert!(n < 16, "{n} allocations");
    // Matching everything: nothing is allocated by the search itself for a match either.
    let everything = Query::new().event_type("*");
    let n = allocations(|| {
        let stats = reader
            .search(&everything, |_| ControlFlow::Continue(()))
            .unwrap();
        matches = stats.matches;
    });
    assert_eq!(matches, reader.len());
    assert_eq!(n, 0);
}
