//! Finding the valid records after damage: what a salvage cut, kept in `damaged/`, still holds.
//!
//! Records are self-delimiting and checksummed with a seed of the log id and the segment's base
//! seq, so a valid record can be recognised at any 16-byte aligned offset without trusting what
//! comes before it. A salvage ([`RecoveryMode::Salvage`](super::RecoveryMode)) keeps a copy of
//! the damaged segment and moves the later segments into `damaged/`; [`SalvagedRecords::find`]
//! tries every aligned offset of such a file after the damage and returns each valid record
//! (checksum right, seq past the damage and above the previous one found) as a (seq, payload)
//! pair. The payloads stay opaque: the session layer decodes them.

use std::fs::File;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use super::error::{Error, Result};
use super::format::{self, LogId, RecordHeader, SegmentHeader, HEADER_SIZE, RECORD_HEADER_SIZE};
use super::mmap;
use super::open::Cut;
use super::segment::{self, RecordCheck};

/// A file in `damaged/` that may hold valid records after the damage, and where to look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SalvageSource {
    /// The file in `damaged/` (a copy of the damaged segment, or a later segment moved there).
    pub file: PathBuf,
    /// The segment's file name in the log (`00000000000000000000.seg`): its base seq.
    pub segment: String,
    /// The byte offset where the search starts (the damage, or the first record).
    pub from_offset: u64,
    /// Records with a lower seq are not after the damage and are not returned.
    pub min_seq: u64,
}

impl Cut {
    /// The files this cut left in `damaged/` that may hold valid records after the damage: the
    /// copy of the damaged segment (searched from the damage on) and the later segments moved
    /// there (searched whole).
    pub fn salvage_sources(&self) -> Vec<SalvageSource> {
        let name_of = |p: &Path| {
            p.file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default()
                .to_string()
        };
        let damaged_name = name_of(&self.at.path);
        let mut out: Vec<SalvageSource> = self
            .kept_copies
            .iter()
            .map(|copy| SalvageSource {
                file: copy.clone(),
                segment: damaged_name.clone(),
                from_offset: self.at.offset.max(HEADER_SIZE as u64),
                min_seq: self.first_lost_seq,
            })
            .collect();
        for (from, to) in self.dropped_segments.iter().zip(&self.moved_to) {
            let damaged_here = *from == self.at.path;
            out.push(SalvageSource {
                file: to.clone(),
                segment: name_of(from),
                from_offset: if damaged_here {
                    self.at.offset.max(HEADER_SIZE as u64)
                } else {
                    HEADER_SIZE as u64
                },
                min_seq: self.first_lost_seq,
            });
        }
        out
    }
}

/// The name a pending-salvage list starts with, in `damaged/`: `PENDING-SALVAGE.<stamp>`.
const PENDING_PREFIX: &str = "PENDING-SALVAGE.";
/// The first line of a pending-salvage list.
const PENDING_MAGIC: &str = "agentlog pending salvage 1";

/// Writes (synced, by rename) the list of `sources` a cut is about to leave in `damaged/`,
/// before any file moves. The list stays until the events after the damage are written out
/// ([`take_pending`] and [`PendingSalvage::done`]): a crash in between leaves the work to the
/// next open.
///
/// The file is text: the line `agentlog pending salvage 1`, then one line per source:
/// `<from_offset> <min_seq> <segment file name> <file name in damaged/>`.
pub(super) fn write_pending(damaged: &Path, stamp: i64, sources: &[SalvageSource]) -> Result<()> {
    if sources.is_empty() {
        return Ok(());
    }
    let mut text = format!("{PENDING_MAGIC}\n");
    for s in sources {
        let file = s
            .file
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        text.push_str(&format!(
            "{} {} {} {file}\n",
            s.from_offset, s.min_seq, s.segment
        ));
    }
    let path = damaged.join(format!("{PENDING_PREFIX}{stamp}"));
    let tmp = damaged.join(format!("{PENDING_PREFIX}{stamp}.tmp"));
    super::open::write_synced(&tmp, text.as_bytes())?;
    std::fs::rename(&tmp, &path).map_err(|e| Error::io("rename", &tmp, e))?;
    std::fs::File::open(damaged)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io("sync directory", damaged, e))
}

