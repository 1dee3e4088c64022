//! The session header lost data between import and `export --header`: a `null` title, cwd, parentSession or seedLength was dropped, and unknown header members named like session.json's own members (`state`, `config`, …) were lost or taken as the store's.

mod cli_common;

use agentlog::event::{parse_header_line, parse_json, EventData, Map, Opt, SystemMessage, Value};
use agentlog::session::{SessionMeta, SessionState, META_FILE};
use agentlog::store::{ForkPoint, ImportOptions, Store};
use cli_common::Cli;

/// The first event after a header line.
const EVENT: &str =
    r#"{"type":"user/message","seq":0,"time":1,"data":{"role":"user","content":[]}}"#;

/// The header's optional members in canonical order, and a value for each.
const OPTIONAL: [(&str, &str); 4] = [
    ("title", r#""a title""#),
    ("cwd", r#""/home/dev""#),
    ("parentSession", r#""p1""#),
    ("seedLength", "7"),
];

/// Unknown header members named like the members session.json holds now or held before, or that
/// `ls --json` prints, and one plain one.
const UNKNOWN: [(&str, &str); 7] = [
    ("config", r#"{"model":"m"}"#),
    ("state", r#""x""#),
    ("header", "[1,null]"),
    ("headerExtra", "{}"),
    ("lastEventTime", "null"),
    ("events", "1.0"),
    ("origin", r#"{"kind":"cli"}"#),
];

/// A canonical header line: the known members as `optional` says (absent, `null` or a value, in
/// the order of `OPTIONAL`), then `unknown` in the order given.
fn header(id: &str, optional: [u8; 4], unknown: &[(&str, &str)]) -> String {
    let mut line = format!(r#"{{"type":"session","version":1,"id":"{id}","createdAt":5"#);
    for ((name, value), how) in OPTIONAL.iter().zip(optional) {
        match how {
            0 => {}
            1 => line.push_str(&format!(r#","{name}":null"#)),
            _ => line.push_str(&format!(r#","{name}":{value}"#)),
        }
    }
    for (name, value) in unknown {
        line.push_str(&format!(r#","{name}":{value}"#));
    }
    line.push('}');
    line
}

fn file(header: &str) -> String {
    format!("{header}\n{EVENT}\n")
}

fn import(store: &Store, text: &str) -> String {
    store
        .import(text.as_bytes(), ImportOptions::default(), |_| {})
        .unwrap()
        .id
}

fn export(store: &Store, id: &str) -> String {
    let mut out = Vec::new();
    store
        .reader(id)
        .unwrap()
        .export(&mut out, true, |_| {})
        .unwrap();
    String::from_utf8(out).unwrap()
}

/// Every permutation of `items`.
fn permutations<T: Clone>(items: &[T]) -> Vec<Vec<T>> {
    if items.len() <= 1 {
        return vec![items.to_vec()];
    }
    let mut all = Vec::new();
    for i in 0..items.len() {
        let mut rest = items.to_vec();
        let first = rest.remove(i);
        for mut p in permutations(&rest) {
            p.insert(0, first.clone());
            all.push(p);
        }
    }
    all
}

#[test]
fn the_reported_file_round_trips_through_the_cli() {
    let cli = Cli::new();
    let text = file(
        r#"{"type":"session","version":1,"id":"r1","createdAt":5,"title":null,"cwd":null,"parentSession":null,"seedLength":null,"config":{"model":"m"},"state":"x"}"#,
    );
    let path = cli.dir.path().join("r1.jsonl");
    std::fs::write(&path, &text).unwrap();
    assert_eq!(cli.run(&["import", path.to_str().unwrap()]).ok(), "r1\n");
    let out = cli.run(&["export", "--header", "r1"]);
    out.ok();
    assert_eq!(String::from_utf8(out.raw.clone()).unwrap(), text);

    // The store's own state is not the header's "state": the session is active and takes appends.
    let ls = parse_json(cli.run(&["ls", "--json"]).ok()).unwrap();
    let item = &ls.as_array().unwrap()[0];
    assert_eq!(item.get("state").unwrap().as_str(), Some("active"));
    // A null title or parent is listed as null.
    assert_eq!(item.get("title"), Some(&Value::Null));
    assert_eq!(item.get("parentSession"), Some(&Value::Null));
    assert!(cli.run(&["ls"]).ok().contains("r1"));
    let status = parse_json(cli.run(&["status", "--json", "r1"]).ok()).unwrap();
    assert_eq!(status.get("state").unwrap().as_str(), Some("idle"));
    cli.run_with(
        &["append", "r1"],
        br#"{"type":"system/message","data":{"role":"system","content":[]}}"#,
    )
    .ok();
    let out = cli.run(&["export", "--header", "r1"]);
    out.ok();
    assert!(String::from_utf8(out.raw.clone())
        .unwrap()
        .starts_with(&text));
}

#[test]
fn each_null_alone_and_every_mix_of_absent_null_and_value_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut n = 0;
    for mix in 0..81u32 {
        let optional = [
            (mix % 3) as u8,
            (mix / 3 % 3) as u8,
            (mix / 9 % 3) as u8,
            (mix / 27 % 3) as u8,
        ];
        // The unknown members too, in a different order each time.
        let mut unknown = UNKNOWN.to_vec();
        unknown.rotate_left(mix as usize % UNKNOWN.len());
        unknown.truncate(mix as usize % (UNKNOWN.len() + 1));
        let id = format!("m{mix}");
        let text = file(&header(&id, optional, &unknown));
        assert_eq!(import(&store, &text), id);
        assert_eq!(export(&store, &id), text, "mix {optional:?}");

        // The listing reads the same title and lineage: null and absent both show as none.
        let info = store.info(&id).unwrap();
        assert_eq!(info.state, SessionState::Active);
        assert_eq!(info.title.is_some(), optional[0] == 2);
        assert_eq!(info.parent_session.is_some(), optional[2] == 2);
        assert_eq!(info.seed_length, (optional[3] == 2).then_some(7));
        n += 1;
    }
    assert_eq!(n, 81);
}

#[test]
fn unknown_members_named_like_the_stores_survive_in_any_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let names = [UNKNOWN[0], UNKNOWN[1], UNKNOWN[2], UNKNOWN[6]];
    for (i, unknown) in permutations(&names).into_iter().enumerate() {
        let id = format!("p{i}");
        let text = file(&header(&id, [1, 2, 1, 2], &unknown));
        import(&store, &text);
        assert_eq!(export(&store, &id), text, "{unknown:?}");
    }
    assert_eq!(store.ids(false).unwrap().len(), 24);
}

#[test]
fn a_header_in_another_order_exports_canonical_and_stable() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let given = r#"{"state":"x","seedLength":null,"id":"o1","config":1,"type":"session","title":null,"createdAt":5,"header":{},"version":1,"cwd":"/w"}"#;
    import(&store, &file(given));
    let expected = r#"{"type":"session","version":1,"id":"o1","createdAt":5,"title":null,"cwd":"/w","seedLength":null,"state":"x","config":1,"header":{}}"#;
    let out = export(&store, "o1");
    assert_eq!(out, file(expected));
    // The same header as JSON values, and exporting again changes nothing.
    assert_eq!(
        parse_header_line(given).unwrap(),
        parse_header_line(expected).unwrap()
    );
    store
        .import(
            out.as_bytes(),
            ImportOptions {
                id: Some("o2".into()),
                ..Default::default()
            },
            |_| {},
        )
        .unwrap();
    assert_eq!(
        export(&store, "o2"),
        out.replace(r#""id":"o1""#, r#""id":"o2""#)
    );
}

#[test]
fn archive_unarchive_fork_and_reopen_keep_the_header() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let unknown = [UNKNOWN[1], UNKNOWN[0], UNKNOWN[2]];
    let text = file(&header("a1", [1, 1, 1, 1], &unknown));
    import(&store, &text);

    // session.json is rewritten by archive and unarchive: the header's "state" stays the header's.
    store.archive("a1").unwrap();
    assert_eq!(store.info("a1").unwrap().state, SessionState::Archived);
    assert_eq!(export(&store, "a1"), text);
    assert!(store
        .open_session("a1")
        .unwrap()
        .0
        .append(system())
        .is_err());
    store.unarchive("a1").unwrap();
    assert_eq!(store.info("a1").unwrap().state, SessionState::Active);
    assert_eq!(export(&store, "a1"), text);

    // Reopened for writing, changed metadata is saved and the rest kept.
    let (session, _) = store.open_session("a1").unwrap();
    session.append(system()).unwrap();
    session
        .update_meta(|m| m.config = Some(Value::Bool(true)))
        .unwrap();
    session.close().unwrap();
    let meta = store.reader("a1").unwrap().meta().clone();
    assert_eq!(meta.config, Some(Value::Bool(true)));
    assert_eq!(meta.title, Opt::Null);
    assert!(export(&store, "a1").starts_with(&text));

    // A fork records its lineage and keeps the rest of the header.
    store
        .fork("a1", ForkPoint::At(1), Some("f1".into()))
        .unwrap();
    let fork = export(&store, "f1");
    let fork_header = parse_header_line(fork.lines().next().unwrap()).unwrap();
    assert_eq!(fork_header.title, Opt::Null);
    assert_eq!(fork_header.cwd, Opt::Null);
    assert_eq!(fork_header.parent_session, Opt::Present("a1".into()));
    assert_eq!(fork_header.seed_length, Opt::Present(1));
    let names: Vec<&str> = fork_header.extra.keys().collect();
    assert_eq!(names, ["state", "config", "header"]);
    let info = store.info("f1").unwrap();
    assert_eq!(info.parent_session.as_deref(), Some("a1"));
    assert_eq!(info.seed_length, Some(1));
    assert_eq!(info.state, SessionState::Active);
}

fn system() -> EventData {
    EventData::SystemMessage(SystemMessage {
        content: vec![],
        extra: Map::new(),
    })
}

/// session.json as the version before this fix wrote it: flat, unknown members at the top level.
const OLD_LAYOUT: &str = r#"{"id":"old","title":"t","createdAt":5,"cwd":"/w","state":"active","parentSession":"p","seedLength":1,"config":{"model":"m"},"origin":{"kind":"cli"},"x":[1.0]}"#;

#[test]
fn a_session_json_in_the_older_layout_still_opens() {
    let cli = Cli::new();
    let store = Store::open(cli.store()).unwrap();
    import(&store, &file(&header("old", [0, 0, 0, 0], &[])));
    let dir = store.session_dir("old").unwrap();
    std::fs::write(dir.join(META_FILE), format!("{OLD_LAYOUT}\n")).unwrap();
    let expected_header = r#"{"type":"session","version":1,"id":"old","createdAt":5,"title":"t","cwd":"/w","parentSession":"p","seedLength":1,"origin":{"kind":"cli"},"x":[1.0]}"#;

    // Read as it was: the listing, and the unknown members exported in the header as before.
    let info = store.info("old").unwrap();
    assert_eq!(info.title.as_deref(), Some("t"));
    assert_eq!(info.parent_session.as_deref(), Some("p"));
    assert_eq!(info.seed_length, Some(1));
    assert_eq!(info.created_at, 5);
    assert_eq!(export(&store, "old"), file(expected_header));
    let meta = store.reader("old").unwrap().meta().clone();
    assert_eq!(meta.config.unwrap().to_string(), r#"{"model":"m"}"#);

    // The command line reads it too.
    let ls = parse_json(cli.run(&["ls", "--json"]).ok()).unwrap();
    let item = &ls.as_array().unwrap()[0];
    assert_eq!(item.get("title").unwrap().as_str(), Some("t"));
    assert_eq!(item.get("parentSession").unwrap().as_str(), Some("p"));
    assert!(cli.run(&["ls"]).ok().contains("p@1"));
    cli.run(&["status", "old"]).ok();
    let out = cli.run(&["export", "--header", "old"]);
    out.ok();
    assert_eq!(
        String::from_utf8(out.raw.clone()).unwrap(),
        file(expected_header)
    );

    // It takes appends, and the next change writes the current layout with the same meaning.
    let (session, _) = store.open_session("old").unwrap();
    session.append(system()).unwrap();
    session.close().unwrap();
    store.archive("old").unwrap();
    let text = std::fs::read_to_string(dir.join(META_FILE)).unwrap();
    assert!(text.starts_with(r#"{"header":{"type":"session""#), "{text}");
    // The object, then its checksum line.
    assert!(
        text.lines()
            .next()
            .unwrap()
            .ends_with("\"state\":\"archived\",\"config\":{\"model\":\"m\"}}"),
        "{text}"
    );
    assert!(
        text.lines().nth(1).unwrap().starts_with("{\"crc32\":\""),
        "{text}"
    );
    store.unarchive("old").unwrap();
    assert!(export(&store, "old").starts_with(&file(expected_header)));
    assert_eq!(store.info("old").unwrap().title.as_deref(), Some("t"));

    // An archived session in the older layout stays archived.
    let archived = OLD_LAYOUT.replace(r#""state":"active""#, r#""state":"archived""#);
    std::fs::write(dir.join(META_FILE), archived).unwrap();
    assert_eq!(store.info("old").unwrap().state, SessionState::Archived);
    assert!(store
        .open_session("old")
        .unwrap()
        .0
        .append(system())
        .is_err());
}

#[test]
fn session_json_keeps_header_and_store_members_apart() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let text = file(&header("k1", [1, 0, 0, 2], &[UNKNOWN[1], UNKNOWN[0]]));
    import(&store, &text);
    let path = store.session_dir("k1").unwrap().join(META_FILE);
    let json = std::fs::read_to_string(&path).unwrap();
    // The object (then its checksum line).
    assert_eq!(
        json.lines().next().unwrap(),
        format!(
            "{{\"header\":{},\"state\":\"active\"}}",
            text.lines().next().unwrap()
        )
    );
    // session.json's own unknown members (a newer agentlog's) are kept and never exported.
    let mut meta = SessionMeta::load(path.parent().unwrap()).unwrap();
    let _ = meta.store_extra.push("later", Value::Bool(true));
    meta.save(path.parent().unwrap()).unwrap();
    store.archive("k1").unwrap();
    store.unarchive("k1").unwrap();
    assert!(std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .ends_with(",\"state\":\"active\",\"later\":true}"));
    assert_eq!(export(&store, "k1"), text);
}
