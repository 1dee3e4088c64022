//! A read-only full check of a log: every record of every segment, each index against its
//! segment, and the chain of segments, without the writer's lock and without repairing anything.
//!
//! It works while a writer appends: the records the writer has not finished yet (beyond the
//! file's published records) are not damage, and an index entry the writer has not written yet
//! (it writes an entry after its record) is not a wrong index.
//!
//! ```
//! use agentlog::log::{verify, IndexCheck, Log, Options};
//!
//! let dir = tempfile::tempdir()?;
//! let log = Log::open(dir.path().join("log"), Options::default())?;
//! log.append(b"hello")?;
//! log.close()?;
//! let report = verify(dir.path().join("log"))?;
//! assert!(report.is_clean());
//! assert_eq!(report.events, 1);
//! assert_eq!(report.segments[0].index, IndexCheck::Ok);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;
use std::path::{Path, PathBuf};

use super::error::Result;
use super::format::{self, IndexState};
use super::recovery::{self, Damage, DamageClass, SegmentPlan};

/// How one segment's index compares with the segment's records.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum IndexCheck {
    /// The index names every record at its offset (for the segment a writer has open, the
    /// records indexed so far).
    Ok,
    /// No index file, or its header is unreadable or names another segment. The index is derived
    /// data: the next writer open rebuilds it.
    Missing,
    /// The index disagrees with the segment (the reason says where). The next writer open
    /// rebuilds it.
    Wrong(String),
    /// Not compared: the segment is damaged.
    NotChecked,
}

impl fmt::Display for IndexCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IndexCheck::Ok => f.write_str("index ok"),
            IndexCheck::Missing => f.write_str("index missing or unreadable"),
            IndexCheck::Wrong(why) => write!(f, "index wrong: {why}"),
            IndexCheck::NotChecked => f.write_str("index not checked (the segment is damaged)"),
        }
    }
}

/// One segment as checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentCheck {
    /// The segment file.
    pub path: PathBuf,
    /// The seq of its first record.
    pub base_seq: u64,
    /// Valid records found (before the damage, in a damaged segment).
    pub records: u64,
    /// The byte offset just past the last valid record.
    pub end: u64,
    /// The state its index header records (`None` without a readable index).
    pub state: Option<IndexState>,
    /// The index compared with the records.
    pub index: IndexCheck,
}

/// What [`verify`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// The segments checked, in seq order (the damaged one included, holding its valid prefix).
    pub segments: Vec<SegmentCheck>,
    /// Valid records in the log before any damage.
    pub events: u64,
    /// The first damage found: a torn tail (an incomplete last record, which a crash leaves and
    /// the next writer open cuts; also what a record being appended right now looks like), or
    /// corruption (which opening refuses unless salvaging).
    pub damage: Option<Damage>,
    /// Whole segments after the damage, not checked.
    pub unchecked: Vec<PathBuf>,
    /// Files a crashed writer left behind (the next writer open removes them).
    pub strays: Vec<PathBuf>,
}

impl VerifyReport {
    /// The corruption found, if any (a torn tail is not corruption).
    pub fn corruption(&self) -> Option<&Damage> {
        self.damage
            .as_ref()
            .filter(|d| d.class == DamageClass::Corruption)
    }

    /// Segments whose index is missing or wrong.
    pub fn bad_indexes(&self) -> impl Iterator<Item = &SegmentCheck> + '_ {
        self.segments
            .iter()
            .filter(|s| matches!(s.index, IndexCheck::Missing | IndexCheck::Wrong(_)))
    }

    /// True when no record is damaged and every index agrees with its segment. A torn tail and
    /// stray files do not count: a crash leaves them and the next writer open removes them.
    pub fn is_clean(&self) -> bool {
        self.corruption().is_none() && self.bad_indexes().next().is_none()
    }
}

