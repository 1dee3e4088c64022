//! Regressions of the cli layer: one module per bug that was fixed (each was a
//! `tests/regress_*.rs` file of its own); every test's doc comment says what went wrong.

mod concurrent_imports {
    use crate::cli_common;

    use cli_common::{example, Cli};

    /// Imports running at the same time into one store removed each other's unfinished folders
    /// (each import first cleared "leftovers" whose lock it could take, and a running import does
    /// not hold its lock at every stage): imports exited 0 and left sessions without session.json.
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
}

mod fork_copies_damage {
    use crate::cli_common;

    use cli_common::{flip, segments, Cli};

    /// `fork --at N` copied the records of the segment it cuts without checking them: a parent with
    /// a damaged record before N gave a child damaged from the start, and the fork said nothing.
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
}

mod fork_unsealed_segment {
    use crate::cli_common;
    use testkit as common;

    use cli_common::Cli;

    /// Sets the state field of an index header (byte 12; 1 = open, the seal not finished).
    fn mark_open(idx: &std::path::Path) {
        common::rewrite_header(idx, 12, &1u32.to_le_bytes());
    }

    /// `fork` stopped at the first segment before the last one whose seal had not finished (the
    /// writer seals in the background, and a crash can leave a seal unfinished): it copied that
    /// segment and no later one, so the fork reported N events and held fewer.
    #[test]
    fn a_fork_past_an_unsealed_segment_holds_every_event_it_reports() {
        let cli = Cli::with_config("segment_size = \"4KiB\"\n");
        let mut lines = String::new();
        let text = "x".repeat(300);
        for turn in 1..=20u64 {
            let seq = (turn - 1) * 3;
            lines.push_str(&format!(
            "{{\"type\":\"turn/start\",\"seq\":{seq},\"time\":1,\"data\":{{\"turn\":{turn}}}}}\n\
             {{\"type\":\"user/message\",\"seq\":{},\"time\":1,\"data\":{{\"role\":\"user\",\"content\":[{{\"type\":\"text\",\"text\":\"{text}\"}}]}}}}\n\
             {{\"type\":\"turn/end\",\"seq\":{},\"time\":1,\"data\":{{\"turn\":{turn},\"reason\":{{\"kind\":\"completed\"}}}}}}\n",
            seq + 1,
            seq + 2
        ));
        }
        let id = cli
            .run_with(&["import", "-", "--id", "p"], lines.as_bytes())
            .ok()
            .trim_end()
            .to_string();
        let dir = cli.session_dir(&id);
        let mut idx: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "idx"))
            .collect();
        idx.sort();
        assert!(idx.len() >= 4, "{idx:?}");
        mark_open(&idx[1]); // the second segment's seal did not finish

        let child = cli.run(&["fork", &id, "--at", "40", "--id", "f"]);
        assert_eq!(child.ok().trim_end(), "f");
        let parent = cli.run(&["export", &id]).ok().to_string();
        let forked = cli.run(&["export", "f"]).ok().to_string();
        let first: Vec<&str> = parent.lines().take(40).collect();
        assert_eq!(forked.lines().collect::<Vec<_>>(), first);
        cli.run(&["verify", "f"]).ok();
        let next = r#"{"type":"user/message","data":{"role":"user","content":[]}}"#;
        let run = cli.run_with(&["append", "f", "--ack"], format!("{next}\n").as_bytes());
        assert_eq!(run.ok(), "40\n");
    }
}

mod header_nulls {
    use crate::cli_common;

    use agentlog::event::{
        parse_header_line, parse_json, EventData, Map, Opt, SystemMessage, Value,
    };
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
            .open_reader(id)
            .unwrap()
            .export(&mut out, agentlog::session::HeaderLine::Include, |_| {})
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

    /// The session header lost data between import and `export --header`: a `null` title, cwd, parentSession or seedLength was dropped, and unknown header members named like session.json's own members (`state`, `config`, …) were lost or taken as the store's.
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

