//! Checksums ahead of a sequential read of a plain segment, on the other core.
//!
//! A replay spends about a third of its time computing the records' CRC-32s and the rest on
//! what the caller does with each record (validating the archive, reading it). When a read
//! covers a large part of a plain segment, a thread walks the same records ahead of the reader
//! and checks them (header, bounds, seq, checksum) with the same function the reader uses; the
//! reader then skips the checksum of every record the thread has vouched for and checks the
//! others itself. Nothing else changes: the reader still checks each record's header, bounds
//! and seq, and any fault is found and reported by the reader, with its usual context (the
//! thread stops at a record it cannot vouch for and leaves it to the reader).
//!
//! Cold segments do not need this: their records are read from blocks whose checksum is checked
//! when they are decompressed, which [`Prefetch`](super::cold::Prefetch) does ahead.
//!
//! # Hand-off
//!
//! The thread publishes `verified`, an offset: every record of the read that starts at or after
//! the reader's position and before that offset has been checked. It advances it in steps of
//! [`BATCH`] bytes. Its walk starts at a record the reader reads (the read's first, or the one
//! the reader last reported, when the thread fell behind and jumps ahead), and it follows the
//! records' own lengths from there, so its record boundaries are the reader's. It stays at most
//! [`AHEAD`] bytes ahead of the reader (the reader reports where it is every [`REPORT`] bytes)
//! and parks when it is that far ahead; the reader wakes it when it has come within half.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;

use super::segment::{check_record_with, SegmentView};

/// The least span of a plain segment a read must cover for the checksums to be computed ahead:
/// starting and stopping a thread costs about as much as the checksums of a few hundred KiB.
const MIN_SPAN: u64 = 4 << 20;

/// How far (bytes of records) the thread may be ahead of the reader: far enough that it seldom
/// parks (each park and wake costs the reader a system call), near enough that a read stopped
/// early wasted little of the other core's time (8 MiB of checksums is about half a
/// millisecond).
const AHEAD: u64 = 8 << 20;

/// The thread publishes its progress every this many bytes of records checked.
const BATCH: u64 = 64 << 10;

/// The reader reports its position every this many bytes of records read.
const REPORT: u64 = 256 << 10;

/// An atomic alone on its cache line: the reader writes one, the thread the other.
#[derive(Debug, Default)]
#[repr(align(64))]
struct Line(AtomicU64);

/// What the thread and the reader share.
#[derive(Debug, Default)]
struct Shared {
    /// Every record that starts at or after the reader's position and before this offset has
    /// been checked, checksum included.
    verified: Line,
    /// Where the reader is: its record's index in the segment (high 32 bits) and offset (low
    /// 32; a segment's offsets fit in 32 bits, as its index file stores them).
    reader_at: Line,
    /// The thread is parked (or about to), waiting for the reader to come closer.
    sleeping: AtomicBool,
    stop: AtomicBool,
}

fn pack(index: u64, offset: u64) -> u64 {
    (index << 32) | (offset & 0xFFFF_FFFF)
}

fn unpack(at: u64) -> (u64, u64) {
    (at >> 32, at & 0xFFFF_FFFF)
}

/// Checksums computed ahead of a reader of one plain segment (see the [module](self) docs).
/// Dropping it stops the thread and waits for it (at most one [`BATCH`] of checksums).
#[derive(Debug)]
pub(crate) struct VerifyAhead {
    shared: Arc<Shared>,
    handle: Option<JoinHandle<()>>,
    /// The last `verified` the reader loaded.
    verified: u64,
    /// The offset at which the reader reports its position next.
    next_report: u64,
}

