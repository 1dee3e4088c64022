//! Long sequential reads of plain segments check the records' checksums (and their events'
//! archives) ahead of the reader on a second thread (`agentlog-verify`, when the machine runs
//! two threads at once): every record read is the one written, and a damaged record is
//! reported where it is (its segment, offset and seq, after every record before it) whether
//! the thread reached it first or the reader did: at the start of the read, in its middle,
//! past where the thread parks (8 MiB ahead), at its end, and in a read of a range.

use testkit as common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use agentlog::log::{CorruptionKind, Log, LogReader, Options};

/// Events of about 4 KiB: `N` of them are about 12 MiB, in one segment.
const N: u64 = 3_000;

/// The payload of record `i`: the archive of event `i` ([`event_line`]). The records are
/// events, as agentlog writes them, so that the thread vouches for them (a payload that is not
/// an event stops it at the first one it would vouch for) and runs ahead to its lead.
fn payload(i: u64) -> &'static [u8] {
    static PAYLOADS: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    let all = PAYLOADS.get_or_init(|| {
        let mut buf = rkyv::util::AlignedVec::<16>::new();
        (0..N)
            .map(|i| {
                let event = agentlog::event::parse_event_line(&event_line(i)).unwrap();
                buf.clear();
                let start = agentlog::event::encode_event(&event, &mut buf).unwrap();
                buf[start..].to_vec()
            })
            .collect()
    });
    &all[i as usize]
}

/// The log, its segment, and every record's offset in it (walked from the headers, not read
/// from the engine's index).
fn write(dir: &Path) -> (PathBuf, Vec<u64>) {
    let log = Log::open(dir, Options::default()).unwrap();
    for i in 0..N {
        log.append(payload(i)).unwrap();
    }
    log.close().unwrap();
    let segs = common::segments(dir);
    assert_eq!(segs.len(), 1, "one segment");
    let offsets = record_offsets(&segs[0]);
    let bytes = std::fs::read(&segs[0]).unwrap();
    for (i, &at) in (0..).zip(&offsets) {
        let at = at as usize;
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        assert_eq!(len, payload(i).len());
    }
    (segs[0].clone(), offsets)
}

/// The offsets of the `N` records of segment `seg` (walked from the headers, not read from the
/// engine's index).
fn record_offsets(seg: &Path) -> Vec<u64> {
    let bytes = std::fs::read(seg).unwrap();
    let mut offsets = Vec::new();
    let mut at = 64usize;
    for _ in 0..N {
        offsets.push(at as u64);
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        at += (16 + len).div_ceil(16) * 16;
    }
    offsets
}

/// The first record past the thread's 8 MiB lead: the first whose offset is beyond 8.5 MiB.
fn past_the_lead(offsets: &[u64]) -> u64 {
    offsets.iter().position(|&o| o > (17 << 19)).unwrap() as u64
}

/// True when a checking thread of this process runs within a second (a new thread names
/// itself once it runs).
fn checking_thread_runs() -> bool {
    (0..100).any(|_| {
        let found = std::fs::read_dir("/proc/self/task").unwrap().any(|t| {
            std::fs::read_to_string(t.unwrap().path().join("comm"))
                .is_ok_and(|c| c.trim_end() == "agentlog-verify")
        });
        if !found {
            std::thread::sleep(Duration::from_millis(10));
        }
        found
    })
}

fn two_threads_at_once() -> bool {
    std::thread::available_parallelism().is_ok_and(|n| n.get() > 1)
}

#[test]
fn a_long_read_returns_every_record_written_and_checks_ahead_on_a_second_thread() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    write(&dir);
    let reader = LogReader::open(&dir).unwrap();
    let mut it = reader.iter();
    assert_eq!(it.next().unwrap().unwrap().payload, payload(0));
    let watch = two_threads_at_once() && cfg!(target_os = "linux");
    if watch {
        assert!(checking_thread_runs(), "no agentlog-verify thread");
    }
    // A slow start: the thread runs ahead until it is 8 MiB ahead, then parks until the
    // reader comes closer (it vouches for every record on its way, so it does not stop).
    std::thread::sleep(Duration::from_millis(50));
    if watch {
        assert!(
            checking_thread_runs(),
            "the thread did not wait ahead of the reader"
        );
    }
    for (i, rec) in (1..).zip(it) {
        assert_eq!(rec.unwrap().payload, payload(i), "seq {i}");
    }
    let from_mid: Vec<_> = reader.range(700..2_950).map(|r| r.unwrap().seq).collect();
    assert_eq!(from_mid, (700..2_950).collect::<Vec<_>>());
    // A read stopped early stops its thread (the drop waits for it).
    let mut it = reader.iter();
    it.next().unwrap().unwrap();
    drop(it);
}