    /// The session header lost data between import and `export --header`: a `null` title, cwd, parentSession or seedLength was dropped, and unknown header members named like session.json's own members (`state`, `config`, …) were lost or taken as the store's.
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

    /// The session header lost data between import and `export --header`: a `null` title, cwd, parentSession or seedLength was dropped, and unknown header members named like session.json's own members (`state`, `config`, …) were lost or taken as the store's.
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
        assert_eq!(store.ids(agentlog::store::Deleted::Skip).unwrap().len(), 24);
    }

    /// The session header lost data between import and `export --header`: a `null` title, cwd, parentSession or seedLength was dropped, and unknown header members named like session.json's own members (`state`, `config`, …) were lost or taken as the store's.
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

    /// The session header lost data between import and `export --header`: a `null` title, cwd, parentSession or seedLength was dropped, and unknown header members named like session.json's own members (`state`, `config`, …) were lost or taken as the store's.
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
        assert!(store.open_session("a1").unwrap().append(system()).is_err());
        store.unarchive("a1").unwrap();
        assert_eq!(store.info("a1").unwrap().state, SessionState::Active);
        assert_eq!(export(&store, "a1"), text);

        // Reopened for writing, changed metadata is saved and the rest kept.
        let session = store.open_session("a1").unwrap();
        session.append(system()).unwrap();
        session
            .update_meta(|m| m.config = Some(Value::Bool(true)))
            .unwrap();
        session.close().unwrap();
        let meta = store.open_reader("a1").unwrap().meta().clone();
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

    /// The session header lost data between import and `export --header`: a `null` title, cwd, parentSession or seedLength was dropped, and unknown header members named like session.json's own members (`state`, `config`, …) were lost or taken as the store's.
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
        let meta = store.open_reader("old").unwrap().meta().clone();
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
        let session = store.open_session("old").unwrap();
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
        assert!(store.open_session("old").unwrap().append(system()).is_err());
    }

    /// The session header lost data between import and `export --header`: a `null` title, cwd, parentSession or seedLength was dropped, and unknown header members named like session.json's own members (`state`, `config`, …) were lost or taken as the store's.
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
}

mod hostile_header_numbers {
    use crate::cli_common;
    use testkit as common;

    use std::path::Path;
    use std::time::Duration;

    use agentlog::log::{Log, LogReader, Options};
    use cli_common::Cli;

    /// Writes `value` at `at` in a 64-byte file header, with the header's crc fixed.
    fn patch_header(path: &Path, at: usize, value: u64) {
        common::rewrite_header(path, at, &value.to_le_bytes());
    }

