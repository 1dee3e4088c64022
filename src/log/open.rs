//! Opening a log for writing: lock, inspect, repair what the recovery mode allows, report.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::error::{Corruption, Error, Result};
use super::format::{self, IndexHeader, IndexState, LogId, HEADER_SIZE};
use super::hint::{self, Hint};
use super::lock::WriterLock;
use super::options::{Options, RecoveryMode};
use super::reader::Shared;
use super::recovery::{self, DamageClass, Inspection, SegmentPlan};
use super::segment::{index_capacity, SegmentView};
use super::writer::{create_segment, Active, Log, Writer};

/// The folder (inside the log directory) where salvage keeps the files it cut.
pub const DAMAGED_DIR: &str = "damaged";

/// What opening a log found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecoveryReport {
    /// The log did not exist and was created.
    pub created: bool,
    /// The log had been closed cleanly: only headers and index tails were read.
    pub clean: bool,
    /// Segments in the log after opening.
    pub segments: usize,
    /// Records in the log after opening.
    pub events: u64,
    /// What was cut, if anything.
    pub cut: Option<Cut>,
    /// Index files that were missing or wrong and were rebuilt from their segments.
    pub indexes_rebuilt: Vec<PathBuf>,
    /// Files a crashed writer left behind, removed.
    pub removed: Vec<PathBuf>,
    /// Junk found after the complete records of segments (sealed ones, or the last one after a
    /// clean close), zeroed (no record was lost).
    pub junk_cleared: Vec<Corruption>,
    /// Salvage: compressed (cold) segments with a damaged block, each made the plain segment
    /// it was compressed from (the damaged blocks' bytes zeros) before the damage was cut; the
    /// copies of the compressed files kept in `damaged/`.
    pub cold_rebuilt: Vec<PathBuf>,
}

/// A part of the log that opening removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    /// A torn tail (default mode) or damage cut by salvage.
    pub class: DamageClass,
    /// Where the damage starts and what it is.
    pub at: Corruption,
    /// The first seq no longer in the log.
    pub first_lost_seq: u64,
    /// Bytes removed from the damaged segment.
    pub bytes: u64,
    /// Whole segments after the damage, moved to the `damaged/` folder.
    pub dropped_segments: Vec<PathBuf>,
    /// Copies kept in `damaged/` (salvage keeps the damaged segment as it was).
    pub kept_copies: Vec<PathBuf>,
    /// Where each of `dropped_segments` now is, in `damaged/` (same order).
    pub moved_to: Vec<PathBuf>,
}

impl std::fmt::Display for RecoveryReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.created {
            return write!(f, "created a new log");
        }
        write!(
            f,
            "{} events in {} segment(s), {}",
            self.events,
            self.segments,
            if self.clean {
                "closed cleanly"
            } else {
                "no clean close recorded (a writer that stopped without closing, or its \
                 last index lost or damaged)"
            }
        )?;
        if let Some(c) = &self.cut {
            let what = match c.class {
                DamageClass::TornTail => "cut a torn tail",
                DamageClass::Corruption => "salvaged: cut damaged data",
            };
            write!(
                f,
                "; {what} of {} bytes from seq {} ({})",
                c.bytes, c.first_lost_seq, c.at
            )?;
            if !c.dropped_segments.is_empty() {
                write!(
                    f,
                    "; moved {} later segment(s) to {DAMAGED_DIR}/",
                    c.dropped_segments.len()
                )?;
            }
        }
        if !self.junk_cleared.is_empty() {
            write!(
                f,
                "; zeroed stray bytes after the records of {} segment(s)",
                self.junk_cleared.len()
            )?;
        }
        if !self.indexes_rebuilt.is_empty() {
            write!(f, "; rebuilt {} index file(s)", self.indexes_rebuilt.len())?;
        }
        if !self.cold_rebuilt.is_empty() {
            write!(
                f,
                "; decompressed {} damaged compressed segment(s) (kept in {DAMAGED_DIR}/)",
                self.cold_rebuilt.len()
            )?;
        }
        Ok(())
    }
}

