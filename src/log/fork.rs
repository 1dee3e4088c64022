//! Copying the first `n` records of a log into a new log directory, cheaply: sealed segments
//! wholly inside the prefix are hard-linked (they never change again; a writer that would have
//! to change a shared file copies it first), the segment holding the last record of the prefix
//! is copied up to that record. No record is decoded or re-encoded; the new log keeps the
//! parent's log id, so the copied records validate in it.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

use super::error::{Error, Result};
use super::format::{self, IndexHeader, IndexState};
use super::reader::LogReader;
use super::segment::SegmentView;

/// What [`copy_prefix`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PrefixCopy {
    /// Records in the new log.
    pub records: u64,
    /// Sealed segments shared with the parent through a hard link.
    pub linked_segments: usize,
    /// Segments copied (the one cut at the fork point, or every one when linking failed).
    pub copied_segments: usize,
    /// Bytes copied.
    pub copied_bytes: u64,
}

fn create_private(path: &Path) -> Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
        .map_err(|e| Error::io("create", path, e))
}

fn write_file(path: &Path, parts: &[&[u8]]) -> Result<()> {
    let mut f = create_private(path)?;
    for part in parts {
        f.write_all(part).map_err(|e| Error::io("write", path, e))?;
    }
    f.sync_all().map_err(|e| Error::io("fdatasync", path, e))
}

/// Writes the index of the first `count` records of `view`, ending at `end`, as cleanly closed
/// (the offsets come from the parent's index; the last record is checked).
fn write_index_prefix(view: &SegmentView, to: &Path, count: u64, end: u64) -> Result<()> {
    let header = IndexHeader {
        state: IndexState::Closed,
        base_seq: view.header.base_seq,
        log_id: view.header.log_id,
        count,
        end,
        synced_end: end as u32,
    };
    let mut bytes = Vec::with_capacity(format::HEADER_SIZE + count as usize * 4);
    bytes.extend_from_slice(&header.encode());
    for i in 0..count {
        let offset = view.offset_of(i).ok_or_else(|| {
            Error::corrupt(
                view.index_path(),
                format::index_entry_offset(i),
                Some(view.header.base_seq + i),
                super::error::CorruptionKind::Truncated("the index has no entry for it".into()),
            )
        })?;
        bytes.extend_from_slice(&(offset as u32).to_le_bytes());
    }
    write_file(to, &[&bytes])
}

/// Checks the checksum of each of the first `count` records of `view`: a fork never carries
/// damage into a new session without a word.
fn check_records(view: &SegmentView, count: u64) -> Result<()> {
    let base = view.header.base_seq;
    for i in 0..count {
        // A missing or damaged index (derived data) is no damage of the records.
        view.record_rescanning(i).map_err(|(offset, fault)| {
            Error::corrupt(&view.path, offset, Some(base + i), fault.into_kind())
        })?;
    }
    Ok(())
}