impl VerifyAhead {
    /// Starts checking the records of the plain (not cold) segment `view` from record `index`
    /// at `offset` (where the reader starts) up to record `to` (exclusive), which end at about
    /// `end`. `None` when the span is too short to pay, the machine runs one thread at a time,
    /// or no thread can be started: the reader then checks every record itself.
    pub(crate) fn start(
        view: &Arc<SegmentView>,
        index: u64,
        offset: u64,
        to: u64,
        end: u64,
    ) -> Option<VerifyAhead> {
        if end.saturating_sub(offset) < MIN_SPAN
            || offset > u64::from(u32::MAX)
            || to > u64::from(u32::MAX)
            || !parallel()
        {
            return None;
        }
        let shared = Arc::new(Shared::default());
        shared.verified.0.store(offset, Ordering::Relaxed);
        shared
            .reader_at
            .0
            .store(pack(index, offset), Ordering::Relaxed);
        let (view, mine) = (Arc::clone(view), Arc::clone(&shared));
        let handle = std::thread::Builder::new()
            .name("agentlog-verify-ahead".into())
            .stack_size(256 << 10)
            .spawn(move || run(&view, &mine, index, offset, to))
            .ok()?;
        Some(VerifyAhead {
            shared,
            handle: Some(handle),
            verified: offset,
            next_report: offset.saturating_add(REPORT),
        })
    }

    /// True when the thread has checked the checksum of the record at `offset`, where the
    /// reader is now (record `index` of the segment). Reports the reader's position now and
    /// then, and wakes the thread when the reader has come close to it.
    #[inline]
    pub(crate) fn checked(&mut self, index: u64, offset: u64) -> bool {
        if offset >= self.next_report {
            self.report(index, offset);
        }
        if offset < self.verified {
            return true;
        }
        self.verified = self.shared.verified.0.load(Ordering::Acquire);
        offset < self.verified
    }

    #[cold]
    fn report(&mut self, index: u64, offset: u64) {
        self.next_report = offset.saturating_add(REPORT);
        let s = &*self.shared;
        s.reader_at.0.store(pack(index, offset), Ordering::SeqCst);
        if s.sleeping.load(Ordering::SeqCst)
            && s.verified.0.load(Ordering::SeqCst) <= offset.saturating_add(AHEAD / 2)
        {
            if let Some(h) = &self.handle {
                h.thread().unpark();
            }
        }
    }
}

impl Drop for VerifyAhead {
    fn drop(&mut self) {
        stop_and_join(&self.shared.stop, self.handle.take());
    }
}

/// The thread: checks records `index..to` from `offset`, publishing its progress, until done,
/// stopped, or at a record it cannot vouch for (which the reader will check and report).
fn run(view: &SegmentView, s: &Shared, mut index: u64, mut offset: u64, to: u64) {
    let data = view.data_unchecked();
    let base = view.header.base_seq;
    while index < to && !s.stop.load(Ordering::Acquire) {
        let (r_index, r_offset) = unpack(s.reader_at.0.load(Ordering::Acquire));
        if r_offset > offset {
            // Behind the reader (this thread did not run for a while): what the reader has
            // passed needs no checking; go on from where it is.
            (index, offset) = (r_index, r_offset);
            continue;
        }
        if offset >= r_offset.saturating_add(AHEAD) {
            // Far enough ahead: sleep until the reader comes closer. (The reader reads
            // `sleeping` after reporting, this thread `reader_at` after setting it: one of them
            // sees the other's store.)
            s.sleeping.store(true, Ordering::SeqCst);
            let (_, r_offset) = unpack(s.reader_at.0.load(Ordering::SeqCst));
            if offset >= r_offset.saturating_add(AHEAD) && !s.stop.load(Ordering::SeqCst) {
                std::thread::park();
            }
            s.sleeping.store(false, Ordering::SeqCst);
            continue;
        }
        let batch_end = offset.saturating_add(BATCH);
        while offset < batch_end && index < to {
            match check_record_with(data, offset, base + index, &view.check, true) {
                Ok(found) => {
                    offset = found.next;
                    index += 1;
                }
                Err(_) => {
                    // The reader checks this record itself and reports what is wrong.
                    s.verified.0.store(offset, Ordering::Release);
                    return;
                }
            }
        }
        s.verified.0.store(offset, Ordering::Release);
    }
}