    fn files(dir: &Path, ext: &str) -> Vec<std::path::PathBuf> {
        let mut v: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == ext))
            .collect();
        v.sort();
        v
    }

    /// Numbers from file headers and from callers overflowed: an index header `count` of 2^62 made
    /// every open panic in debug builds (and work by accident in release), a segment header base seq
    /// near u64::MAX panicked or gave self-contradicting errors, and `wait(Duration::MAX)` panicked.
    #[test]
    fn a_huge_index_count_is_a_wrong_index_not_a_panic() {
        let cli = Cli::new();
        let id = cli.import_example("coding-session", &[]);
        let idx = files(&cli.session_dir(&id), "idx")[0].clone();
        patch_header(&idx, 40, 1 << 62); // count
        assert_eq!(cli.run(&["export", &id]).ok().lines().count(), 107);
        let verify = cli.run(&["verify", &id]);
        assert!(verify.ok().contains("index"), "{}", verify.stdout);
        cli.run(&["ls"]).ok();
        // A writer open rebuilds it.
        cli.run(&["recover", &id]).ok();
        assert!(!cli.run(&["verify", &id]).ok().contains("note"));
    }

    /// Numbers from file headers and from callers overflowed: an index header `count` of 2^62 made
    /// every open panic in debug builds (and work by accident in release), a segment header base seq
    /// near u64::MAX panicked or gave self-contradicting errors, and `wait(Duration::MAX)` panicked.
    #[test]
    fn a_base_seq_near_the_end_of_u64_is_named_damage() {
        let cli = Cli::new();
        let id = cli.import_example("fix-typo", &[]);
        let dir = cli.session_dir(&id);
        let seg = files(&dir, "seg")[0].clone();
        let base = u64::MAX - 5;
        patch_header(&seg, 16, base);
        let renamed = dir.join(format!("{base:020}.seg"));
        std::fs::rename(&seg, &renamed).unwrap();
        std::fs::remove_file(files(&dir, "idx")[0].clone()).unwrap();
        for args in [vec!["export", id.as_str()], vec!["verify", id.as_str()]] {
            let run = cli.run(&args);
            run.fails(1);
            let all = format!("{}{}", run.stdout, run.stderr);
            assert!(all.contains(&format!("{base:020}.seg")), "{args:?}: {all}");
            assert!(all.contains("base seq"), "{args:?}: {all}");
        }
    }

    /// Numbers from file headers and from callers overflowed: an index header `count` of 2^62 made
    /// every open panic in debug builds (and work by accident in release), a segment header base seq
    /// near u64::MAX panicked or gave self-contradicting errors, and `wait(Duration::MAX)` panicked.
    #[test]
    fn waiting_with_the_longest_timeout_waits_for_the_next_append() {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path().join("log"), Options::default()).unwrap();
        log.append(b"first").unwrap();
        let mut reader = LogReader::open(dir.path().join("log")).unwrap();
        assert_eq!(reader.len(), 1);
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(50));
                log.append(b"second").unwrap();
            });
            assert_eq!(reader.wait(Duration::MAX).unwrap(), 2);
        });
        let mut attached = log.reader();
        let len = attached.len();
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(50));
                log.append(b"third").unwrap();
            });
            assert_eq!(attached.wait(Duration::MAX).unwrap(), len + 1);
        });
    }
}

mod killed_import_leftover {
    use crate::cli_common;

    use std::io::Write;
    use std::process::Stdio;
    use std::time::{Duration, Instant};

    use cli_common::{example, Cli};

    /// A killed import left its hidden `sessions/.import-…` folder, which `ls`, `search`,
    /// `stats --all` and `verify --all` took for a session (one that could not be opened), and no
    /// command ever removed it.
    #[test]
    fn a_killed_import_leaves_nothing_that_looks_like_a_session() {
        let cli = Cli::new();
        let id = cli.import_example("fix-typo", &[]);
        let lines = std::fs::read_to_string(example("fix-typo.jsonl")).unwrap();

        // An import that reads half the file, then waits for more: killed while it waits.
        let mut child = cli
            .command(&["import", "-", "--id", "slow"])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let half: Vec<&str> = lines.lines().take(5).collect();
        stdin
            .write_all((half.join("\n") + "\n").as_bytes())
            .unwrap();
        stdin.flush().unwrap();
        let sessions = cli.store().join("sessions");
        let started = Instant::now();
        let temp = loop {
            let found = std::fs::read_dir(&sessions)
                .unwrap()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .find(|n| n.starts_with(".import"));
            if let Some(name) = found {
                // Its events are being written: give it a moment to write the ones it has.
                std::thread::sleep(Duration::from_millis(200));
                break name;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "no import folder appeared"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        child.kill().unwrap();
        child.wait().unwrap();
        drop(stdin);
        assert!(sessions.join(&temp).exists(), "the leftover is there");

        // Nothing store-wide sees it.
        let ls = cli.run(&["ls", "--json"]);
        let listed: serde_json::Value = serde_json::from_str(ls.ok()).unwrap();
        let ids: Vec<&str> = listed
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, [id.as_str()]);
        let verify = cli.run(&["verify", "--all"]);
        assert!(!verify.ok().contains(".import"), "{}", verify.stdout);
        let stats: serde_json::Value =
            serde_json::from_str(cli.run(&["stats", "--all", "--json"]).ok()).unwrap();
        assert_eq!(stats["sessions"], 1);
        assert_eq!(stats["events"], 10);
        let found = cli.run(&["search", "--type", "turn/start", "--json"]);
        assert_eq!(found.ok().lines().count(), 1, "{}", found.stdout);

        // The next import (here of the same id) removes it and succeeds.
        let run = cli.run(&[
            "import",
            example("fix-typo.jsonl").to_str().unwrap(),
            "--id",
            "slow",
        ]);
        assert_eq!(run.ok().trim_end(), "slow");
        assert!(!sessions.join(&temp).exists(), "the leftover was removed");
        assert_eq!(cli.session_entries(), [id.as_str(), "slow"]);
    }
}

mod search_tool_repeated_ids {
    use crate::cli_common;