/// True when `dir` holds an index file.
fn has_index(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|rd| {
        rd.flatten()
            .any(|e| e.file_name().to_string_lossy().ends_with(".idx"))
    })
}

/// Creates a directory (and its parents) with mode 0700.
pub(crate) fn create_dir(dir: &Path) -> Result<()> {
    super::io::refuse_symlink(dir).map_err(|e| Error::io("open directory", dir, e))?;
    crate::util::create_private_dir(dir).map_err(|e| Error::io("create directory", dir, e))
}

/// [`Log::open`]: locks, inspects and repairs the log in `dir` (creating it where `options`
/// allow), then builds the writer.
pub(super) fn open(dir: &Path, options: Options) -> Result<Log> {
    options.validate()?;
    let dir = dir.to_path_buf();
    let mut report = RecoveryReport::default();
    super::io::refuse_symlink(&dir).map_err(|e| Error::io("open log directory", &dir, e))?;
    if !dir.is_dir() {
        if !options.create {
            return Err(Error::NotFound(dir));
        }
        create_dir(&dir)?;
        report.created = true;
    }
    let lock = WriterLock::acquire(&dir)?;
    // Before anything can change the log: a copy of its last record in the hint (a clean
    // close's) must not outlive what this writer does, even across a power loss.
    hint::drop_tail_durably(options.storage.as_ref(), &dir).map_err(|e| {
        Error::io(
            "drop the last record's copy from the hint",
            dir.join(hint::LASTSEG_FILE),
            e,
        )
    })?;
    if !report.created && !options.create {
        // A log always has a segment (its first is created with it): an existing log
        // directory without any segment or index file has lost them.
        let listing = recovery::list(&dir)?;
        if listing.bases.is_empty() && listing.missing.is_empty() && !has_index(&dir) {
            return Err(Error::corrupt(
                dir.join(format::segment_file_name(0)),
                0,
                Some(0),
                super::error::CorruptionKind::MissingSegment(
                    "the log has no segment file, and a log always has one".into(),
                ),
            ));
        }
    }
    let verify_all = options.recovery != RecoveryMode::TolerateTornTail;
    if options.recovery == RecoveryMode::Salvage {
        rebuild_damaged_cold(&dir, &options, &mut report)?;
    }
    let inspection = recovery::inspect(&dir, Some(options.payload_schema), verify_all)?;
    if let Some(e) = inspection.refusal(options.recovery) {
        return Err(e);
    }
    report.clean = inspection.clean() && !inspection.segments.is_empty();
    let (writer, views, synced) = repair(&dir, &options, inspection, &mut report)?;
    report.segments = views.len();
    report.events = writer.next_seq;
    let shared = Arc::new(Shared::new(views, writer.next_seq));
    Log::from_parts(dir, options, lock, writer, shared, synced, report)
}