/// Stops a thread that works ahead of a reader (it checks `stop` between steps and parks
/// otherwise) and waits for it.
pub(crate) fn stop_and_join(stop: &AtomicBool, handle: Option<JoinHandle<()>>) {
    stop.store(true, Ordering::Release);
    if let Some(h) = handle {
        h.thread().unpark();
        let _ = h.join();
    }
}

/// True when this machine runs more than one thread at once (work ahead pays only then).
pub(crate) fn parallel() -> bool {
    static PARALLEL: OnceLock<bool> = OnceLock::new();
    *PARALLEL.get_or_init(|| std::thread::available_parallelism().is_ok_and(|n| n.get() > 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::format::HEADER_SIZE;
    use crate::log::{Log, Options};

    /// A closed log of `n` records of 1000 bytes in one segment, with the payload byte 100 of
    /// record `damaged` flipped (when given); its segment's view and the records' offsets.
    fn segment(dir: &std::path::Path, n: u64, damaged: Option<u64>) -> (SegmentView, Vec<u64>) {
        let log = Log::open(dir, Options::default()).unwrap();
        for i in 0..n {
            log.append(&vec![(i % 251) as u8; 1000]).unwrap();
        }
        log.close().unwrap();
        let view = SegmentView::open(dir, 0).unwrap();
        let offsets: Vec<u64> = (0..n).map(|i| view.offset_of(i).unwrap()).collect();
        if let Some(k) = damaged {
            let path = view.path.clone();
            drop(view);
            let mut bytes = std::fs::read(&path).unwrap();
            bytes[offsets[k as usize] as usize + 16 + 100] ^= 0x20;
            std::fs::write(&path, bytes).unwrap();
            return (SegmentView::open(dir, 0).unwrap(), offsets);
        }
        (view, offsets)
    }

    fn shared_at(index: u64, offset: u64) -> Shared {
        let s = Shared::default();
        s.verified.0.store(offset, Ordering::Relaxed);
        s.reader_at.0.store(pack(index, offset), Ordering::Relaxed);
        s
    }

    #[test]
    fn the_thread_vouches_for_every_record_up_to_a_damaged_one_and_not_for_it() {
        let tmp = tempfile::tempdir().unwrap();
        let (view, offsets) = segment(tmp.path(), 300, Some(150));
        let s = shared_at(0, HEADER_SIZE as u64);
        run(&view, &s, 0, HEADER_SIZE as u64, 300);
        assert_eq!(s.verified.0.load(Ordering::Relaxed), offsets[150]);
    }

    #[test]
    fn a_thread_behind_the_reader_goes_on_from_where_the_reader_is() {
        let tmp = tempfile::tempdir().unwrap();
        // The damage is behind the reader: the thread skips it and vouches for the rest only.
        let (view, offsets) = segment(tmp.path(), 300, Some(150));
        let s = shared_at(200, offsets[200]);
        run(&view, &s, 0, HEADER_SIZE as u64, 300);
        let end = view.offset_of(299).unwrap() + crate::log::format::record_size(1000);
        assert_eq!(s.verified.0.load(Ordering::Relaxed), end);
    }

    #[test]
    fn a_stopped_thread_vouches_for_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let (view, _) = segment(tmp.path(), 50, None);
        let s = shared_at(0, HEADER_SIZE as u64);
        s.stop.store(true, Ordering::Relaxed);
        run(&view, &s, 0, HEADER_SIZE as u64, 50);
        assert_eq!(s.verified.0.load(Ordering::Relaxed), HEADER_SIZE as u64);
    }

    #[test]
    fn positions_pack_into_one_word_and_back() {
        assert_eq!(unpack(pack(7, 4096)), (7, 4096));
        assert_eq!(
            unpack(pack(u64::from(u32::MAX), u64::from(u32::MAX))),
            (u64::from(u32::MAX), u64::from(u32::MAX))
        );
    }
}
