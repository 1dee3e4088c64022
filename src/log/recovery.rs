//! Opening a log: finding its segments, checking them, classifying damage, and (for the writer)
//! repairing what the recovery mode allows.
//!
//! A clean open reads each segment's header, its index header and the last record the index
//! names, nothing else. After an unclean stop the active segment is scanned record by record.
//! The first record that is not valid is classified:
//!
//! - nothing valid follows it, and it lies beyond what was synced: a **torn tail** (a crash in the
//!   middle of an append). The default mode cuts it and reports what was cut.
//! - a valid record follows it, it lies in the synced part, or it is in a sealed segment:
//!   **corruption**. Only [`RecoveryMode::Salvage`] cuts it; the other modes refuse to open.

use std::path::{Path, PathBuf};

use super::error::{Corruption, CorruptionKind, Error, Result};
use super::format::{self, IndexState, LogId, HEADER_SIZE};
use super::options::RecoveryMode;
use super::segment::{self, Fault, SegmentView};

/// How damage found at open is classified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DamageClass {
    /// An incomplete last record of the active segment, left by a crash during an append.
    TornTail,
    /// Damage that a crash cannot explain: a bad record with valid records after it, in the
    /// synced part of the log, or in a sealed segment.
    Corruption,
}

/// Damage found while opening, and what it costs to cut it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// Where and what.
    pub corruption: Corruption,
    /// Torn tail or corruption.
    pub class: DamageClass,
    /// The first seq that a cut at this point removes from the log.
    pub first_lost_seq: u64,
    /// Bytes after the cut point in the damaged segment.
    pub bytes: u64,
}

/// One segment as found at open.
#[derive(Debug)]
pub(crate) struct SegmentPlan {
    pub view: SegmentView,
    pub count: u64,
    pub end: u64,
    pub file_len: u64,
    /// The index header was valid and agreed with the segment.
    pub index_trusted: bool,
    pub index_state: Option<IndexState>,
    /// Offsets found by scanning (the index must be rewritten from these).
    pub scanned: Option<Vec<u32>>,
}

impl SegmentPlan {
    pub(crate) fn base(&self) -> u64 {
        self.view.header.base_seq
    }
}

/// Everything found at open.
#[derive(Debug, Default)]
pub(crate) struct Inspection {
    pub log_id: Option<LogId>,
    /// The segments before the damage (the damaged one included, holding its valid prefix).
    pub segments: Vec<SegmentPlan>,
    pub damage: Option<Damage>,
    /// Base seqs of whole segments after the damage.
    pub dropped: Vec<u64>,
    /// Files a crashed writer left behind (temporary segment files, indexes without segment).
    pub strays: Vec<PathBuf>,
    /// Non-zero bytes after the complete records of a sealed segment (whose tail must read as
    /// zeros): no record is lost, the bytes are zeroed (strict mode refuses them).
    pub junk: Vec<Corruption>,
}

impl Inspection {
    /// Events in the kept segments.
    pub(crate) fn len(&self) -> u64 {
        self.segments.last().map_or(0, |s| s.base() + s.count)
    }

    /// True when the log was closed cleanly and nothing needs repair.
    pub(crate) fn clean(&self) -> bool {
        self.damage.is_none()
            && self.segments.last().is_none_or(|s| {
                s.index_trusted
                    && matches!(s.index_state, Some(IndexState::Closed | IndexState::Sealed))
            })
            && self.segments.iter().all(|s| s.index_trusted)
    }

    /// The error the recovery mode raises for the damage found, if any.
    pub(crate) fn refusal(&self, mode: RecoveryMode) -> Option<Error> {
        if mode == RecoveryMode::Strict {
            if let Some(j) = self.junk.first() {
                return Some(Error::TornTail(Box::new(j.clone())));
            }
        }
        let d = self.damage.as_ref()?;
        match (d.class, mode) {
            (_, RecoveryMode::Salvage) => None,
            (DamageClass::TornTail, RecoveryMode::TolerateTornTail) => None,
            (DamageClass::TornTail, RecoveryMode::Strict) => {
                Some(Error::TornTail(Box::new(d.corruption.clone())))
            }
            (DamageClass::Corruption, _) => Some(Error::Corrupt(Box::new(d.corruption.clone()))),
        }
    }
}