    use cli_common::Cli;

    /// `search --tool` matched an `approval/decision` to a tool by `(turn, callId)`: with call ids
    /// repeated across the steps of a turn, a decision about a `read` call in step 2 showed up under
    /// `--tool bash` because step 1 had a `bash` call with the same id.
    #[test]
    fn a_decision_belongs_to_the_tool_of_its_own_step() {
        let lines = [
            r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#,
            r#"{"type":"step/start","seq":1,"time":2,"data":{"turn":1,"step":1}}"#,
            r#"{"type":"tool/call","seq":2,"time":3,"data":{"turn":1,"step":1,"callId":"x","name":"bash","arguments":"{}"}}"#,
            r#"{"type":"tool/result","seq":3,"time":4,"data":{"turn":1,"step":1,"message":{"role":"tool","toolName":"bash","content":"ok","isError":false},"callId":"x"}}"#,
            r#"{"type":"step/end","seq":4,"time":5,"data":{"turn":1,"step":1}}"#,
            r#"{"type":"step/start","seq":5,"time":6,"data":{"turn":1,"step":2}}"#,
            r#"{"type":"tool/call","seq":6,"time":7,"data":{"turn":1,"step":2,"callId":"x","name":"read","arguments":"{}"}}"#,
            r#"{"type":"approval/request","seq":7,"time":8,"data":{"turn":1,"step":2,"callId":"x","tool":"read"}}"#,
            r#"{"type":"approval/decision","seq":8,"time":9,"data":{"turn":1,"step":2,"callId":"x","decision":"denied"}}"#,
            r#"{"type":"tool/result","seq":9,"time":10,"data":{"turn":1,"step":2,"message":{"role":"tool","toolName":"read","content":"denied","isError":true},"callId":"x"}}"#,
            r#"{"type":"step/end","seq":10,"time":11,"data":{"turn":1,"step":2}}"#,
            r#"{"type":"turn/end","seq":11,"time":12,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
        ];
        let cli = Cli::new();
        let input = lines.join("\n") + "\n";
        let id = cli
            .run_with(&["import", "-"], input.as_bytes())
            .ok()
            .trim_end()
            .to_string();
        let seqs = |tool: &str| -> Vec<u64> {
            cli.run(&["search", "--session", &id, "--tool", tool, "--json"])
                .ok()
                .lines()
                .map(|l| {
                    let v: serde_json::Value = serde_json::from_str(l).unwrap();
                    v["event"]["seq"].as_u64().unwrap()
                })
                .collect()
        };
        assert_eq!(seqs("bash"), [2, 3]);
        assert_eq!(seqs("read"), [6, 7, 8, 9]);
    }
}

mod store_wide_damage {
    use crate::cli_common;

    use cli_common::{flip, segments, Cli};