/// A cut whose events after the damage are still to be written: the sources its list names that
/// are still in `damaged/`.
#[derive(Debug)]
pub(crate) struct PendingSalvage {
    list: PathBuf,
    /// The files to search, as the cut left them.
    pub sources: Vec<SalvageSource>,
}

impl PendingSalvage {
    /// Removes the list: its events are written.
    pub fn done(self) -> Result<()> {
        std::fs::remove_file(&self.list).map_err(|e| Error::io("remove", &self.list, e))?;
        if let Some(dir) = self.list.parent() {
            std::fs::File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| Error::io("sync directory", dir, e))?;
        }
        Ok(())
    }
}

/// The cuts of the log in `dir` whose events after the damage are not written yet, oldest
/// first: the one the open just made, and any whose writing a crash stopped. Lines that do
/// not parse, and files no longer there, are passed over.
pub(crate) fn take_pending(dir: &Path) -> Result<Vec<PendingSalvage>> {
    let damaged = dir.join(super::DAMAGED_DIR);
    let entries = match std::fs::read_dir(&damaged) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("list", &damaged, e)),
    };
    let mut lists = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("list", &damaged, e))?;
        let name = entry.file_name();
        let Some(stamp) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PENDING_PREFIX))
            .and_then(|n| n.parse::<i64>().ok())
        else {
            continue;
        };
        lists.push((stamp, entry.path()));
    }
    lists.sort();
    let mut out = Vec::with_capacity(lists.len());
    for (_, list) in lists {
        let text = std::fs::read_to_string(&list).map_err(|e| Error::io("read", &list, e))?;
        let mut lines = text.lines();
        let sources = if lines.next() == Some(PENDING_MAGIC) {
            lines
                .filter_map(|line| parse_pending_line(&damaged, line))
                .filter(|s| s.file.is_file())
                .collect()
        } else {
            Vec::new()
        };
        out.push(PendingSalvage { list, sources });
    }
    Ok(out)
}

fn parse_pending_line(damaged: &Path, line: &str) -> Option<SalvageSource> {
    let mut parts = line.splitn(4, ' ');
    let from_offset = parts.next()?.parse().ok()?;
    let min_seq = parts.next()?.parse().ok()?;
    let segment = parts.next()?.to_string();
    let file = parts.next()?;
    // A name in `damaged/`, never a path that leads out of it.
    if file.is_empty() || file.contains('/') || file == ".." {
        return None;
    }
    Some(SalvageSource {
        file: damaged.join(file),
        segment,
        from_offset,
        min_seq,
    })
}

/// The bytes a salvage search reads: the file, mapped, or the plain segment a compressed one
/// holds, rebuilt.
#[derive(Debug)]
enum Bytes {
    Map(Mmap),
    Rebuilt(rkyv::util::AlignedVec<16>),
}

impl std::ops::Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Map(m) => m,
            Bytes::Rebuilt(v) => v,
        }
    }
}

/// The valid records found in one damaged file, read in place from a read-only map (a
/// compressed segment: from the plain segment it holds, rebuilt in memory).
#[derive(Debug)]
pub struct SalvagedRecords {
    map: Option<Bytes>,
    /// (seq, payload offset, payload length), in file order.
    found: Vec<(u64, usize, usize)>,
}