/// The files of a log directory.
#[derive(Debug, Default)]
pub(crate) struct Listing {
    /// Base seqs of the segment files, sorted.
    pub bases: Vec<u64>,
    /// Files a crashed writer left behind: temporary files, and the empty index a writer
    /// creates just before the segment it starts next.
    pub strays: Vec<PathBuf>,
    /// Segments that must exist but do not: an index file names records (or a clean close, or
    /// a seal) for a segment file that is gone. Base seq and the index file.
    pub missing: Vec<(u64, PathBuf)>,
}

/// Lists the segments of `dir` and the stray files.
pub(crate) fn list_dir(dir: &Path) -> Result<(Vec<u64>, Vec<PathBuf>)> {
    let l = list(dir)?;
    Ok((l.bases, l.strays))
}

/// Lists the segments of `dir`, the stray files and the evidence of missing segments.
pub(crate) fn list(dir: &Path) -> Result<Listing> {
    let rd = std::fs::read_dir(dir).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::NotFound(dir.to_path_buf()),
        std::io::ErrorKind::PermissionDenied => Error::io("read directory", dir, e),
        _ => Error::io("read directory", dir, e),
    })?;
    let mut out = Listing::default();
    let mut idx = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|e| Error::io("read directory", dir, e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(base) = format::parse_segment_file_name(name) {
            out.bases.push(base);
        } else if name.ends_with(".seg.tmp") || name.ends_with(".idx.tmp") {
            out.strays.push(entry.path());
        } else if let Some(stem) = name.strip_suffix(".idx") {
            idx.push((stem.to_string(), entry.path()));
        }
    }
    out.bases.sort_unstable();
    let last = out.bases.last().copied();
    for (stem, path) in idx {
        let base = (stem.len() == 20)
            .then(|| stem.parse::<u64>().ok())
            .flatten();
        let Some(base) = base else {
            out.strays.push(path);
            continue;
        };
        if out.bases.binary_search(&base).is_ok() {
            continue;
        }
        // An index without its segment. A writer creates the index of its next segment first:
        // an empty, open index after the last segment is that (a stray). Anything else names
        // records of a segment that is gone.
        let header = read_index_header(&path).filter(|h| h.base_seq == base);
        let fresh = header
            .as_ref()
            .is_some_and(|h| h.state == IndexState::Open && h.count == 0)
            && last.is_none_or(|l| base > l);
        if header.is_some() && !fresh {
            out.missing.push((base, path));
        } else {
            out.strays.push(path);
        }
    }
    out.missing.sort_unstable();
    Ok(out)
}

/// Refuses to go on with a log whose segments are damaged where a crash cannot explain it (a
/// missing or foreign segment, records a clean close or a seal vouches for that are gone, a
/// damaged header, a record that fails its checksum): what archiving checks before it
/// compresses. Reads every record (archiving reads them all anyway); a torn tail is not refused
/// (a killed writer's last segment stays plain until a writer opens the log).
pub(crate) fn refuse_corruption(dir: &Path) -> Result<()> {
    match inspect(dir, None, true)?.damage {
        Some(d) if d.class == DamageClass::Corruption => {
            Err(Error::Corrupt(Box::new(d.corruption)))
        }
        _ => Ok(()),
    }
}

/// The header of an index file, if it can be read and is valid.
fn read_index_header(path: &Path) -> Option<super::format::IndexHeader> {
    let f = std::fs::File::open(path).ok()?;
    let head = segment::read_header(&f, path).ok()?;
    super::format::IndexHeader::decode(&head).ok()
}

/// The log's id when the header of its first segment cannot be read: the one its index names,
/// else the one `LOGMETA` records, else a later segment's (each only from a header whose
/// checksum is right).
fn fallback_log_id(dir: &Path, bases: &[u64]) -> Option<LogId> {
    let index_id =
        |base: u64| read_index_header(&dir.join(format::index_file_name(base))).map(|h| h.log_id);
    let segment_id = |base: u64| {
        let path = dir.join(format::segment_file_name(base));
        let f = std::fs::File::open(&path).ok()?;
        let head = segment::read_header(&f, &path).ok()?;
        format::SegmentHeader::decode(&head).ok().map(|h| h.log_id)
    };
    let first = *bases.first()?;
    index_id(first)
        .or_else(|| super::meta::recorded_log_id(dir))
        .or_else(|| {
            bases[1..]
                .iter()
                .find_map(|&b| segment_id(b).or_else(|| index_id(b)))
        })
}