    /// One damaged session stopped `search` (over the store) and `stats --all` with an error that
    /// named neither the session nor what to do, and the other sessions were not searched or counted.
    #[test]
    fn a_damaged_session_is_named_and_skipped_by_store_wide_search_and_stats() {
        let cli = Cli::new();
        let good = cli.import_example("fix-typo", &["--id", "b-good"]);
        let bad = cli.import_example("fix-typo", &["--id", "a-bad"]);
        let seg = segments(&cli.session_dir(&bad))[0].clone();
        flip(&seg, 64 + 20); // inside the first record
        let clean: serde_json::Value = {
            let other = Cli::new();
            other.import_example("fix-typo", &[]);
            serde_json::from_str(other.run(&["stats", "--all", "--json"]).ok()).unwrap()
        };

        let run = cli.run(&["stats", "--all", "--json"]);
        let err = run.fails(1);
        assert!(err.contains("session a-bad was skipped"), "{err}");
        assert!(err.contains("agentlog verify a-bad"), "{err}");
        let stats: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        assert_eq!(stats["sessions"], 1);
        assert_eq!(stats["events"], clean["events"]);
        assert_eq!(stats["byType"], clean["byType"]);

        let run = cli.run(&["search", "--type", "turn/start", "--json"]);
        let err = run.fails(1);
        assert!(err.contains("session a-bad was skipped"), "{err}");
        let sessions: Vec<String> = run
            .stdout
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["session"].to_string())
            .collect();
        assert_eq!(sessions, [format!("\"{good}\"")]);

        // Without the damage both succeed.
        std::fs::remove_dir_all(cli.session_dir(&bad)).unwrap();
        cli.run(&["stats", "--all", "--json"]).ok();
        cli.run(&["search", "--type", "turn/start"]).ok();
    }
}

mod verify_all_cwd {
    use crate::cli_common;

    use cli_common::Cli;

    /// `verify --all` looked each store id up as a SESSION argument, so a folder of the same name in
    /// the current directory made it check that folder or abort; and a store session whose id named
    /// a folder in the current directory could not be reached at all.
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
}

mod messages_of_the_2026_12_07_sweep {
    use crate::cli_common;

    use cli_common::{example, segments, Cli};

    /// Purging an empty session said it "holds seqs 0..0".
    #[test]
    fn purge_of_an_empty_session_says_it_holds_no_event() {
        let cli = Cli::new();
        cli.run(&["create", "--id", "empty"]).ok();
        let said = cli
            .run(&["purge", "empty", "--seq", "0..0"])
            .fails(1)
            .to_string();
        assert!(said.contains("holds no event"), "{said}");
    }

    /// `redact nosuch` printed the error, then "nothing to redact".
    #[test]
    fn redact_of_a_missing_session_says_only_the_error() {
        let cli = Cli::new();
        cli.run(&["create", "--id", "s"]).ok();
        let said = cli.run(&["redact", "nosuch"]).fails(1).to_string();
        assert!(said.contains("nosuch"), "{said}");
        assert!(!said.contains("nothing to redact"), "{said}");
    }

    /// A JSONL file given as SESSION got "FILE/session.json: Not a directory".
    #[test]
    fn a_file_given_as_a_session_is_named_a_file() {
        let cli = Cli::new();
        cli.run(&["create", "--id", "s"]).ok();
        let file = example("fix-typo.jsonl");
        let said = cli
            .run(&["show", file.to_str().unwrap()])
            .fails(1)
            .to_string();
        assert!(said.contains("is a file, not a session"), "{said}");
        assert!(said.contains("agentlog import"), "{said}");
    }

    /// `fork s --id 'bad id'` blamed the source session: "session s: invalid session id".
    #[test]
    fn a_bad_fork_id_is_the_id_options_error() {
        let cli = Cli::new();
        cli.import_example("fix-typo", &["--id", "s"]);
        let said = cli
            .run(&["fork", "s", "--at", "1", "--id", "bad id"])
            .fails(1)
            .to_string();
        assert!(
            said.starts_with("error: --id: invalid session id"),
            "{said}"
        );
    }