impl SalvagedRecords {
    /// Looks at every 16-byte aligned offset of `source.file` from `source.from_offset` on for a
    /// valid record of the log `log_id`: its checksum right (the seed of `log_id` and the
    /// segment's base seq: a record of another log never passes), its seq at least
    /// `source.min_seq` and above the last one found. After a valid record the search goes on
    /// just past it. The base seq is the segment header's when that header is sound and names
    /// `log_id`, else the one in the segment's file name.
    pub fn find(source: &SalvageSource, log_id: LogId) -> Result<SalvagedRecords> {
        let path = &source.file;
        let file = File::open(path).map_err(|e| Error::io("open damaged segment", path, e))?;
        let len = file
            .metadata()
            .map_err(|e| Error::io("stat damaged segment", path, e))?
            .len();
        if len == 0 {
            return Ok(SalvagedRecords {
                map: None,
                found: Vec::new(),
            });
        }
        let mut map = Bytes::Map(
            mmap::map_read(&file, len).map_err(|e| Error::io("map damaged segment", path, e))?,
        );
        if super::cold::is_cold(&map) {
            // A compressed segment (moved whole after the damage): its records are in the
            // blocks that decompress. One whose header or block index is damaged gives none.
            let rebuilt = format::parse_segment_file_name(&source.segment)
                .and_then(|base| super::cold::rebuild_plain(path, base).ok());
            match rebuilt {
                Some((plain, _, _)) => map = Bytes::Rebuilt(plain),
                // Its header or block index damaged (a file cut short loses its index): the
                // blocks found by their frames' magic number, their records searched as they
                // come (their offsets in the plain segment are not known).
                None => match super::cold::blocks_without_index(&map) {
                    Some(plain) => return Ok(Self::in_blocks(source, log_id, plain)),
                    None => {
                        return Ok(SalvagedRecords {
                            map: Some(map),
                            found: Vec::new(),
                        })
                    }
                },
            }
        }
        let data: &[u8] = &map;
        let header = SegmentHeader::decode(&data[..data.len().min(HEADER_SIZE)])
            .ok()
            .filter(|h| h.log_id == log_id);
        let base = match (header, format::parse_segment_file_name(&source.segment)) {
            (Some(h), _) => h.base_seq,
            (None, Some(b)) => b,
            (None, None) => {
                return Ok(SalvagedRecords {
                    map: Some(map),
                    found: Vec::new(),
                })
            }
        };
        let max_payload =
            (data.len() as u64).saturating_sub((HEADER_SIZE + RECORD_HEADER_SIZE) as u64);
        Ok(Self::searched(
            map,
            base,
            log_id,
            source.from_offset,
            source.min_seq,
            max_payload,
        ))
    }

    /// The valid records of `map` from `from` on (at aligned offsets, seqs at least
    /// `min_seq`), checked as records of the segment of `base` in log `log_id`.
    fn searched(
        map: Bytes,
        base: u64,
        log_id: LogId,
        from: u64,
        min_seq: u64,
        max_payload: u64,
    ) -> SalvagedRecords {
        let check = RecordCheck {
            base_seq: base,
            seed: format::segment_seed(&log_id, base),
            max_payload,
        };
        let found = scan_aligned(&map, from, min_seq, &check);
        SalvagedRecords {
            map: Some(map),
            found,
        }
    }

    /// The valid records in the decompressed blocks of a cold segment whose block index is
    /// lost ([`super::cold::blocks_without_index`]): the base seq is the file name's, the
    /// search starts at the blocks' first byte.
    fn in_blocks(
        source: &SalvageSource,
        log_id: LogId,
        plain: rkyv::util::AlignedVec<16>,
    ) -> SalvagedRecords {
        let Some(base) = format::parse_segment_file_name(&source.segment) else {
            return SalvagedRecords {
                map: None,
                found: Vec::new(),
            };
        };
        let max_payload = plain.len() as u64;
        Self::searched(
            Bytes::Rebuilt(plain),
            base,
            log_id,
            0,
            source.min_seq,
            max_payload,
        )
    }

    /// How many valid records were found.
    pub fn len(&self) -> usize {
        self.found.len()
    }

    /// True when no valid record was found.
    pub fn is_empty(&self) -> bool {
        self.found.is_empty()
    }

    /// The records found, as (seq, payload), in seq order. Each payload starts at a 16-byte
    /// aligned address.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &[u8])> + '_ {
        let data: &[u8] = self.map.as_deref().unwrap_or_default();
        self.found
            .iter()
            .filter_map(move |&(seq, at, len)| Some((seq, data.get(at..at.checked_add(len)?)?)))
    }
}

