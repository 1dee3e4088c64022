//! Fault injection through the I/O seam: a simulated power loss, and failing operations.
//!
//! [`SimStorage`] is a [`Storage`] that wraps [`OsStorage`]: every byte still goes to the real
//! files (so readers, recovery and the rest of the engine see them as usual), and the simulation
//! also records, per file, every `write_at`, `reserve`, `punch` and the emptying of a created file made since
//! the last successful sync of that file. Directory entries (a created or renamed file) count as
//! durable only after [`Storage::sync_dir`] of their directory.
//!
//! At any moment a test can [pull the plug](SimStorage::power_cut): for each file the simulation
//! rebuilds what a disk could hold after a power loss — the content at its last sync plus a torn
//! part of the operations made since (as chosen by [`PowerCut`]) — writes those images over the
//! real files (a file whose name was never made durable disappears), and refuses every later
//! operation with `EIO`. Reopening the log with the normal [`OsStorage`] then shows what survives.
//!
//! Syncs through the simulation do not reach the disk (no fdatasync is made): what is durable is
//! what the simulation records, which keeps tests fast. A sync can be made to take time
//! ([`SimStorage::set_sync_delay`], so several are under way at once, as in the kernel), and a
//! failed sync to lose what it was to make durable, as Linux does
//! ([`SimStorage::set_failed_sync_loses_writes`]).
//!
//! The same type injects failures: [`SimStorage::fail`] makes the N-th operation of a kind
//! (write, allocate, sync, …) fail with a chosen OS error, once or from then on, for example
//! `ENOSPC` (a full disk, [`ENOSPC`]) or `EIO` (a failed fdatasync, [`EIO`]).
//!
//! Scope: the simulation sees what goes through the [`Storage`] seam (everything the writer
//! appends, syncs and renames). Opening a log also removes stray files and moves damaged ones
//! with `std::fs` directly; those are not simulated, so open a log through a `SimStorage` only in
//! a directory whose files are durable (a new log, or one that was reopened and closed).
//!
//! ```
//! use std::sync::Arc;
//! use agentlog::log::sim::{PowerCut, SimStorage};
//! use agentlog::log::{Durability, Log, Options};
//!
//! let dir = tempfile::tempdir()?;
//! let sim = Arc::new(SimStorage::new());
//! let opts = Options::default().durability(Durability::Sync).storage(sim.clone());
//! let log = Log::open(dir.path(), opts)?;
//! log.append(b"synced")?;
//! log.append_with(b"maybe lost", Durability::Os)?;
//! sim.power_cut(PowerCut::KeepSynced)?;
//! log.abandon();
//! let log = Log::open(dir.path(), Options::default())?;
//! assert_eq!(log.len(), 1);
//! assert_eq!(log.reader().get(0)?.payload, b"synced");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::io::{OsStorage, Storage, StorageFile, Syncer};
use crate::util::lock;

/// `ENOSPC`: no space left on the device (a full disk).
pub const ENOSPC: i32 = 28;
/// `EIO`: an input/output error (for example a failed fdatasync).
pub const EIO: i32 = 5;

/// A kind of operation that [`SimStorage::fail`] can make fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OpKind {
    /// [`Storage::open`] and [`Storage::create`].
    Open,
    /// [`StorageFile::write_at`].
    Write,
    /// [`StorageFile::reserve`] (and [`StorageFile::extend_to`]).
    Allocate,
    /// The emptying of a file by [`Storage::create`].
    SetLen,
    /// [`StorageFile::punch`].
    ZeroRange,
    /// [`Syncer::sync_data`].
    Sync,
    /// [`Storage::sync_dir`].
    SyncDir,
    /// [`Storage::rename`].
    Rename,
}

const KINDS: usize = 8;

impl OpKind {
    fn slot(self) -> usize {
        match self {
            OpKind::Open => 0,
            OpKind::Write => 1,
            OpKind::Allocate => 2,
            OpKind::SetLen => 3,
            OpKind::ZeroRange => 4,
            OpKind::Sync => 5,
            OpKind::SyncDir => 6,
            OpKind::Rename => 7,
        }
    }
}

/// What survives of the operations made after a file's last sync when the power is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PowerCut {
    /// Only what was synced: every later operation is lost.
    KeepSynced,
    /// Everything: the page cache reached the disk just in time (like a `kill -9`).
    KeepAll,
    /// Per file, a prefix of the unsynced operations in the order they were made, the last one
    /// torn at a byte chosen by the seed (a write keeps only its first bytes). Each file gets its
    /// own prefix.
    TornPrefix {
        /// Seeds the choice of prefix and tearing point.
        seed: u64,
    },
    /// Per file, any subset of the unsynced operations, each kept whole, torn at a byte, or lost
    /// (a disk that writes back pages in any order).
    TornAnyOrder {
        /// Seeds the choices.
        seed: u64,
    },
}

