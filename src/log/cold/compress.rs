//! Writing cold segments: [`compress_segment`] (its doc comment has the byte layout),
//! [`compress_log`], and the zstd dictionary trained on a segment's records.

use std::path::{Path, PathBuf};

use super::{temp_name, BlockEntry, ColdHeader, BLOCK_ENTRY_SIZE, BLOCK_TARGET, COLD_VERSION};
use crate::log::error::{CorruptionKind, Error, Result};
use crate::log::format::{self, IndexState, HEADER_SIZE};
use crate::log::io::Storage;
use crate::log::segment::{self, SegmentView};

/// The zstd level cold segments are written with. With [`ZSTD_MIN_MATCH`] and the literals
/// stored raw, level 9 decompressed faster than levels 6 and 8 and its segments were smaller
/// (README, "Cold segments"); it compresses at about 60% of level 6's speed (1.74 s against
/// 1.07 s for the current mix's 71 MB), once per segment, in `archive` or the writer's
/// background thread.
const ZSTD_LEVEL: i32 = 9;
/// The shortest match zstd looks for: fewer, longer matches than level 9 picks by itself. On
/// both mixes the segments came out smaller (current mix at level 9: 181.1 → 174.3 bytes per
/// event with coded literals) and decoded about 2% faster.
const ZSTD_MIN_MATCH: u32 = 6;
/// The largest dictionary a cold segment carries (it is trained on the segment's records).
pub const DICT_MAX: usize = 32 << 10;
/// A segment with fewer plain bytes of records than this gets no dictionary (it would cost
/// more than it saves).
const DICT_MIN_PLAIN: u64 = 256 << 10;
/// At most this many bytes of records (spread over the segment) train the dictionary.
const DICT_SAMPLE_MAX: usize = 4 << 20;

/// What [`compress_segment`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Compressed {
    /// The segment file (now cold).
    pub path: PathBuf,
    /// Records in it.
    pub records: u64,
    /// The bytes of its records before (the plain segment up to the end of its records).
    pub plain_bytes: u64,
    /// The bytes of the cold file.
    pub cold_bytes: u64,
    /// Blocks written.
    pub blocks: usize,
}