/// Salvage: each compressed (cold) segment with a damaged block is made the plain segment it
/// was compressed from, its damaged blocks' bytes zeros, with an index header naming every
/// record the segment held (so a damaged last block is damage, never an end), the compressed
/// file kept in `damaged/` first. The plain salvage then keeps the records before the damage
/// and finds the valid ones after it. A cold segment whose header or block index is damaged
/// is left as it is: the inspection reports it and the salvage moves it whole.
fn rebuild_damaged_cold(dir: &Path, options: &Options, report: &mut RecoveryReport) -> Result<()> {
    use std::io::Read;
    let (bases, _) = recovery::list_dir(dir)?;
    for base in bases {
        let path = dir.join(format::segment_file_name(base));
        let mut head = [0u8; 8];
        let cold = std::fs::File::open(&path)
            .and_then(|mut f| f.read_exact(&mut head))
            .is_ok()
            && super::cold::is_cold(&head);
        if !cold {
            continue;
        }
        let Ok((plain, index, true)) = super::cold::rebuild_plain(&path, base) else {
            continue;
        };
        let damaged = dir.join(DAMAGED_DIR);
        create_dir(&damaged)?;
        let copy = damaged.join(format!(
            "{}.cold.{}",
            format::segment_file_name(base),
            crate::util::now_ms()
        ));
        std::fs::copy(&path, &copy).map_err(|e| Error::io("keep a copy of", &path, e))?;
        let mut idx = index.encode().to_vec();
        idx.resize(format::index_entry_offset(index.count) as usize, 0);
        let idx_path = dir.join(format::index_file_name(base));
        let seg_tmp = dir.join(format!("{base:020}.plain.seg.tmp"));
        let idx_tmp = dir.join(format!("{base:020}.plain.idx.tmp"));
        write_synced(&seg_tmp, &plain)?;
        write_synced(&idx_tmp, &idx)?;
        std::fs::rename(&seg_tmp, &path).map_err(|e| Error::io("rename", &seg_tmp, e))?;
        std::fs::rename(&idx_tmp, &idx_path).map_err(|e| Error::io("rename", &idx_tmp, e))?;
        options
            .storage
            .sync_dir(dir)
            .map_err(|e| Error::io("sync directory", dir, e))?;
        report.cold_rebuilt.push(copy);
    }
    Ok(())
}

/// Writes `bytes` to a new file at `path` (mode 0600), synced.
pub(super) fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| {
            f.write_all(bytes)?;
            f.sync_all()
        })
        .map_err(|e| Error::io("write", path, e))
}

