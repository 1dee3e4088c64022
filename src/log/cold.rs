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
use std::path::Path;
use std::sync::OnceLock;

use memmap2::Mmap;

use super::error::{CorruptionKind, Error, Result};
use super::format::{
    self, IndexHeader, IndexState, RecordHeader, SegmentHeader, HEADER_SIZE, RECORD_HEADER_SIZE,
};
use super::mmap;
use super::segment;

mod compress;
mod prefetch;

pub(crate) use compress::compress_locked;
pub use compress::{compress_log, compress_segment, Compressed};
pub(crate) use prefetch::Prefetch;

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

/// True when `head` (the first bytes of a segment file) is a cold segment's.
pub(crate) fn is_cold(head: &[u8]) -> bool {
    head.get(..8) == Some(&COLD_MAGIC[..])
}

/// The temporary file a segment is compressed into, before it is renamed over the segment. Its
/// name ends in `.seg.tmp`: a crash leaves a stray that the next writer open removes.
pub(crate) fn temp_name(base_seq: u64) -> String {
    format!("{:020}.cold.seg.tmp", base_seq)
}

/// The plain segment a cold segment was compressed from, rebuilt whole for a salvage: its
/// header and every block that decompresses, at their offsets, a damaged block's bytes zeros;
/// the index header the plain segment had (state, count, end); and whether a block was
/// damaged. Fails when the cold segment's header, dictionary or block index is damaged.
pub(crate) fn rebuild_plain(
    path: &Path,
    base_seq: u64,
) -> Result<(rkyv::util::AlignedVec<16>, IndexHeader, bool)> {
    let file = File::open(path).map_err(|e| Error::io("open segment", path, e))?;
    let (cold, plain_header) = ColdSegment::open(&file, path, base_seq)?;
    let damaged = cold.ensure_all().is_some();
    let bytes = cold.plain();
    let mut out = rkyv::util::AlignedVec::<16>::with_capacity(bytes.len());
    out.extend_from_slice(bytes);
    Ok((out, cold.index_header(&plain_header), damaged))
}

/// The plain bytes of the cold segment file at `path`, whatever it is named (a copy in
/// `damaged/`): every block that decompresses at its offset, a damaged block's bytes zeros.
/// `None` when the file is not a cold segment or its header, dictionary or block index is
/// damaged (its bytes are then all there is to read).
pub(crate) fn plain_of_any(path: &Path) -> Option<rkyv::util::AlignedVec<16>> {
    let mut head = [0u8; HEADER_SIZE];
    let mut file = File::open(path).ok()?;
    std::io::Read::read_exact(&mut file, &mut head).ok()?;
    let base_seq = ColdHeader::decode(&head).ok()?.base_seq;
    rebuild_plain(path, base_seq)
        .ok()
        .map(|(bytes, _, _)| bytes)
}

/// The plain bytes of the blocks of a damaged cold segment file (its bytes `data`) found
/// without its block index (cut off, or its header damaged): every zstd frame found by its
/// magic number after the header that decompresses (with the dictionary, when the file has one
/// and it is intact) is kept, one after another, each padded to 16 bytes. A block holds whole records
/// starting 16-byte aligned, so a search for records at aligned offsets finds each intact
/// block's records, their checksums checked as anywhere. `None` when no frame decompresses.
pub(crate) fn blocks_without_index(data: &[u8]) -> Option<rkyv::util::AlignedVec<16>> {
    const FRAME_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
    let start = 2 * HEADER_SIZE;
    if data.len() < start || !is_cold(data) {
        return None;
    }
    // The dictionary, when the header (damaged or not) names one of a plausible size whose
    // checksum after it is right.
    let d = usize::try_from(format::u32_at(data, 44)).ok()?;
    let dict = (d > 0 && d <= compress::DICT_MAX)
        .then(|| data.get(start..start + d + 4))
        .flatten()
        .filter(|b| crc32fast::hash(&b[..d]) == format::u32_at(b, d))
        .and_then(|b| DDict::try_create(&b[..d]));
    let mut at = if dict.is_some() { start + d + 4 } else { start };
    // The blocks hold at most the plain segment's bytes: its capacity, when its header (kept
    // after the cold one) is sound, else the default segment size. A damaged frame claiming
    // more is no block of this segment (a few bytes of zstd can claim gigabytes).
    let mut budget =
        SegmentHeader::decode(&data[HEADER_SIZE..start]).map_or(64 << 20, |h| h.capacity);
    let mut out = rkyv::util::AlignedVec::<16>::new();
    while let Some(found) = data
        .get(at..)
        .and_then(|rest| rest.windows(4).position(|w| w == FRAME_MAGIC))
    {
        let frame = &data[at + found..];
        let size = zstd::zstd_safe::find_frame_compressed_size(frame).ok();
        let len = zstd::zstd_safe::get_frame_content_size(frame)
            .ok()
            .flatten();
        let decoded = match (size, len.and_then(|n| usize::try_from(n).ok())) {
            (Some(size), Some(len)) if size <= frame.len() && len as u64 <= budget => {
                let mut dst = vec![0u8; len];
                decompress_into(&frame[..size], &mut dst, dict.as_ref())
                    .ok()
                    .filter(|&n| n == len)
                    .map(|_| (dst, size))
            }
            _ => None,
        };
        match decoded {
            Some((plain, size)) => {
                budget -= plain.len() as u64;
                out.extend_from_slice(&plain);
                while out.len() % format::RECORD_ALIGN != 0 {
                    out.push(0);
                }
                at += found + size;
            }
            None => at += found + 1,
        }
    }
    (!out.is_empty()).then_some(out)
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
                "compressed block {k} (seqs {} to {}): {what}",
                self.head.base_seq + u64::from(b.first),
                (self.head.base_seq + u64::from(b.first) + u64::from(b.count)).saturating_sub(1)
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