/// What a power cut did, per file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PowerCutReport {
    /// Files rewritten, with the number of unsynced operations each had and how many of them
    /// (the last possibly torn) reached the image.
    pub files: Vec<(PathBuf, usize, usize)>,
    /// Files that disappeared because their name was never made durable.
    pub removed: Vec<PathBuf>,
}

#[derive(Debug, Clone)]
enum Op {
    Write {
        offset: u64,
        data: Vec<u8>,
    },
    /// `allocate`: grows the file (never shrinks it).
    Grow(u64),
    SetLen(u64),
    Zero {
        offset: u64,
        len: u64,
    },
}

impl Op {
    /// Applies the op to `image`; with `torn = Some(f)`, applies only a part of it (`f` in 0..1).
    fn apply(&self, image: &mut Vec<u8>, torn: Option<f64>) {
        match self {
            Op::Write { offset, data } => {
                let n = match torn {
                    Some(f) => ((data.len() as f64) * f) as usize,
                    None => data.len(),
                };
                let start = *offset as usize;
                let end = start + n;
                if image.len() < end {
                    image.resize(end, 0);
                }
                image[start..end].copy_from_slice(&data[..n]);
            }
            Op::Grow(len) => {
                if torn.is_none() && image.len() < *len as usize {
                    image.resize(*len as usize, 0);
                }
            }
            Op::SetLen(len) => {
                if torn.is_none() {
                    image.resize(*len as usize, 0);
                }
            }
            Op::Zero { offset, len } => {
                let n = match torn {
                    Some(f) => ((*len as f64) * f) as u64,
                    None => *len,
                };
                let start = (*offset as usize).min(image.len());
                let end = ((offset + n) as usize).min(image.len());
                image[start..end].fill(0);
            }
        }
    }
}

#[derive(Debug, Default)]
struct FileState {
    /// The content on stable storage.
    durable: Vec<u8>,
    /// Operations since the last successful sync, in order.
    pending: Vec<Op>,
    /// Operations ever taken off the front of `pending` (made durable, or lost by a failed
    /// sync): `pending[i]` is the file's operation number `taken + i`.
    taken: u64,
    /// Syncs of this file under way.
    syncing: u32,
    /// The error of a failed sync not reported yet: the next sync of the file to end reports
    /// it ([`SimStorage::set_failed_sync_loses_writes`]).
    unreported: Option<i32>,
}

#[derive(Debug, Clone)]
struct Fault {
    kind: OpKind,
    /// Fails when the kind's counter reaches this value (counting from 1).
    at: u64,
    error: i32,
    sticky: bool,
}

#[derive(Debug, Default)]
struct State {
    files: Vec<FileState>,
    /// File names now.
    current: BTreeMap<PathBuf, usize>,
    /// File names that survive a power loss.
    durable: BTreeMap<PathBuf, usize>,
    counts: [u64; KINDS],
    faults: Vec<Fault>,
    dead: bool,
    /// How long each sync takes ([`SimStorage::set_sync_delay`]).
    sync_delay: Duration,
    /// A failed sync loses the operations it was to make durable
    /// ([`SimStorage::set_failed_sync_loses_writes`]).
    failed_sync_loses: bool,
    /// Syncs under way now, and the most ever under way at once.
    syncs_running: u32,
    max_syncs_running: u32,
}

impl State {
    /// Counts an operation and returns the error it must fail with, if any.
    fn count(&mut self, kind: OpKind) -> io::Result<()> {
        if self.dead {
            return Err(io::Error::other("the simulated power is off"));
        }
        let c = &mut self.counts[kind.slot()];
        *c += 1;
        let n = *c;
        let hit = self
            .faults
            .iter()
            .position(|f| f.kind == kind && (n == f.at || (f.sticky && n >= f.at)));
        match hit {
            Some(i) => {
                let f = self.faults[i].clone();
                if !f.sticky {
                    self.faults.remove(i);
                }
                Err(io::Error::from_raw_os_error(f.error))
            }
            None => Ok(()),
        }
    }
}

/// Whether a fault set with [`SimStorage::fail`] fails one operation or every one from then on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repeat {
    /// Only the `nth` operation fails.
    Once,
    /// The `nth` and every later operation of the kind fail, until
    /// [`SimStorage::clear_faults`].
    Sticky,
}