/// Checks the log in `dir` without changing anything and without taking the writer's lock:
/// every record of every segment (length, seq, checksum), each index against its segment, the
/// chain of segments (no missing seqs, no segment of another log). Works while a writer appends.
///
/// Fails only when the log cannot be read at all (no such directory, an unreadable file, a
/// segment of an unsupported format version); damage is reported in the [`VerifyReport`].
pub fn verify(dir: impl AsRef<Path>) -> Result<VerifyReport> {
    let dir = dir.as_ref();
    let mut insp = recovery::inspect_with(dir, None, true, true)?;
    // The segment a writer is appending to is read as a copy made while it writes: the copy
    // can hold a record not yet written where the read passed it and records written after it
    // where the read came later, which reads as records that end early. Such "damage" is gone
    // from a new copy (the record is there now); damage on disk is found again at the same
    // place. So damage in a segment still being written counts only once two reads in a row
    // find it there.
    for _ in 0..LIVE_REREADS {
        let Some(at) = damage_while_written(&insp) else {
            break;
        };
        let again = recovery::inspect_with(dir, None, true, true)?;
        let same = damage_while_written(&again) == Some(at);
        insp = again;
        if same {
            break;
        }
    }
    let events = insp.len();
    let damaged_path = insp.damage.as_ref().map(|d| d.corruption.path.clone());
    let segments = insp
        .segments
        .iter()
        .map(|plan| {
            let damaged = damaged_path.as_deref() == Some(plan.view.path.as_path());
            SegmentCheck {
                path: plan.view.path.clone(),
                base_seq: plan.base(),
                records: plan.count,
                end: plan.end,
                state: plan.index_state,
                index: if damaged {
                    IndexCheck::NotChecked
                } else {
                    check_index(plan)
                },
            }
        })
        .collect();
    // A damaged segment header stops the inspection before the segment is planned.
    let unchecked = insp
        .dropped
        .iter()
        .map(|&base| dir.join(format::segment_file_name(base)))
        .collect();
    Ok(VerifyReport {
        segments,
        events,
        damage: insp.damage,
        unchecked,
        strays: insp.strays,
    })
}

/// How many times [`verify`] reads the segment being written again when it finds damage there.
const LIVE_REREADS: usize = 8;

/// Where the damage is (segment, byte offset, seq) when it is corruption in the last segment
/// and that segment is still being written (not sealed or closed): what a read racing the
/// writer can show.
fn damage_while_written(insp: &recovery::Inspection) -> Option<(PathBuf, u64, Option<u64>)> {
    let d = insp.damage.as_ref()?;
    let last = insp.segments.last()?;
    (d.class == DamageClass::Corruption
        && d.corruption.path == last.view.path
        && !last.view.is_settled())
    .then(|| {
        (
            d.corruption.path.clone(),
            d.corruption.offset,
            d.corruption.seq,
        )
    })
}

/// Compares a segment's index with the records a full scan found.
fn check_index(plan: &SegmentPlan) -> IndexCheck {
    let view = &plan.view;
    let Some(h) = view.index_header() else {
        return IndexCheck::Missing;
    };
    let Some(offsets) = &plan.scanned else {
        // The inspection found the index right.
        return IndexCheck::Ok;
    };
    let entry = |i: u64| view.offset_of_indexed(i);
    match h.state {
        IndexState::Closed | IndexState::Sealed => {
            if h.count != plan.count || h.end != plan.end {
                return IndexCheck::Wrong(format!(
                    "its header says {} record(s) ending at byte offset {}; the segment holds {} \
                     ending at byte offset {}",
                    h.count, h.end, plan.count, plan.end
                ));
            }
            for (i, &o) in offsets.iter().enumerate() {
                let i = i as u64;
                if entry(i) != Some(u64::from(o)) {
                    return wrong_entry(plan.base() + i, entry(i), o);
                }
            }
            IndexCheck::Ok
        }
        IndexState::Open => {
            // A writer writes a record's entry after the record: the last records may have no
            // entry yet (or, after a crash, never got one). Entries form a prefix.
            let mut i = 0u64;
            for &o in offsets {
                match entry(i) {
                    None => break,
                    Some(e) if e == u64::from(o) => i += 1,
                    found => return wrong_entry(plan.base() + i, found, o),
                }
            }
            if i == offsets.len() as u64 {
                // An entry beyond the records found can only be one a writer appended since the
                // scan: it must point at or past where the scan ended.
                if let Some(e) = entry(i).filter(|&e| e < plan.end) {
                    return IndexCheck::Wrong(format!(
                        "it has an entry for seq {} at byte offset {e}, but the records end at \
                         byte offset {}",
                        plan.base() + i,
                        plan.end
                    ));
                }
            } else if let Some(j) = (i + 1..offsets.len() as u64).find(|&j| entry(j).is_some()) {
                return IndexCheck::Wrong(format!(
                    "the entry for seq {} is missing but later ones (seq {}) are there",
                    plan.base() + i,
                    plan.base() + j
                ));
            }
            IndexCheck::Ok
        }
    }
}

