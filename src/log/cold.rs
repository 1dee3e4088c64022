//! Cold segments: a sealed (or cleanly closed) segment compressed with zstd in independently
//! decodable blocks, with a block index, so that reading one record decompresses one block.
//!
//! A cold segment replaces the plain segment file of the same name (`<base>.seg`) and its index
//! file; readers tell them apart by the magic. Each block holds whole records, and its
//! decompressed bytes are exactly the bytes of those records in the plain segment (headers,
//! payloads, padding), at the same offsets: a record's checksum still verifies, and the view of
//! a cold segment ([`ColdSegment`]) rebuilds the plain segment's bytes in memory, one block at
//! a time, as reads need them.
//!
//! See [`compress_segment`] for the byte layout, which `docs/format.md` repeats.

use std::cell::RefCell;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;

use memmap2::Mmap;

use super::error::{CorruptionKind, Error, Result};
use super::format::{
    self, IndexHeader, IndexState, RecordHeader, SegmentHeader, HEADER_SIZE, RECORD_HEADER_SIZE,
};
use super::io::Storage;
use super::mmap;
use super::segment::{self, SegmentView};

/// The magic of a cold (compressed) segment file.
pub const COLD_MAGIC: [u8; 8] = *b"AGLOGCSG";
/// The version of the cold segment layout written: 2 (a zstd dictionary trained on the
/// segment's records, blocks compressed with it). Version 1 (no dictionary) is still read.
pub const COLD_VERSION: u16 = 2;
/// The oldest cold segment version read.
const COLD_VERSION_MIN: u16 = 1;
/// The bytes of one block index entry.
const BLOCK_ENTRY_SIZE: usize = 32;
/// Where the dictionary (version 2), or else the compressed blocks, start: the cold header,
/// then the plain segment's header.
const DICT_START: u64 = 2 * HEADER_SIZE as u64;
/// The decompressed size a block is filled up to (a record larger than this is a block of its
/// own): small enough that decompressing one block for a `get` takes some tens of
/// microseconds; the segment's dictionary gives zstd the repetition between events that a
/// small block alone lacks.
pub const BLOCK_TARGET: usize = 16 << 10;
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

/// True when `head` (the first bytes of a segment file) is a cold segment's.
pub(crate) fn is_cold(head: &[u8]) -> bool {
    head.get(..8) == Some(&COLD_MAGIC[..])
}

/// The temporary file a segment is compressed into, before it is renamed over the segment. Its
/// name ends in `.seg.tmp`: a crash leaves a stray that the next writer open removes.
pub(crate) fn temp_name(base_seq: u64) -> String {
    format!("{:020}.cold.seg.tmp", base_seq)
}

/// The decoded header of a cold segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ColdHeader {
    /// The layout version (1 or 2).
    pub version: u16,
    /// The state of the plain segment's index when it was compressed (closed or sealed).
    pub state: IndexState,
    pub base_seq: u64,
    pub count: u64,
    /// Where the records end in the plain segment.
    pub end: u64,
    pub blocks: u32,
    /// The bytes of the dictionary (version 2; 0: none, the blocks are plain zstd frames).
    pub dict_len: u32,
    pub index_offset: u64,
    pub index_crc: u32,
}

impl ColdHeader {
    fn encode(&self) -> [u8; HEADER_SIZE] {
        let mut b = [0u8; HEADER_SIZE];
        b[0..8].copy_from_slice(&COLD_MAGIC);
        b[8..10].copy_from_slice(&self.version.to_le_bytes());
        b[10..12].copy_from_slice(&(HEADER_SIZE as u16).to_le_bytes());
        b[12..16].copy_from_slice(&self.state.code().to_le_bytes());
        b[16..24].copy_from_slice(&self.base_seq.to_le_bytes());
        b[24..32].copy_from_slice(&self.count.to_le_bytes());
        b[32..40].copy_from_slice(&self.end.to_le_bytes());
        b[40..44].copy_from_slice(&self.blocks.to_le_bytes());
        b[44..48].copy_from_slice(&self.dict_len.to_le_bytes());
        b[48..56].copy_from_slice(&self.index_offset.to_le_bytes());
        b[56..60].copy_from_slice(&self.index_crc.to_le_bytes());
        let crc = crc32fast::hash(&b[..60]);
        b[60..64].copy_from_slice(&crc.to_le_bytes());
        b
    }