/// Compresses the segment of `dir` holding `base_seq`, which must be sealed or closed cleanly
/// (its index says so and every record checks), into a cold segment that replaces it: written
/// to `<base>.cold.seg.tmp`, synced, renamed over `<base>.seg`, the directory synced, then the
/// index file (now unused) removed. A crash at any point leaves either the plain segment (and
/// maybe a temporary file, which the next writer open removes) or the cold one (and maybe the
/// old index file, which readers ignore and the next writer open removes). Returns `None` when
/// the segment is cold already.
///
/// The caller makes sure no writer changes the segment (a closed log under the writer's lock,
/// or a sealed segment, which never changes again). Readers that have the plain segment mapped
/// keep reading it (a rename does not change a mapped file).
///
/// # Cold segment layout (version 2; little-endian)
///
/// | offset | size | field |
/// |---:|---:|---|
/// | 0 | 8 | magic `AGLOGCSG` |
/// | 8 | 2 | cold format version, `2` (`1`: no dictionary, bytes 44..48 reserved, still read) |
/// | 10 | 2 | header size, `64` |
/// | 12 | 4 | the plain segment's index state when compressed: `2` closed, `3` sealed |
/// | 16 | 8 | base seq (equals the file name) |
/// | 24 | 8 | record count |
/// | 32 | 8 | end of the records in the plain segment (byte offset) |
/// | 40 | 4 | block count `b` |
/// | 44 | 4 | dictionary length `d` (`0`: none) |
/// | 48 | 8 | byte offset of the block index |
/// | 56 | 4 | CRC-32 of the block index |
/// | 60 | 4 | CRC-32 of bytes 0..60 |
/// | 64 | 64 | the plain segment's header, verbatim (log id, capacity, payload schema, its own CRC) |
/// | 128 | `d` | the zstd dictionary, trained on the segment's records (when `d` > 0) |
/// | 128 + `d` | 4 | its CRC-32 (when `d` > 0) |
/// | 128 or 132 + `d` | … | the blocks: each a zstd frame (with the dictionary), back to back |
/// | index | 32 × `b` | the block index, one entry per block, in seq order |
///
/// A block index entry:
///
/// | offset | size | field |
/// |---:|---:|---|
/// | 0 | 4 | first record's seq − base seq |
/// | 4 | 4 | records in the block |
/// | 8 | 4 | byte offset of its first record in the plain segment |
/// | 12 | 4 | decompressed length (the plain bytes of its records, padding included) |
/// | 16 | 8 | byte offset of the zstd frame in this file |
/// | 24 | 4 | compressed length |
/// | 28 | 4 | CRC-32 of the compressed bytes |
///
/// A block decompresses to the plain segment's bytes `offset..offset + length`: whole records,
/// byte for byte, so each record's own checksum still verifies. The blocks tile the records
/// (each starts where the previous ended, in seqs and in plain offsets).
pub fn compress_segment(
    dir: &Path,
    base_seq: u64,
    storage: &dyn Storage,
) -> Result<Option<Compressed>> {
    let view = SegmentView::open(dir, base_seq)?;
    if view.is_cold() {
        return Ok(None);
    }
    let path = view.path.clone();
    let h = view
        .index_header()
        .filter(|h| matches!(h.state, IndexState::Closed | IndexState::Sealed));
    let Some(h) = h else {
        return Err(Error::NotSealed(path));
    };
    let data = view.data();
    let s = segment::scan(data, HEADER_SIZE as u64, base_seq, &view.check);
    if s.offsets.len() as u64 != h.count || s.end != h.end {
        let (offset, kind) = match s.stop {
            Some((at, fault)) if (s.offsets.len() as u64) < h.count => (at, fault.into_kind()),
            _ => (
                s.end,
                CorruptionKind::Truncated(format!(
                    "the index says {} record(s) ending at byte offset {}, the segment holds {} \
                     ending at {}",
                    h.count,
                    h.end,
                    s.offsets.len(),
                    s.end
                )),
            ),
        };
        return Err(Error::corrupt(
            &path,
            offset,
            Some(base_seq + s.offsets.len() as u64),
            kind,
        ));
    }
    let offsets = &s.offsets;
    let dict = train_dictionary(data, offsets, h.end);
    // Blocks of whole records, filled up to BLOCK_TARGET bytes.
    let mut out = Vec::with_capacity((h.end / 4) as usize);
    out.extend_from_slice(&[0u8; HEADER_SIZE]);
    out.extend_from_slice(&data[..HEADER_SIZE]);
    if let Some(d) = &dict {
        out.extend_from_slice(d);
        out.extend_from_slice(&crc32fast::hash(d).to_le_bytes());
    }
    let mut compressor =
        block_compressor(dict.as_deref()).map_err(|e| Error::io("compress", &path, e))?;
    let mut entries = Vec::new();
    let mut i = 0usize;
    while i < offsets.len() {
        let start = offsets[i] as usize;
        let mut j = i + 1;
        while j < offsets.len() && (offsets[j] as usize - start) < BLOCK_TARGET {
            j += 1;
        }
        let end = offsets.get(j).map_or(h.end as usize, |&o| o as usize);
        let plain = &data[start..end];
        let z = compressor
            .compress(plain)
            .map_err(|e| Error::io("compress", &path, e))?;
        entries.push(BlockEntry {
            first: i as u32,
            count: (j - i) as u32,
            offset: start as u32,
            len: plain.len() as u32,
            zoffset: out.len() as u64,
            zlen: z.len() as u32,
            crc: crc32fast::hash(&z),
        });
        out.extend_from_slice(&z);
        i = j;
    }
    let index_offset = out.len() as u64;
    let mut index = Vec::with_capacity(entries.len() * BLOCK_ENTRY_SIZE);
    for e in &entries {
        e.encode(&mut index);
    }
    out.extend_from_slice(&index);
    let head = ColdHeader {
        version: COLD_VERSION,
        state: h.state,
        base_seq,
        count: h.count,
        end: h.end,
        blocks: entries.len() as u32,
        dict_len: dict.as_ref().map_or(0, |d| d.len() as u32),
        index_offset,
        index_crc: crc32fast::hash(&index),
    };
    out[..HEADER_SIZE].copy_from_slice(&head.encode());
    drop(view);

    let tmp = dir.join(temp_name(base_seq));
    let io = |what: &'static str, p: &Path| {
        let p = p.to_path_buf();
        move |e| Error::io(what, p, e)
    };
    let mut f = storage
        .create(&tmp, out.len() as u64)
        .map_err(io("create", &tmp))?;
    f.reserve(0, out.len() as u64)
        .and_then(|()| f.write_at(0, &out))
        .map_err(io("write", &tmp))?;
    f.syncer().sync_data().map_err(io("fdatasync", &tmp))?;
    drop(f);
    storage.rename(&tmp, &path).map_err(io("rename", &tmp))?;
    storage.sync_dir(dir).map_err(io("sync directory", dir))?;
    let idx = dir.join(format::index_file_name(base_seq));
    match std::fs::remove_file(&idx) {
        Ok(()) => storage.sync_dir(dir).map_err(io("sync directory", dir))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io("remove", &idx, e)),
    }
    Ok(Some(Compressed {
        path,
        records: h.count,
        plain_bytes: h.end,
        cold_bytes: out.len() as u64,
        blocks: entries.len(),
    }))
}