fn wrong_entry(seq: u64, found: Option<u64>, expected: u32) -> IndexCheck {
    IndexCheck::Wrong(match found {
        Some(e) => format!("it puts seq {seq} at byte offset {e}; the record is at {expected}"),
        None => format!("it has no entry for seq {seq} (at byte offset {expected})"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::{Log, Options};

    fn log_with(dir: &Path, n: usize, segment_size: u64) {
        let log = Log::open(dir, Options::default().segment_size(segment_size)).unwrap();
        for i in 0..n {
            log.append(format!("payload {i:04} with some bytes").as_bytes())
                .unwrap();
        }
        log.close().unwrap();
    }

    fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file())
            .map(|p| {
                let bytes = std::fs::read(&p).unwrap();
                (p, bytes)
            })
            .collect();
        files.sort();
        files
    }

    #[test]
    fn a_clean_log_is_clean_and_left_unchanged() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("log");
        log_with(&dir, 200, 4096);
        let before = snapshot(&dir);
        let r = verify(&dir).unwrap();
        assert!(r.is_clean(), "{r:?}");
        assert_eq!(r.events, 200);
        assert!(r.segments.len() > 2);
        assert!(r.segments.iter().all(|s| s.index == IndexCheck::Ok));
        assert_eq!(r.segments.iter().map(|s| s.records).sum::<u64>(), r.events);
        assert_eq!(snapshot(&dir), before);
    }

    #[test]
    fn a_flipped_payload_byte_is_corruption_named_by_segment_offset_and_seq() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("log");
        log_with(&dir, 200, 4096);
        let seg = dir.join(format::segment_file_name(0));
        let mut bytes = std::fs::read(&seg).unwrap();
        // The third record: 64-byte header, records of 16 + 32 bytes (29-byte payloads padded).
        let at = 64 + 2 * 48 + 16 + 3;
        bytes[at] ^= 0x40;
        std::fs::write(&seg, &bytes).unwrap();
        let r = verify(&dir).unwrap();
        assert!(!r.is_clean());
        let d = r.corruption().unwrap();
        assert_eq!(d.corruption.path, seg);
        assert_eq!(d.corruption.offset, 64 + 2 * 48);
        assert_eq!(d.corruption.seq, Some(2));
        assert_eq!(r.events, 2);
        assert!(!r.unchecked.is_empty());
        assert_eq!(r.segments[0].index, IndexCheck::NotChecked);
    }

    #[test]
    fn a_missing_or_wrong_index_is_reported() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("log");
        log_with(&dir, 200, 4096);
        std::fs::remove_file(dir.join(format::index_file_name(0))).unwrap();
        let r = verify(&dir).unwrap();
        assert!(!r.is_clean());
        assert_eq!(r.segments[0].index, IndexCheck::Missing);
        assert!(r.corruption().is_none());

        let idx = dir.join(format::index_file_name(r.segments[1].base_seq));
        let mut bytes = std::fs::read(&idx).unwrap();
        // The second entry (after the 64-byte header) names another offset.
        bytes[64 + 4] ^= 0x10;
        std::fs::write(&idx, &bytes).unwrap();
        let r = verify(&dir).unwrap();
        assert!(
            matches!(&r.segments[1].index, IndexCheck::Wrong(w) if w.contains("byte offset")),
            "{:?}",
            r.segments[1].index
        );
        assert_eq!(r.events, 200);
    }

    #[test]
    fn a_log_being_written_is_clean() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("log");
        let log = Log::open(&dir, Options::default()).unwrap();
        for i in 0..50 {
            log.append(format!("event {i}").as_bytes()).unwrap();
        }
        let r = verify(&dir).unwrap();
        assert!(r.is_clean(), "{r:?}");
        assert!(r.damage.is_none(), "{r:?}");
        assert_eq!(r.events, 50);
        assert_eq!(r.segments[0].state, Some(IndexState::Open));
        // The writer is undisturbed.
        assert_eq!(log.append(b"more").unwrap(), 50);
        log.close().unwrap();
    }

    #[test]
    fn verifying_while_a_writer_appends_and_rolls_finds_no_damage() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("log");
        let log = Log::open(&dir, Options::default().segment_size(2048)).unwrap();
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                for i in 0..3000 {
                    log.append(format!("event {i:05} and some more bytes").as_bytes())
                        .unwrap();
                }
                done.store(true, std::sync::atomic::Ordering::SeqCst);
            });
            let mut checks = 0;
            while !done.load(std::sync::atomic::Ordering::SeqCst) || checks < 3 {
                let r = verify(&dir).unwrap();
                assert!(r.is_clean(), "{r:?}");
                assert!(r.corruption().is_none(), "{r:?}");
                checks += 1;
            }
        });
        log.close().unwrap();
        let r = verify(&dir).unwrap();
        assert!(r.is_clean() && r.damage.is_none(), "{r:?}");
        assert_eq!(r.events, 3000);
    }
}