/// Every valid record at an aligned offset from `from` on, with a seq of at least `min_seq` and
/// increasing: (seq, payload offset, payload length).
fn scan_aligned(
    data: &[u8],
    from: u64,
    min_seq: u64,
    check: &RecordCheck,
) -> Vec<(u64, usize, usize)> {
    let mut out = Vec::new();
    let mut at = format::align_up(from);
    let mut next_min = min_seq;
    while at.saturating_add(RECORD_HEADER_SIZE as u64) <= data.len() as u64 {
        let h = RecordHeader::read(&data[at as usize..]);
        if h.flags_ok() {
            let seq = check.base_seq.saturating_add(u64::from(h.seq_delta));
            if seq >= next_min {
                if let Ok(found) = segment::check_record(data, at, seq, check) {
                    let payload_at = at as usize + RECORD_HEADER_SIZE;
                    out.push((seq, payload_at, found.payload.len()));
                    next_min = seq.saturating_add(1);
                    at = found.next;
                    continue;
                }
            }
        }
        at += format::RECORD_ALIGN as u64;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A segment's bytes: header, then records of `payloads` from seq `base`.
    fn segment(log_id: LogId, base: u64, payloads: &[&[u8]]) -> Vec<u8> {
        let header = SegmentHeader {
            base_seq: base,
            log_id,
            capacity: 1 << 16,
            payload_schema: 0,
            created_ms: 0,
        };
        let seed = format::segment_seed(&log_id, base);
        let mut out = header.encode().to_vec();
        for (i, p) in payloads.iter().enumerate() {
            out.extend_from_slice(&RecordHeader::encode(seed, i as u32, p));
            out.extend_from_slice(p);
            out.resize(format::align_up(out.len() as u64) as usize, 0);
        }
        out.resize(out.len() + 256, 0);
        out
    }

    fn check(log_id: LogId, base: u64) -> RecordCheck {
        RecordCheck {
            base_seq: base,
            seed: format::segment_seed(&log_id, base),
            max_payload: 1 << 16,
        }
    }

    /// A damaged record in the middle (its length word flipped, so it no longer says where the
    /// next record starts) costs only itself: every valid record after it is found.
    #[test]
    fn finds_every_valid_record_after_a_damaged_one() {
        let id = LogId([7; 16]);
        let payloads: Vec<Vec<u8>> = (0..20).map(|i| vec![i as u8 + 1; 5 + i * 3]).collect();
        let refs: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
        let mut data = segment(id, 100, &refs);
        // The record of seq 105: find its offset by walking.
        let c = check(id, 100);
        let mut at = HEADER_SIZE as u64;
        for seq in 100..105 {
            at = segment::check_record(&data, at, seq, &c)
                .map(|f| f.next)
                .unwrap();
        }
        data[at as usize] ^= 0x40; // its length
        let found = scan_aligned(&data, at, 105, &c);
        let seqs: Vec<u64> = found.iter().map(|f| f.0).collect();
        assert_eq!(seqs, (106..120).collect::<Vec<_>>());
        for &(seq, off, len) in &found {
            assert_eq!(&data[off..off + len], refs[(seq - 100) as usize]);
        }
    }

    /// Records of another log (another seed) are never taken for this log's, and records below
    /// the first lost seq are not returned.
    #[test]
    fn ignores_other_logs_and_records_before_the_damage() {
        let id = LogId([7; 16]);
        let data = segment(id, 0, &[b"a", b"bb", b"ccc"]);
        assert!(scan_aligned(&data, HEADER_SIZE as u64, 0, &check(LogId([8; 16]), 0)).is_empty());
        let found = scan_aligned(&data, HEADER_SIZE as u64, 1, &check(id, 0));
        assert_eq!(found.iter().map(|f| f.0).collect::<Vec<_>>(), vec![1, 2]);
    }
}