/// Applies what the inspection found: removes strays, cuts damage, rebuilds indexes, and opens
/// the active segment for appending.
fn repair(
    dir: &Path,
    options: &Options,
    mut insp: Inspection,
    report: &mut RecoveryReport,
) -> Result<(Writer, Vec<Arc<SegmentView>>, u64)> {
    for stray in std::mem::take(&mut insp.strays) {
        std::fs::remove_file(&stray).map_err(|e| Error::io("remove stray file", &stray, e))?;
        report.removed.push(stray);
    }
    for junk in std::mem::take(&mut insp.junk) {
        clear_junk(options, &junk)?;
        report.junk_cleared.push(junk);
    }
    if let Some(d) = insp.damage.take() {
        let mut cut = Cut {
            class: d.class,
            at: d.corruption.clone(),
            first_lost_seq: d.first_lost_seq,
            bytes: d.bytes,
            dropped_segments: Vec::new(),
            kept_copies: Vec::new(),
            moved_to: Vec::new(),
        };
        let mut to_move: Vec<u64> = insp.dropped.clone();
        let damaged_in_plans = insp
            .segments
            .last()
            .is_some_and(|s| s.view.path == d.corruption.path);
        if !damaged_in_plans {
            if let Some(base) = d
                .corruption
                .path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(format::parse_segment_file_name)
            {
                to_move.insert(0, base);
            }
        }
        if d.class == DamageClass::Corruption || !to_move.is_empty() {
            let damaged = dir.join(DAMAGED_DIR);
            create_dir(&damaged)?;
            let stamp = crate::util::now_ms();
            // Where every file goes, decided first: the list of what the session layer must
            // search is written (synced) before anything moves, so that a crash between the cut
            // and the writing of the events after the damage leaves it to the next open.
            let copy_from = (damaged_in_plans && d.class == DamageClass::Corruption)
                .then(|| d.corruption.path.clone());
            if let Some(from) = &copy_from {
                let name = format!(
                    "{}.{stamp}",
                    from.file_name()
                        .and_then(|n| n.to_str())
                        .unwrap_or("segment")
                );
                cut.kept_copies.push(damaged.join(name));
            }
            let mut moves = Vec::new();
            for base in to_move {
                for name in [
                    format::segment_file_name(base),
                    format::index_file_name(base),
                ] {
                    let from = dir.join(&name);
                    if !from.exists() {
                        continue;
                    }
                    let to = damaged.join(format!("{name}.{stamp}"));
                    if name.ends_with(".seg") {
                        cut.dropped_segments.push(from.clone());
                        cut.moved_to.push(to.clone());
                    }
                    moves.push((from, to));
                }
            }
            super::salvage::write_pending(&damaged, stamp, &cut.salvage_sources())?;
            if let (Some(from), Some(copy)) = (&copy_from, cut.kept_copies.first()) {
                std::fs::copy(from, copy).map_err(|e| Error::io("keep a copy of", from, e))?;
            }
            for (from, to) in moves {
                std::fs::rename(&from, &to)
                    .map_err(|e| Error::io("move damaged file", &from, e))?;
            }
        }
        report.cut = Some(cut);
    }
    let log_id = insp.log_id.unwrap_or_else(LogId::generate);
    let next_seq = insp.len();
    let plans = std::mem::take(&mut insp.segments);
    let last = plans.len().checked_sub(1);
    let mut active = None;
    // The last segment, when it is full: sealed only once its successor exists (a sealed
    // segment always has one).
    let mut seal_last = None;
    for (i, plan) in plans.into_iter().enumerate() {
        if plan.view.is_cold() {
            // A cold segment is never written: appends go to a new segment after it. Its old
            // index file (a compression stopped between the rename and its removal) goes.
            if !plan.index_trusted {
                return Err(Error::corrupt(
                    &plan.view.path,
                    0,
                    Some(plan.base()),
                    super::error::CorruptionKind::CompressedBlock(
                        "a damaged cold segment cannot be repaired".into(),
                    ),
                ));
            }
            let idx = plan.view.index_path();
            if idx.exists() {
                std::fs::remove_file(&idx).map_err(|e| Error::io("remove", &idx, e))?;
                report.removed.push(idx);
            }
            continue;
        }
        let big_enough = HEADER_SIZE as u64 + format::record_size(options.max_event_size)
            <= plan.view.header.capacity;
        let keep_open = Some(i) == last
            && plan.index_state != Some(IndexState::Sealed)
            && plan.end + format::record_size(1) <= plan.view.header.capacity;
        if keep_open && !big_enough && plan.count == 0 {
            // An empty segment too small for the configured maximum event: start it again.
            for p in [plan.view.path.clone(), plan.view.index_path()] {
                std::fs::remove_file(&p).map_err(|e| Error::io("remove", &p, e))?;
            }
        } else if keep_open && big_enough {
            active = Some(reopen_active(dir, options, plan, report)?);
        } else if !plan.index_trusted || plan.index_state != Some(IndexState::Sealed) {
            trim_plan(options, &plan)?;
            if Some(i) == last {
                seal_last = Some(plan);
            } else {
                seal_plan(dir, options, &plan, report)?;
            }
        }
    }
    options
        .storage
        .sync_dir(dir)
        .map_err(|e| Error::io("sync directory", dir, e))?;
    let (bases, _) = recovery::list_dir(dir)?;
    let mut views = Vec::with_capacity(bases.len() + 1);
    for base in bases {
        let view = match &active {
            Some(a) if a.base == base => Arc::clone(&a.view),
            _ => Arc::new(SegmentView::open(dir, base)?),
        };
        views.push(view);
    }
    let active = match active {
        Some(a) => a,
        None => {
            let a = create_segment(dir, options, next_seq, log_id)?;
            views.push(Arc::clone(&a.view));
            a
        }
    };
    if let Some(plan) = seal_last {
        seal_plan(dir, options, &plan, report)?;
    }
    // The hint of a log reopened, when it does not name the active segment (a log written by an
    // older build, or changed by recovery): not synced, as the active segment exists and is the
    // last (docs/format.md, `LASTSEG`).
    // A hint with the tail a clean close wrote is rewritten without it: the tail is checked
    // before it is used, but this writer's appends would make every reader's check fail.
    let hint = Hint {
        log_id,
        last_base: active.base,
        tail: None,
    };
    match hint::read_hint(dir) {
        Some(h) if h == hint => {}
        // The same segment with a tail: dropped in place, allocating nothing (a full disk).
        Some(h) if Hint { tail: None, ..h } == hint => {
            if hint::rewrite_hint_in_place(dir, hint, None, false).is_err() {
                let _ = hint::write_hint(options.storage.as_ref(), dir, hint, false);
            }
        }
        _ => {
            let _ = hint::write_hint(options.storage.as_ref(), dir, hint, false);
        }
    }
    let writer = Writer {
        active: Some(active),
        retired: None,
        next_seq,
        log_id,
        closed: false,
    };
    Ok((writer, views, next_seq))
}

