//! Imports running at the same time into one store removed each other's unfinished folders
//! (each import first cleared "leftovers" whose lock it could take, and a running import does
//! not hold its lock at every stage): imports exited 0 and left sessions without session.json.

mod cli_common;

use cli_common::{example, Cli};

#[test]
fn concurrent_imports_into_one_store_all_land_whole() {
    let cli = Cli::new();
    cli.import_example("fix-typo", &["--id", "first"]); // the store exists
    let file = example("fix-typo.jsonl");
    let file = file.to_str().unwrap();
    let per_thread = 25;
    std::thread::scope(|s| {
        for t in 0..3 {
            let cli = &cli;
            s.spawn(move || {
                for i in 0..per_thread {
                    let id = format!("t{t}-{i}");
                    let run = cli.run(&["import", file, "--id", &id]);
                    assert_eq!(run.ok().trim_end(), id, "{}", run.stderr);
                }
            });
        }
    });
    let entries = cli.session_entries();
    assert_eq!(entries.len(), 1 + 3 * per_thread, "{entries:?}");
    for id in &entries {
        assert_eq!(cli.run(&["export", id]).ok().lines().count(), 10, "{id}");
    }
    assert!(entries.iter().all(|e| !e.starts_with('.')), "{entries:?}");
}
