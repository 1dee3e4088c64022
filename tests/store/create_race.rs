//! Two `Store::create` of one new id at once: both could pass the "does it exist" check, and
//! the slower one then created the session again inside the faster one's folder (both
//! returned it, or the slower one failed with an I/O error about `LOGMETA`) instead of being
//! told that the session exists.

use std::sync::{Arc, Barrier};

use agentlog::store::{ForkPoint, NewSession, Store};
use agentlog::Error;

#[test]
fn of_two_creates_of_one_id_exactly_one_wins_and_the_other_is_told_it_exists() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path()).unwrap());
    for round in 0..100 {
        let id = format!("s{round}");
        let barrier = Arc::new(Barrier::new(3));
        let threads: Vec<_> = (0..3)
            .map(|_| {
                let (store, barrier, id) = (store.clone(), barrier.clone(), id.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    // Closed at once: a winner that kept it open would make a late loser's
                    // open fail, which is not what this test is about.
                    store
                        .create(NewSession::default().id(id))
                        .map(|s| s.close())
                })
            })
            .collect();
        let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let won = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(won, 1, "round {round}: {results:?}");
        for r in results.iter().filter_map(|r| r.as_ref().err()) {
            assert!(
                matches!(r, Error::Exists(x) if *x == id),
                "round {round}: {r}"
            );
        }
        // The winner's session is whole: it opens and is empty.
        let session = store.open_session(&id).unwrap();
        assert_eq!(session.len(), 0, "round {round}");
        session.close().unwrap();
    }
}

/// A create that failed after making the session's folder (options the log refuses) left the
/// folder behind: the id stayed taken, and a retry with good options was told the session
/// exists. The folder of a failed create is removed.
#[test]
fn a_failed_create_leaves_the_id_free() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut bad = NewSession::default().id("s");
    bad.durability = Some(agentlog::log::Durability::Periodic(
        std::time::Duration::ZERO,
    ));
    let err = store.create(bad).unwrap_err();
    assert!(
        matches!(err, Error::Log(agentlog::log::Error::InvalidOptions(_))),
        "{err:?}"
    );
    assert!(!dir.path().join("sessions").join("s").exists());
    let s = store.create(NewSession::default().id("s")).unwrap();
    assert_eq!(s.id(), "s");
}

/// A fork (or an import) of an id that a `create` was making at that moment found the folder
/// without its `session.json` yet and failed with "a folder of that name is in the store and
/// is not a session: remove it"; and its rename into place, onto a folder the create had just
/// made (empty), would have replaced it (`util::rename_noreplace`'s test). Of a fork and
/// creates of one id at once, exactly one wins and the others are told the session exists.
#[test]
fn a_fork_and_a_create_of_one_id_at_once_make_one_session() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path()).unwrap());
    let parent = store.create(NewSession::default().id("p")).unwrap();
    for line in [
        r#"{"type":"turn/start","data":{"turn":1}}"#,
        r#"{"type":"user/message","data":{"role":"user","content":[{"type":"text","text":"hi"}]}}"#,
    ] {
        parent
            .append_draft(agentlog::event::parse_draft_line(line).unwrap())
            .unwrap();
    }
    parent.close().unwrap();
    for round in 0..100 {
        let id = format!("s{round}");
        let barrier = Arc::new(Barrier::new(3));
        let fork = {
            let (store, barrier, id) = (store.clone(), barrier.clone(), id.clone());
            std::thread::spawn(move || {
                barrier.wait();
                store
                    .fork("p", ForkPoint::At(2), Some(id))
                    .map(|r| r.events)
            })
        };
        let creates: Vec<_> = (0..2)
            .map(|_| {
                let (store, barrier, id) = (store.clone(), barrier.clone(), id.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    store.create(NewSession::default().id(id)).map(|s| {
                        s.close().unwrap();
                        0
                    })
                })
            })
            .collect();
        let results: Vec<Result<u64, Error>> = std::iter::once(fork)
            .chain(creates)
            .map(|t| t.join().unwrap())
            .collect();
        let won: Vec<u64> = results
            .iter()
            .filter_map(|r| r.as_ref().ok().copied())
            .collect();
        assert_eq!(won.len(), 1, "round {round}: {results:?}");
        for r in results.iter().filter_map(|r| r.as_ref().err()) {
            assert!(
                matches!(r, Error::Exists(x) if *x == id),
                "round {round}: {r}"
            );
        }
        // The winner's session is whole: the fork's two events, or the create's none.
        let session = store.open_session(&id).unwrap();
        assert_eq!(session.len(), won[0], "round {round}");
        session.close().unwrap();
        agentlog::log::verify(dir.path().join("sessions").join(&id)).unwrap();
    }
}