    fn decode(b: &[u8]) -> std::result::Result<ColdHeader, String> {
        if b.len() < HEADER_SIZE {
            return Err(format!(
                "the cold header needs 64 bytes, the file holds {}",
                b.len()
            ));
        }
        if !is_cold(b) {
            return Err("not a cold segment (magic)".into());
        }
        let stored = format::u32_at(b, 60);
        let got = crc32fast::hash(&b[..60]);
        if stored != got {
            return Err(format!(
                "cold header checksum mismatch (stored {stored:#010x}, computed {got:#010x})"
            ));
        }
        let version = format::u16_at(b, 8);
        if !(COLD_VERSION_MIN..=COLD_VERSION).contains(&version) {
            return Err(format!(
                "cold segment version {version} is not supported (this build reads versions \
                 {COLD_VERSION_MIN} to {COLD_VERSION})"
            ));
        }
        let size = format::u16_at(b, 10);
        if usize::from(size) != HEADER_SIZE {
            return Err(format!("cold header size {size}"));
        }
        let code = format::u32_at(b, 12);
        let state = match IndexState::from_code(code) {
            Some(s @ (IndexState::Closed | IndexState::Sealed)) => s,
            _ => return Err(format!("cold segment state {code}")),
        };
        let dict_len = format::u32_at(b, 44);
        if version == 1 && dict_len != 0 {
            return Err(format!(
                "a version 1 cold segment with {dict_len} in its reserved bytes 44..48"
            ));
        }
        let h = ColdHeader {
            version,
            state,
            base_seq: format::u64_at(b, 16),
            count: format::u64_at(b, 24),
            end: format::u64_at(b, 32),
            blocks: format::u32_at(b, 40),
            dict_len,
            index_offset: format::u64_at(b, 48),
            index_crc: format::u32_at(b, 56),
        };
        if h.count > u64::from(u32::MAX)
            || h.end > u64::from(u32::MAX)
            || h.end < HEADER_SIZE as u64
        {
            return Err(format!("count {} and end {}", h.count, h.end));
        }
        Ok(h)
    }

    /// Where the compressed blocks start: after the plain header, or after the dictionary and
    /// its CRC-32.
    fn blocks_start(&self) -> u64 {
        match self.dict_len {
            0 => DICT_START,
            d => DICT_START + u64::from(d) + 4,
        }
    }
}

/// One entry of the block index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BlockEntry {
    /// The first record's seq − base seq.
    pub first: u32,
    /// Records in the block.
    pub count: u32,
    /// Where the block's records start in the plain segment.
    pub offset: u32,
    /// Their bytes (decompressed).
    pub len: u32,
    /// Where the compressed block starts in the cold file.
    pub zoffset: u64,
    /// Its compressed bytes.
    pub zlen: u32,
    /// CRC-32 of the compressed bytes.
    pub crc: u32,
}

impl BlockEntry {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.first.to_le_bytes());
        out.extend_from_slice(&self.count.to_le_bytes());
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.len.to_le_bytes());
        out.extend_from_slice(&self.zoffset.to_le_bytes());
        out.extend_from_slice(&self.zlen.to_le_bytes());
        out.extend_from_slice(&self.crc.to_le_bytes());
    }

    fn decode(b: &[u8]) -> BlockEntry {
        BlockEntry {
            first: format::u32_at(b, 0),
            count: format::u32_at(b, 4),
            offset: format::u32_at(b, 8),
            len: format::u32_at(b, 12),
            zoffset: format::u64_at(b, 16),
            zlen: format::u32_at(b, 24),
            crc: format::u32_at(b, 28),
        }
    }
}

