//! `import --from` parsed a line of any length, and built its event, before the event's size
//! was checked: a 100 MiB line took about 1 GB of memory (10 × the line) before it was refused
//! (QA pass of 2026-12-08). A line longer than the store's `max_event_size` is now refused
//! first, named with its length, and a first line that long is not even read whole.

use agentlog::import::{import_paths, Options};
use agentlog::store::Store;

#[test]
fn a_line_longer_than_the_largest_event_is_refused_before_it_is_parsed() {
    let long = "x".repeat(200 << 10);
    let user = |uuid: &str, text: &str| {
        format!(
            r#"{{"parentUuid":null,"type":"user","message":{{"role":"user","content":"{text}"}},"uuid":"{uuid}","timestamp":"2026-06-09T05:00:00.000Z","sessionId":"big"}}"#
        )
    };
    for (name, lines, at) in [
        ("first.jsonl", vec![user("u1", &long)], 1),
        (
            "third.jsonl",
            vec![user("u1", "hi"), user("u2", "there"), user("u3", &long)],
            3,
        ),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let store_dir = tmp.path().join("store");
        std::fs::create_dir(&store_dir).unwrap();
        std::fs::write(
            store_dir.join("agentlog.toml"),
            "max_event_size = \"64KiB\"\n",
        )
        .unwrap();
        let file = tmp.path().join(name);
        std::fs::write(&file, lines.join("\n") + "\n").unwrap();
        let store = Store::open(&store_dir).unwrap();
        let summary = import_paths(
            &store,
            std::slice::from_ref(&file),
            &Options::default(),
            |_, _| {},
        )
        .unwrap();
        assert_eq!(summary.failed, 1, "{summary:?}");
        assert!(summary.created.is_empty(), "{summary:?}");
        let size = lines[at - 1].len();
        let said = summary.warnings.join("\n");
        assert!(
            said.contains(&format!("line {at}: event of {size} bytes exceeds")),
            "{said}"
        );
    }
}
