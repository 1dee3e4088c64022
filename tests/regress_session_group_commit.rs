//! Appenders of one session under `sync` durability each paid their own fdatasync: the session held its lock while waiting for the sync, so no two appends could share one (group commit did not happen through the session layer).

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use agentlog::event::parse_draft_line;
use agentlog::log::{Durability, Options, OsStorage, Storage, StorageFile, Syncer};
use agentlog::session::{Session, SessionMeta, SessionOptions};

/// The operating system, with every fdatasync counted and made 3 ms slow (a slow disk).
#[derive(Default)]
struct SlowSyncs {
    syncs: Arc<AtomicU64>,
}

struct SlowFile {
    inner: Box<dyn StorageFile>,
    syncs: Arc<AtomicU64>,
}

struct SlowSyncer {
    inner: Arc<dyn Syncer>,
    syncs: Arc<AtomicU64>,
}

impl Syncer for SlowSyncer {
    fn sync_data(&self) -> io::Result<()> {
        self.syncs.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(3));
        self.inner.sync_data()
    }
}

impl StorageFile for SlowFile {
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn reserve(&mut self, offset: u64, len: u64) -> io::Result<()> {
        self.inner.reserve(offset, len)
    }
    fn is_reserved(&self, offset: u64, len: u64) -> bool {
        self.inner.is_reserved(offset, len)
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.inner.write_at(offset, data)
    }
    fn punch(&mut self, offset: u64, len: u64) -> io::Result<()> {
        self.inner.punch(offset, len)
    }
    fn syncer(&self) -> Arc<dyn Syncer> {
        Arc::new(SlowSyncer {
            inner: self.inner.syncer(),
            syncs: Arc::clone(&self.syncs),
        })
    }
}

impl Storage for SlowSyncs {
    fn create(&self, path: &Path, capacity: u64) -> io::Result<Box<dyn StorageFile>> {
        Ok(Box::new(SlowFile {
            inner: OsStorage.create(path, capacity)?,
            syncs: Arc::clone(&self.syncs),
        }))
    }
    fn open(&self, path: &Path, capacity: u64) -> io::Result<Box<dyn StorageFile>> {
        Ok(Box::new(SlowFile {
            inner: OsStorage.open(path, capacity)?,
            syncs: Arc::clone(&self.syncs),
        }))
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        OsStorage.sync_dir(dir)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        OsStorage.rename(from, to)
    }
}

#[test]
fn eight_appenders_of_one_session_share_fdatasyncs() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Arc::new(SlowSyncs::default());
    let syncs = Arc::clone(&storage.syncs);
    let options = SessionOptions {
        log: Options::default()
            .durability(Durability::Sync)
            .storage(storage),
        keep_raw_chunks: true,
        ..SessionOptions::default()
    };
    let session =
        Arc::new(Session::create(dir.path().join("s"), SessionMeta::new("s", 0), options).unwrap());
    let before = syncs.load(Ordering::SeqCst);
    let per_thread = 40u64;
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let session = Arc::clone(&session);
            std::thread::spawn(move || {
                for i in 0..per_thread {
                    let line = format!(
                        r#"{{"type":"error","data":{{"message":"thread {t} event {i}"}}}}"#
                    );
                    session
                        .append_draft(parse_draft_line(&line).unwrap())
                        .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let appends = 8 * per_thread;
    assert_eq!(session.len(), appends);
    let used = syncs.load(Ordering::SeqCst) - before;
    // Serialized appenders would need one fdatasync each; shared ones need far fewer.
    assert!(
        used < appends / 2,
        "{used} fdatasyncs for {appends} appends"
    );
    // Every event is in the log exactly once.
    let reader = session.reader();
    let mut seen = std::collections::HashSet::new();
    for e in reader.events() {
        assert!(seen.insert(
            e.unwrap()
                .to_canonical_string()
                .split("\"data\"")
                .nth(1)
                .unwrap()
                .to_string()
        ));
    }
    assert_eq!(seen.len() as u64, appends);
}