/// A [`Storage`] that records what is durable and injects failures (see the module docs).
#[derive(Clone, Default)]
pub struct SimStorage {
    inner: OsStorage,
    state: Arc<Mutex<State>>,
}

impl fmt::Debug for SimStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.lock();
        f.debug_struct("SimStorage")
            .field("files", &s.current.len())
            .field("counts", &s.counts)
            .field("faults", &s.faults)
            .field("dead", &s.dead)
            .finish()
    }
}

/// A small deterministic random generator (splitmix64) for the power cut choices.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }

    fn fraction(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

impl SimStorage {
    /// A simulation with no faults. Files that exist when first opened through it count as
    /// durable, content and name.
    pub fn new() -> SimStorage {
        SimStorage::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Makes the `nth` next operation of `kind` (1 = the very next one) fail with the OS error
    /// `errno` (for example [`ENOSPC`] or [`EIO`]); with [`Repeat::Sticky`], every later one
    /// fails too, until [`SimStorage::clear_faults`]. A failing operation changes nothing (a
    /// failing sync may lose writes: [`SimStorage::set_failed_sync_loses_writes`]).
    pub fn fail(&self, kind: OpKind, nth: u64, errno: i32, repeat: Repeat) {
        let sticky = repeat == Repeat::Sticky;
        let mut s = self.lock();
        let at = s.counts[kind.slot()] + nth.max(1);
        s.faults.push(Fault {
            kind,
            at,
            error: errno,
            sticky,
        });
    }

    /// Removes every pending fault ("the space came back").
    pub fn clear_faults(&self) {
        self.lock().faults.clear();
    }

    /// Makes every sync take about `delay` (outside the simulation's lock, so several syncs of
    /// one file can be under way at once, as fdatasyncs are in the kernel): between half and
    /// one and a half times `delay`, varying from one sync to the next, so that a sync may end
    /// before one that started earlier. A sync makes durable the operations recorded before it
    /// started, not those recorded while it runs. Zero (the default) makes a sync instant.
    pub fn set_sync_delay(&self, delay: Duration) {
        self.lock().sync_delay = delay;
    }

    /// With `true`, a failed sync loses the operations it was to make durable: they are
    /// neither durable nor pending any more (a power cut never keeps them), and a later
    /// successful sync does not bring them back. This is Linux after a failed fdatasync (the
    /// pages are marked clean; the next fdatasync succeeds and reports nothing). And, as Linux
    /// reports a write-back error once per open file to whichever fdatasync checks first, the
    /// error goes to another sync of the same file when one is under way as the failed one
    /// ends: that one fails, and the failed one returns success. The default, `false`, leaves
    /// the operations pending, as if the failing sync had changed nothing, and reports the error
    /// to the failing sync.
    pub fn set_failed_sync_loses_writes(&self, lose: bool) {
        self.lock().failed_sync_loses = lose;
    }

    /// The most syncs (of any files) ever under way at once.
    pub fn max_syncs_in_flight(&self) -> u32 {
        self.lock().max_syncs_running
    }

    /// How many operations of `kind` were attempted so far (failed ones included).
    pub fn count(&self, kind: OpKind) -> u64 {
        self.lock().counts[kind.slot()]
    }

    /// True after [`SimStorage::power_cut`].
    pub fn is_dead(&self) -> bool {
        self.lock().dead
    }

    /// The number of unsynced operations recorded for the file now named `path`.
    pub fn unsynced_ops(&self, path: &Path) -> Option<usize> {
        let s = self.lock();
        s.current.get(path).map(|&id| s.files[id].pending.len())
    }

    /// Pulls the plug: rewrites every file this simulation has seen with what a disk could hold
    /// after a power loss (see [`PowerCut`]), removes files whose names were never made durable,
    /// and makes every later operation fail. Drop or [`abandon`](super::Log::abandon) the log
    /// afterwards, then reopen it with the normal storage.
    ///
    /// Each image replaces its file under a new inode (write to a temporary file, rename), so
    /// memory maps of the old files stay valid.
    pub fn power_cut(&self, how: PowerCut) -> io::Result<PowerCutReport> {
        let mut s = self.lock();
        s.dead = true;
        let mut rng = Rng(match how {
            PowerCut::TornPrefix { seed } | PowerCut::TornAnyOrder { seed } => seed,
            _ => 0,
        });
        let mut report = PowerCutReport::default();
        let current: Vec<(PathBuf, usize)> =
            s.current.iter().map(|(p, &i)| (p.clone(), i)).collect();
        for (path, _) in &current {
            if !s.durable.contains_key(path) {
                match std::fs::remove_file(path) {
                    Ok(()) => report.removed.push(path.clone()),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
        }
        let durable: Vec<(PathBuf, usize)> =
            s.durable.iter().map(|(p, &i)| (p.clone(), i)).collect();
        for (path, id) in durable {
            let f = &s.files[id];
            let mut image = f.durable.clone();
            let n = f.pending.len();
            let mut kept = 0;
            match how {
                PowerCut::KeepSynced => {}
                PowerCut::KeepAll => {
                    for op in &f.pending {
                        op.apply(&mut image, None);
                    }
                    kept = n;
                }
                PowerCut::TornPrefix { .. } => {
                    let k = rng.below(n as u64 + 1) as usize;
                    for op in &f.pending[..k] {
                        op.apply(&mut image, None);
                    }
                    kept = k;
                    if k < n && rng.below(2) == 0 {
                        f.pending[k].apply(&mut image, Some(rng.fraction()));
                        kept += 1;
                    }
                }
                PowerCut::TornAnyOrder { .. } => {
                    for op in &f.pending {
                        match rng.below(3) {
                            0 => {}
                            1 => {
                                op.apply(&mut image, None);
                                kept += 1;
                            }
                            _ => {
                                op.apply(&mut image, Some(rng.fraction()));
                                kept += 1;
                            }
                        }
                    }
                }
            }
            replace_file(&path, &image)?;
            report.files.push((path, n, kept));
        }
        Ok(report)
    }
}

fn replace_file(path: &Path, image: &[u8]) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".powercut");
    let tmp = PathBuf::from(tmp);
    {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        io::Write::write_all(&mut f, image)?;
    }
    std::fs::rename(&tmp, path)
}

impl SimStorage {
    fn open_file(
        &self,
        path: &Path,
        create: bool,
        capacity: u64,
    ) -> io::Result<Box<dyn StorageFile>> {
        let mut s = self.lock();
        s.count(OpKind::Open)?;
        let id = match s.current.get(path) {
            Some(&id) => id,
            None => {
                let existing = match std::fs::read(path) {
                    Ok(b) => Some(b),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => None,
                    Err(e) => return Err(e),
                };
                let id = s.files.len();
                let pre_existing = existing.is_some();
                s.files.push(FileState {
                    durable: existing.unwrap_or_default(),
                    pending: Vec::new(),
                    taken: 0,
                    syncing: 0,
                    unreported: None,
                });
                if !pre_existing && !create {
                    // Let the inner open report the error below.
                    s.files.pop();
                    drop(s);
                    return self.inner.open(path, capacity);
                }
                s.current.insert(path.to_path_buf(), id);
                if pre_existing {
                    s.durable.insert(path.to_path_buf(), id);
                }
                id
            }
        };
        let file = if create {
            let f = self.inner.create(path, capacity)?;
            // Emptying the file is an operation like any other: lost unless synced.
            s.files[id].pending.push(Op::SetLen(0));
            f
        } else {
            self.inner.open(path, capacity)?
        };
        Ok(Box::new(SimFile {
            id,
            file,
            state: Arc::clone(&self.state),
        }))
    }
}

impl Storage for SimStorage {
    fn create(&self, path: &Path, capacity: u64) -> io::Result<Box<dyn StorageFile>> {
        self.open_file(path, true, capacity)
    }

    fn open(&self, path: &Path, capacity: u64) -> io::Result<Box<dyn StorageFile>> {
        self.open_file(path, false, capacity)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut s = self.lock();
        s.count(OpKind::SyncDir)?;
        let in_dir = |p: &Path| p.parent() == Some(dir);
        s.durable.retain(|p, _| !in_dir(p));
        let now: Vec<(PathBuf, usize)> = s
            .current
            .iter()
            .filter(|(p, _)| in_dir(p))
            .map(|(p, &i)| (p.clone(), i))
            .collect();
        s.durable.extend(now);
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut s = self.lock();
        s.count(OpKind::Rename)?;
        self.inner.rename(from, to)?;
        if let Some(id) = s.current.remove(from) {
            s.current.insert(to.to_path_buf(), id);
        }
        Ok(())
    }
}

struct SimFile {
    id: usize,
    file: Box<dyn StorageFile>,
    state: Arc<Mutex<State>>,
}

impl SimFile {
    /// Counts the op, runs it on the real file and records it as unsynced when it succeeded.
    fn op(
        &mut self,
        kind: OpKind,
        record: impl FnOnce() -> Op,
        run: impl FnOnce(&mut dyn StorageFile) -> io::Result<()>,
    ) -> io::Result<()> {
        let mut s = lock(&self.state);
        s.count(kind)?;
        run(self.file.as_mut())?;
        let op = record();
        s.files[self.id].pending.push(op);
        Ok(())
    }
}

impl StorageFile for SimFile {
    fn len(&self) -> u64 {
        self.file.len()
    }

    fn reserve(&mut self, offset: u64, len: u64) -> io::Result<()> {
        let end = offset.saturating_add(len);
        self.op(
            OpKind::Allocate,
            || Op::Grow(end),
            |f| f.reserve(offset, len),
        )
    }

    fn is_reserved(&self, offset: u64, len: u64) -> bool {
        self.file.is_reserved(offset, len)
    }

    fn write_at(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.op(
            OpKind::Write,
            || Op::Write {
                offset,
                data: data.to_vec(),
            },
            |f| f.write_at(offset, data),
        )
    }

    fn punch(&mut self, offset: u64, len: u64) -> io::Result<()> {
        // The bytes read as zeros afterwards: recorded as a zeroing.
        self.op(
            OpKind::ZeroRange,
            || Op::Zero { offset, len },
            |f| f.punch(offset, len),
        )
    }

    fn syncer(&self) -> Arc<dyn Syncer> {
        Arc::new(SimSyncer {
            id: self.id,
            state: Arc::clone(&self.state),
        })
    }

    fn release_writes(&mut self) {
        self.file.release_writes();
    }
}

struct SimSyncer {
    id: usize,
    state: Arc<Mutex<State>>,
}

impl Syncer for SimSyncer {
    fn sync_data(&self) -> io::Result<()> {
        // Operations recorded before the sync started are durable once it returns; those made
        // while it runs or after it stay pending. Operations are numbered per file, so that
        // with several syncs of a file in flight at once (group commit) each takes only what
        // the others have not taken yet.
        // No real fdatasync: durability is what this simulation records, and tests stay fast.
        let mut s = lock(&self.state);
        // The fault decides the outcome when the sync starts; it is reported when it ends.
        let outcome = s.count(OpKind::Sync);
        if s.dead {
            return Err(io::Error::other("the simulated power is off"));
        }
        let upto = {
            let f = &s.files[self.id];
            f.taken + f.pending.len() as u64
        };
        let delay = {
            // Half to one and a half times the delay, from the sync's number.
            let n = s.counts[OpKind::Sync.slot()];
            let spread = Rng(n).below(1024) as u32;
            s.sync_delay / 2 + s.sync_delay * spread / 1024
        };
        s.syncs_running += 1;
        s.files[self.id].syncing += 1;
        s.max_syncs_running = s.max_syncs_running.max(s.syncs_running);
        if !delay.is_zero() {
            drop(s);
            std::thread::sleep(delay);
            s = lock(&self.state);
        }
        s.syncs_running -= 1;
        s.files[self.id].syncing -= 1;
        if s.dead {
            return Err(io::Error::other("the simulated power is off"));
        }
        let lose = s.failed_sync_loses;
        if outcome.is_err() && !lose {
            return outcome;
        }
        let f = &mut s.files[self.id];
        let k = (upto.saturating_sub(f.taken) as usize).min(f.pending.len());
        let done: Vec<Op> = f.pending.drain(..k).collect();
        f.taken += k as u64;
        if outcome.is_ok() {
            for op in &done {
                op.apply(&mut f.durable, None);
            }
        }
        // An error passed on by a failed sync of this file is reported here; this sync's own
        // error goes to another sync of the file under way, if there is one.
        let inherited = f.unreported.take();
        let result = match outcome {
            Err(e) if f.syncing > 0 => {
                f.unreported = Some(e.raw_os_error().unwrap_or(EIO));
                Ok(())
            }
            other => other,
        };
        match inherited {
            Some(errno) => Err(io::Error::from_raw_os_error(errno)),
            None => result,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torn_write_keeps_a_prefix_of_the_bytes() {
        let mut img = vec![0u8; 4];
        Op::Write {
            offset: 2,
            data: vec![1, 2, 3, 4],
        }
        .apply(&mut img, Some(0.5));
        assert_eq!(img, vec![0, 0, 1, 2]);
        Op::SetLen(1).apply(&mut img, None);
        assert_eq!(img, vec![0]);
        Op::Grow(3).apply(&mut img, None);
        assert_eq!(img, vec![0, 0, 0]);
    }

    #[test]
    fn faults_fire_on_the_nth_operation() {
        let mut s = State::default();
        s.faults.push(Fault {
            kind: OpKind::Write,
            at: 2,
            error: ENOSPC,
            sticky: false,
        });
        assert!(s.count(OpKind::Write).is_ok());
        let e = s.count(OpKind::Write).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(ENOSPC));
        assert!(s.count(OpKind::Write).is_ok());
    }
}
