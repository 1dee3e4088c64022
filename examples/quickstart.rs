//! The library in a few lines: a store, a session, appends checked against the lifecycle rules,
//! the model-visible history, the turn state, canonical JSONL.
//!
//! Run: `cargo run --example quickstart`

use agentlog::event::parse_draft_line;
use agentlog::session::TurnState;
use agentlog::store::{NewSession, Store};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::env::temp_dir().join(format!("agentlog-quickstart-{}", std::process::id()));
    let store = Store::open(&root)?;
    let session = store.create(NewSession::default().title("quickstart"))?;

    // Events as JSONL lines without seq and time: the log assigns them.
    for line in [
        r#"{"type":"turn/start","data":{"turn":1}}"#,
        r#"{"type":"user/message","data":{"role":"user","content":[{"type":"text","text":"List the files."}]}}"#,
        r#"{"type":"step/start","data":{"turn":1,"step":1}}"#,
        r#"{"type":"assistant/message","data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"ls","input":{}}]}}}"#,
        r#"{"type":"tool/call","data":{"turn":1,"step":1,"callId":"c1","name":"ls","arguments":"{}"}}"#,
    ] {
        // `None` only for an assistant/chunk the store is configured not to keep.
        match session.append_draft(parse_draft_line(line)?)? {
            Some(seq) => println!("appended seq {seq}"),
            None => println!("accepted, not kept"),
        }
    }
    // The tool runs: the state says so, and a turn/start now breaks a lifecycle rule.
    assert_eq!(session.state(), TurnState::ToolInvoking);
    let refused = session.append_draft(parse_draft_line(
        r#"{"type":"turn/start","data":{"turn":2}}"#,
    )?);
    println!("refused: {}", refused.unwrap_err());

    for line in [
        r#"{"type":"tool/result","data":{"turn":1,"step":1,"message":{"role":"tool","toolName":"ls","content":"README.md","isError":false},"callId":"c1"}}"#,
        r#"{"type":"step/end","data":{"turn":1,"step":1}}"#,
        r#"{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}"#,
    ] {
        session.append_draft(parse_draft_line(line)?)?;
    }

    // The history a model sees, derived from the log (never stored).
    println!("messages: {}", session.messages().to_value());

    // Any process can read while the writer appends; export is canonical JSONL.
    let reader = session.reader();
    let mut jsonl = Vec::new();
    reader.export(&mut jsonl, agentlog::session::HeaderLine::Include, |_| {})?;
    print!("{}", String::from_utf8_lossy(&jsonl));

    session.close()?;
    std::fs::remove_dir_all(&root)?;
    Ok(())
}
