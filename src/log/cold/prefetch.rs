//! [`Prefetch`]: a thread that decompresses the blocks of a cold segment ahead of a sequential
//! read, so that both cores decompress.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::ColdSegment;
use crate::log::segment::SegmentView;

/// How many blocks past the one being read a sequential read may have decompressed (or be
/// decompressing): enough that neither thread waits for the other while blocks vary in size,
/// and that the thread seldom parks (each wake-up costs about as much as decompressing a
/// block: with 8, the current mix's cold replay took 46 ms, with 64 41 ms, `--bench cold`);
/// few enough that a read stopped early wasted little (64 blocks of 16 KiB are 1 MiB, about
/// 0.6 ms of the other core's time).
const PREFETCH_AHEAD: usize = 64;

/// The state a [`Prefetch`] thread shares with the reader it serves.
#[derive(Debug)]
struct PrefetchShared {
    stop: AtomicBool,
    /// The block the reader reads now.
    reading: AtomicUsize,
    /// The first block nobody has taken yet: the reader and the thread take blocks in order,
    /// each the next one, so each block is decompressed once and both cores decompress.
    next: AtomicUsize,
    /// The last block of the read.
    last: usize,
    /// The thread is parked (or about to), waiting for the reader to come closer.
    sleeping: AtomicBool,
}

impl PrefetchShared {
    /// Takes the next block if it is at most `limit` (and not past the read): the caller
    /// decompresses it.
    fn take(&self, limit: usize) -> Option<usize> {
        let limit = limit.min(self.last);
        let mut n = self.next.load(Ordering::Acquire);
        loop {
            if n > limit {
                return None;
            }
            match self
                .next
                .compare_exchange_weak(n, n + 1, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Some(n),
                Err(now) => n = now,
            }
        }
    }
}

/// Decompression ahead of a sequential read of a cold segment, on both cores: a thread and the
/// reader take the blocks in order, each the next one nobody has taken (the thread at most
/// [`PREFETCH_AHEAD`] past the block being read, up to `last`). The reader decompresses only
/// when the block it needs is not ready: then, instead of waiting for the thread, it
/// decompresses the next block nobody has taken, and reads its block when that is ready. Each
/// block is decompressed once, into its own place, so the records read are the same bytes.
/// Hand-off costs an atomic per block; the thread parks only when it is [`PREFETCH_AHEAD`]
/// blocks ahead and is woken when the reader has come within half of that. Dropping it stops
/// the thread and waits for it (at most one block's decompression).
pub(crate) struct Prefetch {
    shared: Arc<PrefetchShared>,
    handle: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Prefetch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prefetch")
            .field("reading", &self.shared.reading.load(Ordering::Relaxed))
            .field("next", &self.shared.next.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Prefetch {
    /// Starts decompressing the blocks `first ..= last` of the cold segment `view` for a reader
    /// now at block `first`. `None` when there is nothing ahead, the machine has one core, or
    /// no thread can be started (the reader then decompresses every block itself).
    pub(crate) fn start(view: &Arc<SegmentView>, first: usize, last: usize) -> Option<Prefetch> {
        if last <= first + 1 || !crate::log::readahead::parallel() {
            return None;
        }
        view.cold()?.advise_sequential(first, last);
        let shared = Arc::new(PrefetchShared {
            stop: AtomicBool::new(false),
            reading: AtomicUsize::new(first),
            next: AtomicUsize::new(first),
            last,
            sleeping: AtomicBool::new(false),
        });
        let (view, mine) = (Arc::clone(view), Arc::clone(&shared));
        let handle = std::thread::Builder::new()
            .name("agentlog-cold-prefetch".into())
            .spawn(move || {
                let Some(cold) = view.cold() else { return };
                while !mine.stop.load(Ordering::Acquire) {
                    if mine.next.load(Ordering::Acquire) > mine.last {
                        return;
                    }
                    let reading = mine.reading.load(Ordering::SeqCst);
                    match mine.take(reading + PREFETCH_AHEAD) {
                        // A damaged block is remembered for the reader, which reports it.
                        Some(k) => {
                            let _ = cold.ensure(k);
                        }
                        None => {
                            // Far enough ahead: sleep until the reader comes closer. (The
                            // reader reads `sleeping` after moving on, this thread `reading`
                            // after setting it: one of them sees the other's store.)
                            mine.sleeping.store(true, Ordering::SeqCst);
                            let reading = mine.reading.load(Ordering::SeqCst);
                            if mine.next.load(Ordering::SeqCst) > reading + PREFETCH_AHEAD
                                && !mine.stop.load(Ordering::SeqCst)
                            {
                                std::thread::park();
                            }
                            mine.sleeping.store(false, Ordering::SeqCst);
                        }
                    }
                }
            })
            .ok()?;
        Some(Prefetch {
            shared,
            handle: Some(handle),
        })
    }

    /// The reader needs block `k` of `cold` (the segment this prefetch reads) now. Until it is
    /// ready, the reader decompresses the next blocks nobody has taken (block `k` itself when
    /// nobody has); it waits for the thread only when there is nothing left to take.
    pub(crate) fn reading(&self, cold: &ColdSegment, k: usize) {
        let s = &*self.shared;
        s.reading.store(k, Ordering::SeqCst);
        if s.sleeping.load(Ordering::SeqCst)
            && s.next.load(Ordering::SeqCst) <= k + PREFETCH_AHEAD / 2
        {
            if let Some(h) = &self.handle {
                h.thread().unpark();
            }
        }
        while !cold.is_ready(k) {
            match s.take(k + PREFETCH_AHEAD) {
                Some(j) => {
                    let _ = cold.ensure(j);
                }
                // The thread is decompressing block `k`: the caller's read waits for it.
                None => return,
            }
        }
    }
}

impl Drop for Prefetch {
    fn drop(&mut self) {
        crate::log::readahead::stop_and_join(&self.shared.stop, self.handle.take());
    }
}
