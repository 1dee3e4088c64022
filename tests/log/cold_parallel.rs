//! Sequential reads of cold segments on both cores (the reader and the prefetch thread take
//! the blocks in order, each the next one nobody took) and the decompression memory that a
//! dropped reader leaves for the next one (`FillMap`'s pool): every record read is the one
//! written, whichever thread decompressed its block, whatever an earlier reader's memory held,
//! whether the reader is fast (the thread decompresses little) or slow (the thread runs ahead,
//! parks, and is woken), and with several iterators on one reader at once.

use std::path::Path;

use agentlog::log::{compress_log, Log, LogReader, Options, OsStorage};

/// Payloads of `tag`'s log: varied sizes, so blocks hold different numbers of records.
fn payload(tag: u8, i: u64) -> Vec<u8> {
    let mut p = format!(
        r#"{{"log":{tag},"seq":{i},"type":"assistant/chunk","data":{{"delta":"word {} of the answer","n":{}}}}}"#,
        i * 7 % 1000,
        i * 2_654_435_761 % 100_003
    )
    .into_bytes();
    if i % 41 == 3 {
        p.extend(std::iter::repeat_n(
            b'a' + tag,
            2_000 + (i % 13) as usize * 150,
        ));
    }
    p
}

fn write_cold(dir: &Path, tag: u8, n: u64) -> Vec<Vec<u8>> {
    let log = Log::open(dir, Options::default().segment_size(64 << 20)).unwrap();
    let all: Vec<Vec<u8>> = (0..n).map(|i| payload(tag, i)).collect();
    for p in &all {
        log.append(p).unwrap();
    }
    log.close().unwrap();
    assert_eq!(compress_log(dir, &OsStorage).unwrap().len(), 1);
    all
}

fn replay(dir: &Path) -> Vec<Vec<u8>> {
    let reader = LogReader::open(dir).unwrap();
    let got = reader.iter().map(|r| r.unwrap().payload.to_vec()).collect();
    got
}

#[test]
fn a_reader_after_a_dropped_one_reads_its_own_records_not_the_memory_left_before() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    // Two logs of nearly the same plain size (b's decompression may reuse a's memory) and
    // different bytes everywhere.
    let all_a = write_cold(&a, 0, 20_000);
    let all_b = write_cold(&b, 1, 19_000);
    for _ in 0..3 {
        assert_eq!(replay(&a), all_a);
        assert_eq!(replay(&b), all_b);
    }
    // Gets first (a few blocks decompressed in memory left by the replays), then a replay of
    // the same reader.
    let reader = LogReader::open(&b).unwrap();
    for seq in [18_999, 0, 9_500, 77, 12_345] {
        assert_eq!(reader.get(seq).unwrap().payload, &all_b[seq as usize][..]);
    }
    let got: Vec<&[u8]> = reader.iter().map(|r| r.unwrap().payload).collect();
    // While b's reader is alive, a's readers come and go: b's records stay as they were.
    assert_eq!(replay(&a), all_a);
    assert_eq!(replay(&a), all_a);
    assert_eq!(got.len(), all_b.len());
    for (k, p) in got.iter().enumerate() {
        assert_eq!(*p, &all_b[k][..], "seq {k}");
    }
}

#[test]
fn a_slow_consumer_and_several_iterators_on_one_reader_read_every_record() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let all = write_cold(&dir, 2, 20_000);
    // A slow consumer: the thread runs ahead, parks, and is woken as the reader catches up.
    let reader = LogReader::open(&dir).unwrap();
    for (k, r) in reader.iter().enumerate() {
        if k % 500 == 0 {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        assert_eq!(r.unwrap().payload, &all[k][..], "seq {k}");
    }
    // Four iterators on one fresh reader at once, from different places: each with its own
    // prefetch, all taking blocks of the same segment.
    let reader = LogReader::open(&dir).unwrap();
    std::thread::scope(|s| {
        for start in [0u64, 0, 7_000, 19_990] {
            let (reader, all) = (&reader, &all);
            s.spawn(move || {
                let got: Vec<&[u8]> = reader
                    .range(start..20_000)
                    .map(|r| r.unwrap().payload)
                    .collect();
                assert_eq!(got.len() as u64, 20_000 - start);
                for (k, p) in got.iter().enumerate() {
                    assert_eq!(
                        *p,
                        &all[start as usize + k][..],
                        "seq {}",
                        start as usize + k
                    );
                }
            });
        }
    });
}