/// A damaged block: where it is in the cold file, the first seq it holds, what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BlockFault {
    pub file_offset: u64,
    pub first_seq: u64,
    pub what: String,
}

impl BlockFault {
    pub(crate) fn into_error(self, path: &Path) -> Error {
        Error::corrupt(
            path,
            self.file_offset,
            Some(self.first_seq),
            CorruptionKind::CompressedBlock(self.what),
        )
    }
}

/// What decompressing a block gave: the offsets of its records, or what is wrong with it.
type Decoded = std::result::Result<Box<[u32]>, BlockFault>;

use zstd::zstd_safe::{DCtx, DDict};

thread_local! {
    /// One zstd decompression context per thread, reused for every block of every cold
    /// segment (making one costs more than decompressing a small block).
    static DCTX: RefCell<Option<DCtx<'static>>> = const { RefCell::new(None) };
}

/// Decompresses the zstd frame `z` into `dst` (with the segment's prepared dictionary, when it
/// has one), which it must fill exactly; returns the bytes written.
fn decompress_into(
    z: &[u8],
    dst: &mut [u8],
    dict: Option<&DDict<'static>>,
) -> std::result::Result<usize, String> {
    DCTX.with(|cell| {
        // (A fill never decompresses another block: the context is never borrowed twice.)
        let mut slot = cell.try_borrow_mut().map_err(|e| e.to_string())?;
        let d = match &mut *slot {
            Some(d) => d,
            none => {
                none.insert(DCtx::try_create().ok_or("no memory for a zstd decompression context")?)
            }
        };
        let got = match dict {
            Some(dict) => d.decompress_using_ddict(dst, z, dict),
            None => d.decompress(dst, z),
        };
        got.map_err(|code| zstd::zstd_safe::get_error_name(code).to_string())
    })
}

/// A cold segment's dictionary: where it is in the file, and prepared for decompression the
/// first time a block needs it.
struct Dict {
    /// Its bytes in the cold file.
    at: usize,
    len: usize,
    prepared: OnceLock<Option<DDict<'static>>>,
}

impl std::fmt::Debug for Dict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dict")
            .field("at", &self.at)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

/// The read side of a cold segment: its header and block index, and the plain segment's bytes
/// rebuilt in anonymous memory, block by block, the first time a read needs one (decompressed
/// straight to where the block's records belong). A decompressed block stays for the life of
/// the view, so the records borrowed from it stay valid as long as those of a mapped plain
/// segment.
#[derive(Debug)]
pub(crate) struct ColdSegment {
    pub head: ColdHeader,
    blocks: Vec<BlockEntry>,
    /// The dictionary (version 2, when the writer trained one).
    dict: Option<Dict>,
    /// The cold file, mapped.
    file_map: Mmap,
    /// The rebuilt plain segment (its header, then each block once decompressed), and per
    /// block what decompressing it gave.
    plain: mmap::FillMap<Decoded>,
}