/// Damage for the segment `base` whose file is missing.
fn missing_segment(dir: &Path, base: u64, first_lost: u64, why: String) -> Damage {
    Damage {
        corruption: Corruption {
            path: dir.join(format::segment_file_name(base)),
            offset: 0,
            seq: Some(base),
            kind: CorruptionKind::MissingSegment(why),
        },
        class: DamageClass::Corruption,
        first_lost_seq: first_lost,
        bytes: 0,
    }
}

/// Reads and checks every segment of the log in `dir` without changing anything.
///
/// With `verify_all`, every record of every segment is checked (strict and salvage modes, and
/// `verify`); otherwise a segment whose index header and index tail agree with it is trusted
/// without reading its records.
pub(crate) fn inspect(
    dir: &Path,
    payload_schema: Option<u32>,
    verify_all: bool,
) -> Result<Inspection> {
    inspect_with(dir, payload_schema, verify_all, false)
}

/// [`inspect`], and with `live` safe while a writer appends: a segment that may still change
/// (the active one, whose preallocated tail the writer trims when it seals or closes it) is
/// checked in a private copy instead of a file map.
pub(crate) fn inspect_with(
    dir: &Path,
    payload_schema: Option<u32>,
    verify_all: bool,
    live: bool,
) -> Result<Inspection> {
    let Listing {
        bases,
        strays,
        missing,
    } = list(dir)?;
    let mut out = Inspection {
        strays,
        ..Inspection::default()
    };
    for (i, &base) in bases.iter().enumerate() {
        // An index file names a segment before this one that is gone.
        if let Some((m, idx)) = missing.iter().find(|&&(m, _)| m < base) {
            let expected = out.len();
            out.damage = Some(missing_segment(
                dir,
                *m,
                expected,
                format!("its index {} is still there", idx.display()),
            ));
            out.dropped = bases[i..].to_vec();
            return Ok(out);
        }
        let is_last = i + 1 == bases.len();
        // The next segment: the next file, or a missing one whose index is still there (the
        // damage is then that segment's absence, not this one's records ending early).
        let next_base = bases
            .get(i + 1)
            .copied()
            .into_iter()
            .chain(missing.iter().map(|&(m, _)| m).filter(|&m| m > base))
            .min();
        let view = match SegmentView::open(dir, base) {
            Ok(v) if live && !v.is_settled() => SegmentView::snapshot(dir, base),
            other => other,
        };
        let view = match view {
            Ok(v) => v,
            Err(Error::Corrupt(c)) => {
                if out.log_id.is_none() {
                    // The first segment's header is unreadable: the log keeps its id (a
                    // salvage's new segment, LOGMETA and the checkpoint go on naming it, and
                    // the records after the damage are found with it).
                    out.log_id = fallback_log_id(dir, &bases[i..]);
                }
                out.damage = Some(Damage {
                    first_lost_seq: base,
                    bytes: std::fs::metadata(&c.path).map_or(0, |m| m.len()),
                    corruption: *c,
                    class: DamageClass::Corruption,
                });
                out.dropped = bases[i + 1..].to_vec();
                return Ok(out);
            }
            Err(e) => return Err(e),
        };
        if let Some(schema) = payload_schema {
            if view.header.payload_schema != schema {
                return Err(Error::Incompatible {
                    path: view.path.clone(),
                    reason: format!(
                        "payload schema {} (expected {schema})",
                        view.header.payload_schema
                    ),
                });
            }
        }
        let expected_base = out.len();
        let log_id = *out.log_id.get_or_insert(view.header.log_id);
        let header_damage = if view.header.log_id != log_id {
            Some(CorruptionKind::ForeignSegment {
                expected: log_id.to_string(),
                found: view.header.log_id.to_string(),
            })
        } else if i > 0 && base != expected_base {
            Some(CorruptionKind::MissingSeqs {
                from: expected_base,
                to: base,
            })
        } else if i == 0 && base != 0 {
            Some(CorruptionKind::MissingSeqs { from: 0, to: base })
        } else {
            None
        };
        if let Some(kind) = header_damage {
            let offset = if matches!(kind, CorruptionKind::ForeignSegment { .. }) {
                24
            } else {
                16
            };
            out.damage = Some(Damage {
                corruption: Corruption {
                    path: view.path.clone(),
                    offset,
                    seq: Some(expected_base),
                    kind,
                },
                class: DamageClass::Corruption,
                first_lost_seq: expected_base,
                bytes: view.data().len() as u64,
            });
            out.dropped = bases[i + 1..].to_vec();
            return Ok(out);
        }
        let (plan, damage, junk) = plan_segment(view, is_last, next_base, verify_all);
        out.segments.push(plan);
        out.junk.extend(junk);
        if let Some(d) = damage {
            out.damage = Some(d);
            out.dropped = bases[i + 1..].to_vec();
            return Ok(out);
        }
    }
    let len = out.len();
    if let Some((m, idx)) = missing.first() {
        out.damage = Some(missing_segment(
            dir,
            *m,
            len,
            format!("its index {} is still there", idx.display()),
        ));
    } else if let Some(last) = out.segments.last() {
        // A segment is sealed only once its successor exists. (A writer appending while this
        // runs may have created it, and sealed this one, after the directory was listed.)
        if last.index_state == Some(IndexState::Sealed)
            && !dir.join(format::segment_file_name(len)).exists()
        {
            out.damage = Some(missing_segment(
                dir,
                len,
                len,
                format!(
                    "{} is sealed, and a segment is sealed only once the next one exists",
                    last.view.index_path().display()
                ),
            ));
        }
    }
    Ok(out)
}

