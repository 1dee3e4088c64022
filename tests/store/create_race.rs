//! Two `Store::create` of one new id at once: both could pass the "does it exist" check, and
//! the slower one then created the session again inside the faster one's folder (both
//! returned it, or the slower one failed with an I/O error about `LOGMETA`) instead of being
//! told that the session exists.

use std::sync::{Arc, Barrier};

use agentlog::store::{NewSession, Store};
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