impl ColdSegment {
    /// Opens the cold segment `file` (at `path`, named for `base_seq`): checks its header, the
    /// plain segment header it carries and its block index. Returns the plain header too.
    pub(crate) fn open(
        file: &File,
        path: &Path,
        base_seq: u64,
    ) -> Result<(ColdSegment, SegmentHeader)> {
        let len = file
            .metadata()
            .map_err(|e| Error::io("stat segment", path, e))?
            .len();
        let bad = |offset: u64, what: String| {
            Error::corrupt(
                path,
                offset,
                Some(base_seq),
                CorruptionKind::CompressedBlock(what),
            )
        };
        if len < DICT_START {
            return Err(bad(0, format!("a cold segment of {len} bytes")));
        }
        let file_map = mmap::map_read(file, len).map_err(|e| Error::io("map segment", path, e))?;
        let head = ColdHeader::decode(&file_map).map_err(|w| bad(0, w))?;
        if head.base_seq != base_seq {
            return Err(bad(
                16,
                format!(
                    "base seq {} does not match the file name (base {base_seq})",
                    head.base_seq
                ),
            ));
        }
        let plain_header = SegmentHeader::decode(&file_map[HEADER_SIZE..2 * HEADER_SIZE])
            .map_err(|h| segment::header_error(path, h))?;
        if plain_header.base_seq != base_seq {
            return Err(bad(
                HEADER_SIZE as u64 + 16,
                "the plain header's base seq differs".into(),
            ));
        }
        let blocks_start = head.blocks_start();
        let dict = match head.dict_len {
            0 => None,
            d => {
                let (at, d) = (DICT_START as usize, d as usize);
                let bytes = file_map
                    .get(at..at + d + 4)
                    .filter(|_| blocks_start <= head.index_offset)
                    .ok_or_else(|| {
                        bad(
                            44,
                            format!(
                                "the dictionary ({d} bytes at byte offset {at}) is not in the \
                                 file ({len} bytes) before the block index"
                            ),
                        )
                    })?;
                let stored = format::u32_at(bytes, d);
                let got = crc32fast::hash(&bytes[..d]);
                if stored != got {
                    return Err(bad(
                        DICT_START,
                        format!(
                            "dictionary checksum mismatch (stored {stored:#010x}, computed \
                             {got:#010x})"
                        ),
                    ));
                }
                Some(Dict {
                    at,
                    len: d,
                    prepared: OnceLock::new(),
                })
            }
        };
        let index_len = u64::from(head.blocks) * BLOCK_ENTRY_SIZE as u64;
        let index = head
            .index_offset
            .checked_add(index_len)
            .filter(|&e| e <= len && head.index_offset >= blocks_start)
            .and_then(|e| file_map.get(head.index_offset as usize..e as usize))
            .ok_or_else(|| {
                bad(
                    48,
                    format!(
                        "the block index ({} entries at byte offset {}) is not in the file ({len} bytes)",
                        head.blocks, head.index_offset
                    ),
                )
            })?;
        let got = crc32fast::hash(index);
        if got != head.index_crc {
            return Err(bad(
                head.index_offset,
                format!(
                    "block index checksum mismatch (stored {:#010x}, computed {got:#010x})",
                    head.index_crc
                ),
            ));
        }
        let blocks: Vec<BlockEntry> = index
            .chunks_exact(BLOCK_ENTRY_SIZE)
            .map(BlockEntry::decode)
            .collect();
        // The blocks must tile the records: seqs and plain offsets contiguous, from the first
        // record to the end.
        let (mut seq, mut offset) = (0u64, HEADER_SIZE as u64);
        for (k, b) in blocks.iter().enumerate() {
            let at = head.index_offset + (k * BLOCK_ENTRY_SIZE) as u64;
            if u64::from(b.first) != seq
                || u64::from(b.offset) != offset
                || b.count == 0
                || b.zoffset < blocks_start
                || b.zoffset.saturating_add(u64::from(b.zlen)) > head.index_offset
            {
                return Err(bad(at, format!("block {k} of the index is inconsistent")));
            }
            seq += u64::from(b.count);
            offset += u64::from(b.len);
        }
        if seq != head.count || offset != head.end {
            return Err(bad(
                head.index_offset,
                format!(
                    "the blocks hold {seq} record(s) ending at {offset}; the header says {} ending at {}",
                    head.count, head.end
                ),
            ));
        }
        // The plain segment's header, where the plain segment has it, then the blocks (which
        // tile the records: checked above).
        let ranges = blocks
            .iter()
            .map(|b| {
                let start = b.offset as usize;
                (start, start + b.len as usize)
            })
            .collect();
        let plain = mmap::FillMap::new(head.end, &file_map[HEADER_SIZE..2 * HEADER_SIZE], ranges)
            .map_err(|e| Error::io("map the decompression buffer of", path, e))?;
        Ok((
            ColdSegment {
                head,
                blocks,
                dict,
                file_map,
                plain,
            },
            plain_header,
        ))
    }