    /// `purge SESSION` without a range said `--turn` was required, never naming `--seq`;
    /// `archive` alone never named `--idle-days`.
    #[test]
    fn usage_errors_name_every_way_to_say_what() {
        let cli = Cli::new();
        cli.import_example("fix-typo", &["--id", "s"]);
        let said = cli.run(&["purge", "s"]).fails(2).to_string();
        assert!(said.contains("--turn") && said.contains("--seq"), "{said}");
        let said = cli.run(&["archive"]).fails(2).to_string();
        assert!(said.contains("--idle-days"), "{said}");
    }

    /// "no session" from `archive`, `delete`, `unarchive`, `secrets`, `redact` and `purge`
    /// left out the store it looked in, which every other command names.
    #[test]
    fn no_session_names_the_store_everywhere() {
        let cli = Cli::new();
        cli.run(&["create", "--id", "s"]).ok();
        let store = cli.store().display().to_string();
        for args in [
            vec!["archive", "nosuch"],
            vec!["delete", "nosuch"],
            vec!["unarchive", "nosuch"],
            vec!["secrets", "nosuch"],
            vec!["redact", "nosuch"],
            vec!["purge", "nosuch", "--turn", "1"],
            vec!["show", "nosuch"],
        ] {
            let run = cli.run(&args);
            assert!(
                run.stderr
                    .contains(&format!("no session \"nosuch\" in store {store}")),
                "{args:?}: {}",
                run.stderr
            );
        }
    }

    /// `show --type ''` answered "no event of type ;".
    #[test]
    fn an_empty_type_filter_is_a_usage_error() {
        let cli = Cli::new();
        cli.import_example("fix-typo", &["--id", "s"]);
        cli.run(&["show", "s", "--type", ""]).fails(2);
        cli.run(&["search", "--type", ""]).fails(2);
    }

    /// One damaged record was reported twice by `verify` (the record, and "checkpoint: corrupt
    /// log" for the same offset), and after `recover --salvage` cut the log to nothing, `verify`
    /// still noted the old checkpoint as stale.
    #[test]
    fn damage_is_reported_once_and_a_salvage_leaves_a_sound_checkpoint() {
        let cli = Cli::new();
        cli.import_example("fix-typo", &["--id", "s"]);
        cli.run(&["status", "s"]).ok();
        let seg = segments(&cli.session_dir("s"))[0].clone();
        let mut bytes = std::fs::read(&seg).unwrap();
        // Inside the first record (the segment header is 64 bytes).
        bytes[100] ^= 0xff;
        std::fs::write(&seg, bytes).unwrap();
        let run = cli.run(&["verify", "s"]);
        run.fails(1);
        assert!(run.stdout.contains("1 problem(s)"), "{}", run.stdout);
        assert!(!run.stdout.contains("checkpoint:"), "{}", run.stdout);
        let salvaged = cli.run(&["recover", "--salvage", "s"]).ok().to_string();
        assert!(salvaged.contains("(seqs 1 to 9)"), "{salvaged}");
        let run = cli.run(&["verify", "s"]);
        let out = run.ok();
        assert!(!out.contains("checkpoint"), "{out}");
    }
}

mod append_create_race {
    use crate::cli_common;

    use std::io::Write;
    use std::process::Stdio;

    use cli_common::Cli;

