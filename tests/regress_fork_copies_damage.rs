//! `fork --at N` copied the records of the segment it cuts without checking them: a parent with
//! a damaged record before N gave a child damaged from the start, and the fork said nothing.

mod cli_common;

use cli_common::{flip, segments, Cli};

#[test]
fn a_fork_refuses_to_copy_a_damaged_record_and_leaves_no_child() {
    let cli = Cli::new();
    let id = cli.import_example("fix-typo", &[]);
    let seg = segments(&cli.session_dir(&id))[0].clone();
    // The byte offset of seq 4's record: its index entry (after the 64-byte index header, 4
    // bytes per record; docs/format.md).
    let idx = std::fs::read(seg.with_extension("idx")).unwrap();
    let entry = 64 + 4 * 4;
    let off = u32::from_le_bytes(idx[entry..entry + 4].try_into().unwrap()) as u64;
    assert!(off >= 64, "{off}");
    flip(&seg, off as usize + 20);
    let entries = cli.session_entries();

    let run = cli.run(&["fork", &id, "--at", "8", "--id", "child"]);
    let err = run.fails(1);
    assert!(err.contains("00000000000000000000.seg"), "{err}");
    assert!(err.contains(&format!("offset {off}")), "{err}");
    assert!(err.contains("seq 4"), "{err}");
    assert_eq!(run.stdout, "");
    assert_eq!(cli.session_entries(), entries, "no child left behind");

    // Before the damage, the fork works and its copy is sound.
    let run = cli.run(&["fork", &id, "--at", "4", "--id", "child"]);
    assert_eq!(run.ok().trim_end(), "child");
    cli.run(&["verify", "child"]).ok();
}