    /// The plain segment's bytes: its header, and the blocks decompressed so far (the others
    /// hold zeros or bytes of a dropped reader's map: never read before their block is ready).
    pub(crate) fn plain(&self) -> &[u8] {
        self.plain.bytes()
    }

    /// The block holding record `i`.
    fn block_of_record(&self, i: u64) -> Option<usize> {
        let k = self
            .blocks
            .partition_point(|b| u64::from(b.first) <= i)
            .checked_sub(1)?;
        let b = &self.blocks[k];
        (i < u64::from(b.first) + u64::from(b.count)).then_some(k)
    }

    /// The block holding the plain offset `offset`.
    fn block_of_offset(&self, offset: u64) -> Option<usize> {
        let k = self
            .blocks
            .partition_point(|b| u64::from(b.offset) <= offset)
            .checked_sub(1)?;
        let b = &self.blocks[k];
        (offset < u64::from(b.offset) + u64::from(b.len)).then_some(k)
    }

    /// True when block `k` has been decompressed (or found damaged).
    pub(crate) fn is_ready(&self, k: usize) -> bool {
        self.plain.is_filled(k)
    }

    /// Decompresses block `k` (once) and returns its record offsets.
    fn ensure(&self, k: usize) -> std::result::Result<&[u32], BlockFault> {
        match self.plain.get_or_fill(k, |dst| self.decode(k, dst)) {
            Ok(o) => Ok(o),
            Err(f) => Err(f.clone()),
        }
    }

    /// Decompresses block `k` into `dst` (its bytes in the plain segment), checks that it holds
    /// whole records, and returns their offsets. A damaged block leaves `dst` zeroed.
    fn decode(&self, k: usize, dst: &mut [u8]) -> Decoded {
        let out = self.decode_into(k, dst);
        if out.is_err() {
            dst.fill(0);
        }
        out
    }

    fn decode_into(&self, k: usize, out: &mut [u8]) -> Decoded {
        let b = self.blocks[k];
        let fault = |what: String| BlockFault {
            file_offset: b.zoffset,
            first_seq: self.head.base_seq + u64::from(b.first),
            what: format!(
                "compressed block {k} (seqs {}..{}): {what}",
                self.head.base_seq + u64::from(b.first),
                self.head.base_seq + u64::from(b.first) + u64::from(b.count)
            ),
        };
        let z = &self.file_map[b.zoffset as usize..(b.zoffset + u64::from(b.zlen)) as usize];
        let got = crc32fast::hash(z);
        if got != b.crc {
            return Err(fault(format!(
                "checksum mismatch (stored {:#010x}, computed {got:#010x})",
                b.crc
            )));
        }
        let dict = match &self.dict {
            None => None,
            Some(d) => {
                let prepared = d.prepared.get_or_init(|| {
                    self.file_map
                        .get(d.at..d.at + d.len)
                        .and_then(DDict::try_create)
                });
                match prepared {
                    Some(p) => Some(p),
                    None => {
                        return Err(BlockFault {
                            file_offset: d.at as u64,
                            first_seq: self.head.base_seq,
                            what: format!(
                                "the dictionary ({} bytes) cannot be loaded by zstd",
                                d.len
                            ),
                        })
                    }
                }
            }
        };
        let n = decompress_into(z, out, dict).map_err(|e| fault(format!("zstd: {e}")))?;
        if n != b.len as usize {
            return Err(fault(format!(
                "it decompresses to {n} bytes, the index says {}",
                b.len
            )));
        }
        let out = &*out;
        // The records' offsets, from their headers (each record is checked when it is read).
        let mut offsets = Vec::with_capacity(b.count as usize);
        let mut at = 0usize;
        while at + RECORD_HEADER_SIZE <= out.len() && offsets.len() < b.count as usize {
            let h = RecordHeader::read(&out[at..]);
            if !h.flags_ok() {
                break;
            }
            offsets.push(b.offset + at as u32);
            at = at.saturating_add(format::record_size(u64::from(h.len)) as usize);
        }
        if offsets.len() != b.count as usize || at != out.len() {
            return Err(fault(format!(
                "it holds {} record(s) in {at} bytes, the index says {} in {}",
                offsets.len(),
                b.count,
                b.len
            )));
        }
        Ok(offsets.into_boxed_slice())
    }