    /// Two `append ID --create` started together on a new id: the one that lost the race
    /// mostly said `no session "new"` (it found the other's folder before its files), although
    /// `--create` was given and the other process held the session. The loser now says the
    /// session is open for writing by another process.
    #[test]
    fn the_loser_of_a_create_race_names_the_other_writer() {
        let line = "{\"type\":\"turn/start\",\"data\":{\"turn\":1}}\n";
        for round in 0..5 {
            let cli = Cli::new();
            cli.run(&["create", "--id", "other"]).ok();
            let mut children: Vec<_> = (0..2)
                .map(|_| {
                    cli.command(&["append", "new", "--create"])
                        .stdin(Stdio::piped())
                        .spawn()
                        .unwrap()
                })
                .collect();
            for c in &mut children {
                c.stdin
                    .as_mut()
                    .unwrap()
                    .write_all(line.as_bytes())
                    .unwrap();
            }
            // Both hold their input open a while: the winner keeps the session open.
            std::thread::sleep(std::time::Duration::from_millis(300));
            let outs: Vec<_> = children
                .into_iter()
                .map(|mut c| {
                    drop(c.stdin.take());
                    c.wait_with_output().unwrap()
                })
                .collect();
            let ok = outs.iter().filter(|o| o.status.success()).count();
            assert!(ok >= 1, "round {round}: one of them appends");
            for o in outs.iter().filter(|o| !o.status.success()) {
                // (On a machine slow enough to run the two one after the other, the second
                // finds turn 1 open: a refusal of its line, still never "no session".)
                let said = String::from_utf8_lossy(&o.stderr);
                assert!(
                    said.contains("open for writing by another process")
                        || said.contains("turn/start only when no turn is open"),
                    "round {round}: {said}"
                );
            }
        }
    }
}

mod non_utf8_file_names {
    use crate::cli_common;

    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    use cli_common::{example, Cli};

    /// `import FILE` with a file name that is not UTF-8 (Linux allows any bytes) was refused by
    /// the argument parser, "invalid UTF-8 was detected in one or more arguments", without
    /// saying which. Such a file is now read like any other, by `import` and `import --from`.
    #[test]
    fn files_whose_names_are_not_utf8_are_imported() {
        let cli = Cli::new();
        let import = |args: &[&str], file: &std::path::Path| {
            let out = cli.command(args).arg(file).output().unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let name = cli.dir.path().join(OsStr::from_bytes(b"caf\xe9.jsonl"));
        std::fs::copy(example("fix-typo.jsonl"), &name).unwrap();
        import(&["import", "--id", "s"], &name);
        assert_eq!(cli.run(&["export", "s"]).ok().lines().count(), 10);
        let claude = cli.dir.path().join(OsStr::from_bytes(b"t\xff.jsonl"));
        std::fs::copy(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/data/import/claude-code/marot__spotter__short.jsonl"),
            &claude,
        )
        .unwrap();
        import(&["import", "--from", "auto"], &claude);
    }
}

mod messages_of_the_2026_12_07_polish {
    use crate::cli_common;

    use cli_common::Cli;

    /// `tail` of a session without events printed nothing at all, as if it had not run.
    #[test]
    fn tail_of_an_empty_session_says_so() {
        let cli = Cli::new();
        cli.run(&["create", "--id", "empty"]).ok();
        let run = cli.run(&["tail", "empty"]);
        assert!(run.ok().is_empty(), "stdout keeps only events");
        assert!(
            run.stderr.contains("session empty has no events"),
            "{}",
            run.stderr
        );
    }

    /// The usage lines of `secrets`, `redact`, `ship` and `restore` showed only the form with
    /// session ids, never `--all`.
    #[test]
    fn usage_lines_show_the_all_form() {
        let cli = Cli::new();
        for cmd in ["secrets", "redact", "ship", "restore"] {
            let help = cli.run(&[cmd, "--help"]).ok().to_string();
            let usage: Vec<&str> = help
                .lines()
                .skip_while(|l| !l.starts_with("Usage:"))
                .take_while(|l| !l.trim().is_empty())
                .collect();
            assert!(
                usage.iter().any(|l| l.contains("--all")),
                "{cmd}: {usage:?}"
            );
            assert!(
                usage.iter().any(|l| l.contains("SESSION")),
                "{cmd}: {usage:?}"
            );
        }
    }
}