/// Zeroes (and gives back) the bytes after the records of a sealed segment.
fn clear_junk(options: &Options, junk: &Corruption) -> Result<()> {
    let path = &junk.path;
    super::fork::unshare(path)?;
    let len = std::fs::metadata(path)
        .map_err(|e| Error::io("stat", path, e))?
        .len();
    let mut seg = options
        .storage
        .open(path, len)
        .map_err(|e| Error::io("open segment", path, e))?;
    let tail = len.saturating_sub(junk.offset);
    seg.punch(junk.offset, tail)
        .and_then(|()| seg.syncer().sync_data())
        .map_err(|e| Error::io("zero the tail of", path, e))
}

/// Cuts whatever follows the records of a segment that was scanned (a torn tail, garbage)
/// and gives the space back; a segment shared with a fork is copied first.
fn trim_plan(options: &Options, plan: &SegmentPlan) -> Result<()> {
    if plan.scanned.is_some() && plan.file_len > plan.end {
        // Whatever follows the records (a torn tail, garbage) is cut; a segment shared with a
        // fork is copied first.
        super::fork::unshare(&plan.view.path)?;
        let mut seg = options
            .storage
            .open(&plan.view.path, plan.view.header.capacity)
            .map_err(|e| Error::io("open segment", &plan.view.path, e))?;
        let tail = plan.file_len - plan.end;
        seg.punch(plan.end, tail)
            .map_err(|e| Error::io("cut the tail of", &plan.view.path, e))?;
        seg.syncer()
            .sync_data()
            .map_err(|e| Error::io("fdatasync", &plan.view.path, e))?;
    }
    Ok(())
}

/// Writes the final index of a segment that stays sealed (rebuilt from the offsets found by
/// scanning, or just its header). [`trim_plan`] gave back the space after its records first.
fn seal_plan(
    dir: &Path,
    options: &Options,
    plan: &SegmentPlan,
    report: &mut RecoveryReport,
) -> Result<()> {
    let header = IndexHeader {
        state: IndexState::Sealed,
        base_seq: plan.base(),
        log_id: plan.view.header.log_id,
        count: plan.count,
        end: plan.end,
        synced_end: plan.end as u32,
    };
    match &plan.scanned {
        Some(offsets) => {
            write_index(dir, options, plan, header, offsets)?;
            report.indexes_rebuilt.push(plan.view.index_path());
        }
        None => {
            let path = plan.view.index_path();
            let mut idx = options
                .storage
                .open(&path, index_capacity(plan.view.header.capacity))
                .map_err(|e| Error::io("open index", &path, e))?;
            idx.reserve(0, HEADER_SIZE as u64)
                .and_then(|()| idx.write_at(0, &header.encode()))
                .map_err(|e| Error::io("write index header", &path, e))?;
            idx.syncer()
                .sync_data()
                .map_err(|e| Error::io("fdatasync", &path, e))?;
        }
    }
    Ok(())
}