#[test]
fn a_damaged_record_is_reported_where_it_is_whichever_thread_reaches_it_first() {
    let tmp = tempfile::tempdir().unwrap();
    let orig = tmp.path().join("orig");
    let (seg, offsets) = write(&orig);
    let far = past_the_lead(&offsets);
    for (case, damaged) in [0, 1, 900, far, N - 1].into_iter().enumerate() {
        for pause in [false, true] {
            let dir = tmp.path().join(format!("case{case}-{pause}"));
            common::copy_dir(&orig, &dir);
            let seg = dir.join(seg.file_name().unwrap());
            let at = offsets[damaged as usize];
            // A payload byte: only the checksum can tell.
            common::flip(&seg, at as usize + 16 + 123);
            let reader = LogReader::open(&dir).unwrap();
            let mut it = reader.iter();
            let mut seq = 0u64;
            let err = loop {
                match it
                    .next()
                    .expect("the damaged record ends the read with an error")
                {
                    Ok(rec) => {
                        assert_eq!(rec.payload, payload(seq), "seq {seq}");
                        seq += 1;
                    }
                    Err(e) => break e,
                }
                if pause && seq == 1 {
                    // The thread reaches the damage (or its lead) before the reader does.
                    std::thread::sleep(Duration::from_millis(50));
                }
            };
            assert_eq!(seq, damaged, "records read before the damage ({err})");
            let c = err.corruption().unwrap_or_else(|| panic!("{err}"));
            assert_eq!(
                (c.path.as_path(), c.offset, c.seq),
                (seg.as_path(), at, Some(damaged))
            );
            assert!(
                matches!(c.kind, CorruptionKind::ChecksumMismatch { .. }),
                "{:?}",
                c.kind
            );
            assert!(it.next().is_none(), "the read stops at the damage");
            // A range that starts after the damage reads on; one that spans it stops there.
            if damaged + 1 < N {
                assert_eq!(reader.range(damaged + 1..).count() as u64, N - damaged - 1);
                assert!(reader.range(damaged + 1..).all(|r| r.is_ok()));
            }
            let spanning: Vec<_> = reader.range(damaged.saturating_sub(5)..).collect();
            assert_eq!(spanning.len() as u64, damaged.min(5) + 1);
            assert!(spanning.last().unwrap().is_err());
        }
    }
}

/// Event `i`: a user message of about 4 KiB of text that starts with its number.
fn event_line(i: u64) -> String {
    let text = format!("{i:06} {}", "checked ahead ".repeat(290 + (i % 7) as usize));
    format!(
        r#"{{"type":"user/message","seq":{i},"time":{},"data":{{"role":"user","content":[{{"type":"text","text":"{text}"}}]}}}}"#,
        1_755_000_000_000 + i
    )
}

fn event_text(e: &agentlog::event::archived::ArchivedEvent) -> String {
    match &e.data {
        agentlog::event::archived::ArchivedEventData::UserMessage(m) => match &m.content[0] {
            agentlog::event::archived::ArchivedBlock::Text { text, .. } => text.as_str().to_owned(),
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
}

/// Makes the text of the record at `at` invalid UTF-8 and writes the record's checksum anew:
/// only the archive's validation can tell.
fn break_archive_keep_checksum(seg: &Path, at: u64) {
    let mut bytes = std::fs::read(seg).unwrap();
    let at = at as usize;
    let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    let payload = at + 16..at + 16 + len;
    let text = bytes[payload.clone()]
        .windows(8)
        .position(|w| w == b"checked ")
        .unwrap();
    bytes[payload.start + text] = 0xFF;
    let mut seed = crc32fast::Hasher::new();
    seed.update(&bytes[24..40]);
    seed.update(&bytes[16..24]);
    let mut h = crc32fast::Hasher::new_with_initial(seed.finalize());
    h.update(&bytes[at..at + 4]);
    h.update(&bytes[at + 8..at + 16]);
    h.update(&bytes[payload]);
    bytes[at + 4..at + 8].copy_from_slice(&h.finalize().to_le_bytes());
    std::fs::write(seg, bytes).unwrap();
}

/// The second thread also validates the events' archives ahead of the reader, and
/// `access_event` skips that for the records it vouched for: every event reads back as
/// written, and an archive that is invalid under a valid checksum is refused by
/// `access_event` at its record, wherever it is and whichever thread reaches it first.
#[test]
fn an_invalid_archive_under_a_valid_checksum_is_refused_whichever_thread_reaches_it_first() {
    let tmp = tempfile::tempdir().unwrap();
    let orig = tmp.path().join("orig");
    let (seg, offsets) = write(&orig);
    let far = past_the_lead(&offsets);
    for (case, damaged) in [
        None,
        Some(0),
        Some(1),
        Some(200),
        Some(1_500),
        Some(far),
        Some(N - 1),
    ]
    .into_iter()
    .enumerate()
    {
        for pause in [false, true] {
            let dir = tmp.path().join(format!("ev{case}-{pause}"));
            common::copy_dir(&orig, &dir);
            if let Some(d) = damaged {
                break_archive_keep_checksum(
                    &dir.join(seg.file_name().unwrap()),
                    offsets[d as usize],
                );
            }
            let reader = LogReader::open(&dir).unwrap();
            let mut refused = None;
            for (i, rec) in (0..).zip(reader.iter()) {
                let rec = rec.unwrap_or_else(|e| panic!("seq {i}: {e}"));
                match agentlog::event::access_event(rec.payload) {
                    Ok(e) => {
                        assert_eq!(e.seq(), i);
                        let want = agentlog::event::parse_event_line(&event_line(i)).unwrap();
                        let got = agentlog::event::decode_event(e).unwrap();
                        assert_eq!(got, want, "seq {i}");
                        assert!(event_text(e).starts_with(&format!("{i:06} ")));
                    }
                    Err(_) => {
                        assert!(refused.is_none(), "one record refused");
                        refused = Some(i);
                    }
                }
                if pause && i == 0 {
                    // The thread gets ahead (to its lead) before the reader goes on.
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
            assert_eq!(refused, damaged, "case {case}, pause {pause}");
        }
    }
}
