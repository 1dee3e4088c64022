//! `verify --all` looked each store id up as a SESSION argument, so a folder of the same name in
//! the current directory made it check that folder or abort; and a store session whose id named
//! a folder in the current directory could not be reached at all.

mod cli_common;

use cli_common::Cli;

#[test]
fn store_ids_win_over_folders_of_the_current_directory() {
    let cli = Cli::new();
    let id = cli.import_example("fix-typo", &["--id", "s1"]);
    assert_eq!(id, "s1");
    let cwd = cli.dir.path().join("work");
    std::fs::create_dir_all(cwd.join("s1")).unwrap();

    let run = |args: &[&str]| {
        let mut c = cli.command(args);
        c.current_dir(&cwd);
        let out = c.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, out, err) = run(&["verify", "--all"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("ok s1"), "{out}");
    assert!(out.contains("1 session(s) checked, all sound"), "{out}");

    let (code, out, err) = run(&["status", "s1", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("\"state\":\"idle\""), "{out}");

    // A folder of the current directory that is not in the store is still taken as a path (and
    // refused when it is not a session), and a session directory there is read as one.
    std::fs::create_dir_all(cwd.join("plain")).unwrap();
    let (code, _, err) = run(&["status", "plain"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("not a session directory"), "{err}");
    cli_common::copy_session(&cli.session_dir("s1"), &cwd.join("copy"));
    let (code, out, err) = run(&["export", "copy"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.lines().count(), 10);
}