/// The compressor of a cold segment's blocks (with the segment's dictionary, when it has one):
/// level [`ZSTD_LEVEL`], matches of at least [`ZSTD_MIN_MATCH`] bytes, and the literals (the
/// bytes no match covers) stored raw rather than Huffman-coded: decoding them is then a copy,
/// which took about a tenth off the decompression of the current mix for 3% more bytes than
/// coded literals with the same level and minimum match. Any zstd decoder reads these frames:
/// the settings are the writer's choice, not part of the format (files written with other
/// settings read the same).
fn block_compressor(dict: Option<&[u8]>) -> std::io::Result<zstd::bulk::Compressor<'static>> {
    use zstd::zstd_safe::{CParameter, ParamSwitch};
    let mut c = match dict {
        Some(d) => zstd::bulk::Compressor::with_dictionary(ZSTD_LEVEL, d)?,
        None => zstd::bulk::Compressor::new(ZSTD_LEVEL)?,
    };
    c.set_parameter(CParameter::MinMatch(ZSTD_MIN_MATCH))?;
    c.set_parameter(CParameter::LiteralCompressionMode(ParamSwitch::Disable))?;
    Ok(c)
}

/// A zstd dictionary trained on the records of a segment (`data`, records at `offsets`, ending
/// at `end`), or `None` when the segment is too small for one to pay or training fails (the
/// blocks are then compressed without one). At most [`DICT_SAMPLE_MAX`] bytes of records,
/// taken evenly across the segment, are the samples, each record one sample.
fn train_dictionary(data: &[u8], offsets: &[u32], end: u64) -> Option<Vec<u8>> {
    let first = u64::from(*offsets.first()?);
    let plain = end.checked_sub(first)?;
    if plain < DICT_MIN_PLAIN {
        return None;
    }
    // Every `step`th record, so the samples stay under the limit.
    let step = (plain as usize).div_ceil(DICT_SAMPLE_MAX).max(1);
    let mut samples = Vec::with_capacity(DICT_SAMPLE_MAX.min(plain as usize));
    let mut sizes = Vec::new();
    for (k, &o) in offsets.iter().enumerate().step_by(step) {
        let to = offsets.get(k + 1).map_or(end, |&n| u64::from(n)) as usize;
        let rec = data.get(o as usize..to)?;
        // A record far larger than a block would crowd out the others.
        let rec = &rec[..rec.len().min(BLOCK_TARGET)];
        if samples.len() + rec.len() > DICT_SAMPLE_MAX {
            break;
        }
        samples.extend_from_slice(rec);
        sizes.push(rec.len());
    }
    let max = DICT_MAX.min((plain / 64) as usize);
    zstd::dict::from_continuous(&samples, &sizes, max)
        .ok()
        .filter(|d| !d.is_empty())
}

/// Compresses every segment of the closed log in `dir` that is not cold yet, under the
/// writer's lock (fails with [`Error::Locked`] while a writer has the log open). Every segment
/// of a closed log is sealed or closed cleanly; one that is not (a log whose writer was killed:
/// open it for writing once, which recovers it) is refused with [`Error::NotSealed`], and the
/// segments before it stay compressed. Returns what was compressed, in seq order.
pub fn compress_log(dir: impl AsRef<Path>, storage: &dyn Storage) -> Result<Vec<Compressed>> {
    let dir = dir.as_ref();
    let _lock = crate::log::lock::lock_dir(dir)?;
    compress_locked(dir, storage, false)
}

/// [`compress_log`] for a caller that holds the log's lock already. With `skip_unsealed`, a
/// segment that is not sealed or closed cleanly stays plain instead of failing the call.
pub(crate) fn compress_locked(
    dir: &Path,
    storage: &dyn Storage,
    skip_unsealed: bool,
) -> Result<Vec<Compressed>> {
    let (bases, _) = crate::log::recovery::list_dir(dir)?;
    let mut out = Vec::new();
    for base in bases {
        match compress_segment(dir, base, storage) {
            Ok(Some(c)) => out.push(c),
            Ok(None) => {}
            Err(Error::NotSealed(_)) if skip_unsealed => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}
