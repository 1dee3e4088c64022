//! After a salvage: the valid events the cut removed, decoded and written as canonical JSONL.
//!
//! The log layer finds the valid records left in `damaged/` ([`SalvagedRecords`]); this decodes
//! each as an event and writes the ones it can to `damaged/<file>.after.jsonl`, beside the file
//! they came from, with their original seqs. Nothing valid is lost: the file can be read, or its
//! events appended again, by anyone.

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use rkyv::util::AlignedVec;

use crate::error::{Error, Result};
use crate::event::{access_event, JsonlWriter};
use crate::log::{LogId, SalvagedRecords};

/// The valid events found in one file of `damaged/` after the damage.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SalvagedEvents {
    /// The file in `damaged/` they were found in.
    pub source: PathBuf,
    /// The canonical JSONL file they were written to (`<source>.after.jsonl`); written only when
    /// at least one event was found.
    pub jsonl: Option<PathBuf>,
    /// Events written there.
    pub events: u64,
    /// The first and last seq written.
    pub seqs: Option<(u64, u64)>,
    /// Seqs of records whose checksum is right but which hold no valid event archive (or one
    /// whose seq differs from the record's): left out.
    pub undecodable: Vec<u64>,
}

/// Finds the valid records of every file a cut left in `damaged/` of the log in `dir` and writes
/// their events: the cut this open made, and any whose writing a crash stopped (the log layer
/// lists a cut's files before it moves them, and the list goes once their events are written).
pub(crate) fn write_after_cuts(dir: &Path, log_id: LogId) -> Result<Vec<SalvagedEvents>> {
    let mut out = Vec::new();
    for pending in crate::log::take_pending(dir)? {
        for source in &pending.sources {
            let records = SalvagedRecords::find(source, log_id)?;
            out.push(write_records(&source.file, &records)?);
        }
        pending.done()?;
    }
    Ok(out)
}

fn write_records(source: &Path, records: &SalvagedRecords) -> Result<SalvagedEvents> {
    let mut report = SalvagedEvents {
        source: source.to_path_buf(),
        jsonl: None,
        events: 0,
        seqs: None,
        undecodable: Vec::new(),
    };
    if records.is_empty() {
        return Ok(report);
    }
    let name = source
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("segment");
    let path = source.with_file_name(format!("{name}.after.jsonl"));
    let tmp = source.with_file_name(format!("{name}.after.jsonl.tmp"));
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| Error::io("create", &tmp, e))?;
    let mut w = JsonlWriter::new(std::io::BufWriter::new(file));
    let mut buf = AlignedVec::<16>::new();
    for (seq, payload) in records.iter() {
        buf.clear();
        buf.extend_from_slice(payload);
        match access_event(&buf) {
            Ok(event) if event.seq() == seq => {
                w.write_archived(event)
                    .map_err(|e| Error::io("write", &tmp, e))?;
                report.events += 1;
                report.seqs = Some((report.seqs.map_or(seq, |(first, _)| first), seq));
            }
            _ => report.undecodable.push(seq),
        }
    }
    let file = w
        .into_inner()
        .map_err(|e| Error::io("write", &tmp, e))?
        .into_inner()
        .map_err(|e| Error::io("write", &tmp, e.into_error()))?;
    file.sync_all().map_err(|e| Error::io("fsync", &tmp, e))?;
    drop(file);
    if report.events == 0 {
        std::fs::remove_file(&tmp).map_err(|e| Error::io("remove", &tmp, e))?;
        return Ok(report);
    }
    std::fs::rename(&tmp, &path).map_err(|e| Error::io("rename", &tmp, e))?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| Error::io("fsync directory", dir, e))?;
    }
    report.jsonl = Some(path);
    Ok(report)
}

impl std::fmt::Display for SalvagedEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.jsonl, self.seqs) {
            (Some(p), Some((a, b))) => write!(
                f,
                "{} valid event(s) after the damage (seqs {a} to {b}) from {} written to {}",
                self.events,
                self.source.display(),
                p.display()
            )?,
            _ => write!(
                f,
                "no valid event after the damage in {}",
                self.source.display()
            )?,
        }
        if !self.undecodable.is_empty() {
            write!(
                f,
                "; {} record(s) with a right checksum but no valid event left out (seqs {:?})",
                self.undecodable.len(),
                self.undecodable
            )?;
        }
        Ok(())
    }
}
