//! One module per command group.

pub mod append;
pub mod close;
pub mod create;
pub mod derive;
pub mod export;
pub mod fork;
pub mod import;
pub mod ls;
pub mod manage;
pub mod recover;
pub mod replay;
pub mod restore;
pub mod search;
pub mod secrets;
pub mod ship;
pub mod show;
pub mod stats;
pub mod status;
pub mod verify;
pub mod view;

use std::io::Write;

use agentlog::event::{Map, Value};

/// Writes one line of JSON to standard output.
pub fn print_json(value: &Value) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{value}")?;
    out.flush()?;
    Ok(())
}

/// A JSON object from members in order (names are unique by construction at the call sites).
pub fn object(members: Vec<(&str, Value)>) -> Value {
    let mut m = Map::new();
    for (k, v) in members {
        // A repeated name would be a bug at the call site; the first one wins.
        let _ = m.push(k, v);
    }
    Value::Object(m)
}