/// Writes a whole index file.
fn write_index(
    dir: &Path,
    options: &Options,
    plan: &SegmentPlan,
    header: IndexHeader,
    offsets: &[u32],
) -> Result<Box<dyn super::io::StorageFile>> {
    let path = dir.join(format::index_file_name(plan.base()));
    let cap = index_capacity(plan.view.header.capacity);
    // An index file that exists may be mapped by readers: it is opened, never emptied.
    let opened = if path.exists() {
        options.storage.open(&path, cap)
    } else {
        options.storage.create(&path, cap)
    };
    let mut idx = opened.map_err(|e| Error::io("create index", &path, e))?;
    let mut bytes = Vec::with_capacity(HEADER_SIZE + offsets.len() * 4);
    bytes.extend_from_slice(&header.encode());
    for o in offsets {
        bytes.extend_from_slice(&o.to_le_bytes());
    }
    // Never shrink an index file: a reader may have it mapped (a page beyond the end of a file
    // is SIGBUS). Grow it, write it, and zero the stale entries after the new ones.
    let old_len = idx.len();
    idx.reserve(0, bytes.len() as u64)
        .and_then(|()| idx.write_at(0, &bytes))
        .and_then(|()| {
            idx.punch(
                bytes.len() as u64,
                old_len.saturating_sub(bytes.len() as u64),
            )
        })
        .map_err(|e| Error::io("write index", &path, e))?;
    idx.syncer()
        .sync_data()
        .map_err(|e| Error::io("fdatasync", &path, e))?;
    Ok(idx)
}

/// Opens the last segment for appending: zeroes whatever follows its records (a torn tail, a
/// killed writer's partial record), rebuilds its index when needed, marks it open, syncs.
fn reopen_active(
    dir: &Path,
    options: &Options,
    plan: SegmentPlan,
    report: &mut RecoveryReport,
) -> Result<Active> {
    let capacity = plan.view.header.capacity;
    let seg_path = plan.view.path.clone();
    let idx_path = plan.view.index_path();
    // A segment shared with another log (a fork) gets a copy of its own before it is written.
    super::fork::unshare(&seg_path)?;
    let mut seg = options
        .storage
        .open(&seg_path, capacity)
        .map_err(|e| Error::io("open segment", &seg_path, e))?;
    let dirty_tail = plan.file_len > plan.end
        && !(plan.index_trusted && plan.index_state == Some(IndexState::Closed));
    if plan.file_len > plan.end {
        // The bytes after the records are given back (a hole); appends reserve blocks again
        // before they write there, so a full disk is an error, never a SIGBUS.
        seg.punch(plan.end, plan.file_len - plan.end)
            .map_err(|e| Error::io("cut the tail of", &seg_path, e))?;
    }
    let header = IndexHeader {
        state: IndexState::Open,
        base_seq: plan.base(),
        log_id: plan.view.header.log_id,
        count: plan.count,
        end: plan.end,
        synced_end: plan.end as u32,
    };
    let syncer = seg.syncer();
    if dirty_tail || plan.scanned.is_some() {
        syncer
            .sync_data()
            .map_err(|e| Error::io("fdatasync", &seg_path, e))?;
    }
    let idx = match &plan.scanned {
        Some(offsets) => {
            report.indexes_rebuilt.extend(
                (!plan
                    .view
                    .index_header()
                    .is_some_and(|h| h.state == IndexState::Open)
                    || plan.view.count_by_index() != Some(plan.count))
                .then(|| idx_path.clone()),
            );
            write_index(dir, options, &plan, header, offsets)?
        }
        None => {
            let mut idx = options
                .storage
                .open(&idx_path, index_capacity(capacity))
                .map_err(|e| Error::io("open index", &idx_path, e))?;
            idx.reserve(0, HEADER_SIZE as u64)
                .and_then(|()| idx.write_at(0, &header.encode()))
                .map_err(|e| Error::io("write index header", &idx_path, e))?;
            idx.syncer()
                .sync_data()
                .map_err(|e| Error::io("fdatasync", &idx_path, e))?;
            idx
        }
    };
    let view = SegmentView::open(dir, plan.base())?;
    view.set_readable(seg.len());
    let idx_syncer = idx.syncer();
    Ok(Active {
        base: plan.base(),
        seed: plan.view.check.seed,
        log_id: plan.view.header.log_id,
        capacity,
        seg,
        idx,
        syncer,
        idx_syncer,
        count: plan.count,
        end: plan.end,
        synced_end: plan.end,
        dirty_to: 0,
        dirty_entries_to: 0,
        view: Arc::new(view),
        seg_path,
        idx_path,
    })
}