fn plan_segment(
    view: SegmentView,
    is_last: bool,
    next_base: Option<u64>,
    verify_all: bool,
) -> (SegmentPlan, Option<Damage>, Option<Corruption>) {
    // A cold segment's blocks are all read (decompressed) only for a full check: trusted, it
    // costs its header and the block of its last record, like a plain segment.
    let cold_damage = view
        .cold()
        .filter(|_| {
            // A quick open reads the block of the last record: when that fails, the damage
            // is named as a damaged block, not as records that end early.
            verify_all
                || !view
                    .index_header()
                    .is_some_and(|h| view.index_tail_ok(h.count, h.end))
        })
        .and_then(|c| c.first_damage());
    if let Some((fault, count, end)) = cold_damage {
        // A damaged block of a cold segment: its records are lost from the block on (a cold
        // segment is never cut or repaired: salvage first makes it a plain segment,
        // `open::rebuild_damaged_cold`).
        let base = view.header.base_seq;
        let damage = Damage {
            corruption: Corruption {
                path: view.path.clone(),
                offset: fault.file_offset,
                seq: Some(fault.first_seq),
                kind: CorruptionKind::CompressedBlock(fault.what),
            },
            class: DamageClass::Corruption,
            first_lost_seq: base + count,
            bytes: 0,
        };
        let plan = SegmentPlan {
            count,
            end,
            file_len: end,
            index_trusted: false,
            index_state: view.index_header().map(|h| h.state),
            scanned: None,
            view,
        };
        return (plan, Some(damage), None);
    }
    let file_len = view.readable_len();
    let base = view.header.base_seq;
    let index = view.index_header();
    let index_state = index.map(|h| h.state);
    let trusted = index.filter(|h| {
        matches!(h.state, IndexState::Closed | IndexState::Sealed)
            && h.end <= file_len
            && view.index_tail_ok(h.count, h.end)
            && (h.end == file_len
                || matches!(
                    segment::check_record(view.data(), h.end, base + h.count, &view.check),
                    Err(Fault::Zero)
                ))
            && next_base.is_none_or(|n| n == base + h.count)
    });
    if let Some(h) = trusted.filter(|_| !verify_all) {
        let plan = SegmentPlan {
            count: h.count,
            end: h.end,
            file_len,
            index_trusted: true,
            index_state,
            scanned: None,
            view,
        };
        return (plan, None, None);
    }
    let data = view.data();
    let s = segment::scan(data, HEADER_SIZE as u64, base, &view.check);
    let count = s.offsets.len() as u64;
    // A segment before the last whose index does not say sealed: its seal had not finished
    // (the writer creates the next segment first, then syncs and seals this one in the
    // background), or its index header was torn by a power loss before the seal's sync.
    let unfinished_seal = !is_last
        && !matches!(
            index_state,
            Some(IndexState::Sealed) | Some(IndexState::Closed)
        );
    let synced = match index {
        Some(h) if matches!(h.state, IndexState::Closed | IndexState::Sealed) => h.end,
        Some(h) => u64::from(h.synced_end),
        None => 0,
    };
    // Records that end before the index header says they reach (a closed or sealed segment's
    // end, an open one's synced end) were lost after they were complete: zeroed or truncated.
    let stop = match s.stop {
        Some((offset, Fault::Zero)) if offset < synced => {
            Some((offset, Fault::EndsEarly { claimed: synced }))
        }
        None if s.end < synced => Some((s.end, Fault::EndsEarly { claimed: synced })),
        // The records run to the end of the file but stop short of the next segment's base:
        // judged like records that end in zeros there.
        None if next_base.is_some_and(|n| n != base + count) => Some((s.end, Fault::Zero)),
        other => other,
    };
    let mut junk = None;
    let damage = match stop {
        None => None,
        Some((offset, fault)) => {
            let seq = base + count;
            // Only where the file holds data: the given-back tail of a segment is a hole.
            let ranges = view.data_ranges(offset);
            let after = segment::valid_record_after(data, offset, seq, &view.check, &ranges);
            let nonzero_end = segment::has_nonzero(data, offset, &ranges);
            let ends = matches!(fault, Fault::Zero | Fault::EndsEarly { .. });
            // Every record the segment must hold is there: the next segment starts right
            // after them, or a clean close recorded exactly these records.
            let complete = match next_base {
                Some(n) => n == seq,
                None => index.is_some_and(|h| {
                    matches!(h.state, IndexState::Closed | IndexState::Sealed)
                        && h.count == count
                        && h.end == offset
                }),
            };
            let early = matches!(fault, Fault::EndsEarly { .. });
            let class = if ends && after.is_none() && nonzero_end.is_none() {
                // A clean end of the records. In a sealed segment it must hold every record up
                // to the next segment's base; in any segment, every record the index header
                // vouches for (a clean close's end, or the synced end): those were complete and
                // durable, so losing them is damage, never a torn tail.
                match next_base {
                    _ if early => Some(DamageClass::Corruption),
                    // A segment whose seal never finished (the writer stopped while a thread
                    // was syncing it) may have lost its unsynced end: a torn tail, and the later
                    // segments come after the tear.
                    Some(n) if n != seq && unfinished_seal && offset >= synced => {
                        Some(DamageClass::TornTail)
                    }
                    Some(n) if n != seq => Some(DamageClass::Corruption),
                    _ => None,
                }
            } else if after.is_none() && complete && !early {
                // Every record is there, with stray bytes after them (a flipped bit in the
                // zeros, a sealed segment's junk): nothing is lost. The bytes are zeroed when a
                // writer opens the log; they never cost a valid record.
                let end = nonzero_end.unwrap_or(offset).max(offset);
                junk = Some(Corruption {
                    path: view.path.clone(),
                    offset,
                    seq: None,
                    kind: super::error::CorruptionKind::TrailingBytes(end - offset),
                });
                None
            } else if !(is_last || unfinished_seal) || after.is_some() || early || offset < synced {
                // A valid record after it, or damage in what the index vouches for (a clean
                // close's records, the synced part): a crash cannot explain it.
                Some(DamageClass::Corruption)
            } else {
                Some(DamageClass::TornTail)
            };
            class.map(|class| Damage {
                corruption: Corruption {
                    path: view.path.clone(),
                    offset,
                    seq: Some(seq),
                    kind: fault.clone().into_kind(),
                },
                class,
                first_lost_seq: seq,
                bytes: match fault {
                    Fault::Incomplete { .. } => file_len,
                    _ => nonzero_end.unwrap_or(offset),
                }
                .max(offset)
                    - offset,
            })
        }
    };
    // A full check that found the index right keeps it.
    let index_right = damage.is_none()
        && trusted.is_some_and(|h| h.count == count && h.end == s.end)
        && view.index_entries_match(&s.offsets);
    let plan = SegmentPlan {
        count,
        end: s.end,
        file_len,
        index_trusted: index_right,
        index_state,
        scanned: (!index_right).then_some(s.offsets),
        view,
    };
    (plan, damage, junk)
}