/// Copies the first `n` records of the log in `from` into the empty directory `to` (which must
/// exist): sealed segments are hard-linked when possible (copied otherwise), the segment
/// holding record `n - 1` is copied up to the end of that record. Each record copied is checked
/// (its checksum; nothing is decoded): a damaged one fails the copy with [`Error::Corrupt`]
/// naming it, so a copy never carries damage. The hard-linked segments are not read (that would
/// make forking cost a read of the whole prefix): they are the parent's own files, not copies,
/// and `verify` of either log reports damage in them. Works while a writer appends to `from`. Fails with
/// [`Error::SeqOutOfRange`] when the log holds fewer than `n` records.
pub fn copy_prefix(from: &Path, to: &Path, n: u64) -> Result<PrefixCopy> {
    let reader = LogReader::open(from)?;
    if n > reader.len() {
        return Err(Error::SeqOutOfRange {
            seq: n,
            len: reader.len(),
        });
    }
    // The segments past the prefix are never mapped.
    let bases = reader.segment_bases()?;
    let mut out = PrefixCopy {
        records: n,
        ..PrefixCopy::default()
    };
    for (k, &base) in bases.iter().enumerate() {
        // An empty prefix still gets a first segment (a log always has one): the parent's
        // first segment's header, with no record.
        if base >= n && !(n == 0 && k == 0) {
            break;
        }
        let view = reader.segment_view(k)?;
        let seg_end = bases.get(k + 1).copied().unwrap_or(reader.len());
        let name = format::segment_file_name(base);
        let idx_name = format::index_file_name(base);
        let sealed = k + 1 < bases.len()
            && view
                .index_header()
                .is_some_and(|h| h.state == IndexState::Sealed);
        if seg_end < n && sealed {
            // Wholly inside the prefix, not its last segment (a sealed segment always has a
            // successor), and never to change again: share it.
            match std::fs::hard_link(&view.path, to.join(&name)) {
                Ok(()) => out.linked_segments += 1,
                Err(_) => {
                    std::fs::copy(&view.path, to.join(&name))
                        .map_err(|e| Error::io("copy", &view.path, e))?;
                    out.copied_segments += 1;
                    out.copied_bytes += view.readable_len();
                }
            }
            // Its index is derived data: a copy (the opening writer checks it against the segment).
            // A cold segment has its index inside.
            if !view.is_cold() {
                std::fs::copy(view.index_path(), to.join(&idx_name))
                    .map_err(|e| Error::io("copy", view.index_path(), e))?;
            }
            continue;
        }
        // The segment the prefix ends in (or an active one): copy up to its last record, which
        // is read anyway, so each record copied is checked too.
        let count = n.min(seg_end) - base;
        check_records(view, count)?;
        let end = match count.checked_sub(1) {
            Some(last) => {
                view.record(last)
                    .map_err(|(offset, fault)| {
                        Error::corrupt(&view.path, offset, Some(base + last), fault.into_kind())
                    })?
                    .next
            }
            None => format::HEADER_SIZE as u64,
        };
        let data = view.data();
        let end_in_file = (end as usize).min(data.len());
        write_file(&to.join(&name), &[&data[..end_in_file]])?;
        if (end_in_file as u64) < end {
            // The last record's padding was not in the file: add it.
            let f = OpenOptions::new()
                .write(true)
                .open(to.join(&name))
                .map_err(|e| Error::io("open", to.join(&name), e))?;
            f.set_len(end)
                .map_err(|e| Error::io("extend", to.join(&name), e))?;
        }
        write_index_prefix(view, &to.join(&idx_name), count, end)?;
        out.copied_segments += 1;
        out.copied_bytes += end;
        if seg_end >= n {
            break;
        }
        // A segment before the last one whose seal has not finished (the writer seals in the
        // background): copied whole, and the prefix goes on in the next segment. (The new log's
        // first writer open finishes its seal.)
    }
    if out.linked_segments + out.copied_segments == 0 && n > 0 {
        return Err(Error::SeqOutOfRange {
            seq: n,
            len: reader.len(),
        });
    }
    File::open(to)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io("sync directory", to, e))?;
    Ok(out)
}

/// Replaces `path` by a private copy when it is shared through hard links (a forked log's
/// sealed segments), before a writer changes it.
pub(crate) fn unshare(path: &Path) -> Result<()> {
    super::io::refuse_symlink(path).map_err(|e| Error::io("open segment", path, e))?;
    let meta = std::fs::metadata(path).map_err(|e| Error::io("stat", path, e))?;
    if meta.nlink() <= 1 {
        return Ok(());
    }
    // Named like a segment being created: a crash leaves a stray file the next open removes.
    let tmp = std::path::PathBuf::from(format!("{}.tmp", path.display()));
    let _ = std::fs::remove_file(&tmp);
    std::fs::copy(path, &tmp).map_err(|e| Error::io("copy", path, e))?;
    File::open(&tmp)
        .and_then(|f| f.sync_all())
        .map_err(|e| Error::io("fdatasync", &tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io("rename", &tmp, e))
}