    /// The plain offset of record `i`, decompressing its block.
    pub(crate) fn offset_of(&self, i: u64) -> std::result::Result<Option<u64>, BlockFault> {
        let Some(k) = self.block_of_record(i) else {
            return Ok(None);
        };
        let offsets = self.ensure(k)?;
        let j = (i - u64::from(self.blocks[k].first)) as usize;
        Ok(offsets.get(j).map(|&o| u64::from(o)))
    }

    /// Makes the bytes at the plain offset `offset` readable (decompresses their block);
    /// returns where that block ends (bytes before it are readable now).
    pub(crate) fn ensure_offset(&self, offset: u64) -> std::result::Result<u64, BlockFault> {
        match self.block_of_offset(offset) {
            Some(k) => {
                self.ensure(k)?;
                let b = &self.blocks[k];
                Ok(u64::from(b.offset) + u64::from(b.len))
            }
            // Past the records: nothing to decompress (a read there finds the end).
            None => Ok(u64::MAX),
        }
    }

    /// The block holding the plain offset `offset`, if any.
    pub(crate) fn block_at(&self, offset: u64) -> Option<usize> {
        self.block_of_offset(offset)
    }

    /// The block holding record `i` (seq − base seq), or the last block when `i` is past them.
    pub(crate) fn block_of_seq_index(&self, i: u64) -> Option<usize> {
        self.block_of_record(i)
            .or_else(|| self.blocks.len().checked_sub(1))
    }

    /// Tells the memory that blocks `first..=last` will be decompressed soon, in order.
    pub(crate) fn advise_sequential(&self, first: usize, last: usize) {
        if let (Some(a), Some(b)) = (self.blocks.get(first), self.blocks.get(last)) {
            self.plain
                .advise_sequential(b_start(a), b_start(b) + b.len as usize);
        }
        fn b_start(b: &BlockEntry) -> usize {
            b.offset as usize
        }
    }

    /// Decompresses every block; returns the first damaged one.
    pub(crate) fn ensure_all(&self) -> Option<BlockFault> {
        let mut first = None;
        for k in 0..self.blocks.len() {
            if let Err(f) = self.ensure(k) {
                first.get_or_insert(f);
            }
        }
        first
    }

    /// The first damaged block, and the records before it: (fault, records, plain end).
    pub(crate) fn first_damage(&self) -> Option<(BlockFault, u64, u64)> {
        for (k, b) in self.blocks.iter().enumerate() {
            if let Err(f) = self.ensure(k) {
                return Some((f, u64::from(b.first), u64::from(b.offset)));
            }
        }
        None
    }

    /// The index header the plain segment had (its state, count and end), for the code that
    /// reads index headers.
    pub(crate) fn index_header(&self, plain: &SegmentHeader) -> IndexHeader {
        IndexHeader {
            state: self.head.state,
            base_seq: plain.base_seq,
            log_id: plain.log_id,
            count: self.head.count,
            end: self.head.end,
            synced_end: self.head.end as u32,
        }
    }
}

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
    let _lock = super::lock::lock_dir(dir)?;
    compress_locked(dir, storage, false)
}

/// [`compress_log`] for a caller that holds the log's lock already. With `skip_unsealed`, a
/// segment that is not sealed or closed cleanly stays plain instead of failing the call.
pub(crate) fn compress_locked(
    dir: &Path,
    storage: &dyn Storage,
    skip_unsealed: bool,
) -> Result<Vec<Compressed>> {
    let (bases, _) = super::recovery::list_dir(dir)?;
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
        if last <= first + 1 || !super::readahead::parallel() {
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
        super::readahead::stop_and_join(&self.shared.stop, self.handle.take());
    }
}
