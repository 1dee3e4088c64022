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

/// A future that completes on the first SIGINT or SIGTERM: the `stop` of the commands that
/// follow until interrupted (`ship --follow`, `restore --follow`), which then write what they
/// hold and exit 0. Without a handler, either signal killed them where they stood. The handlers
/// are installed by this call, so a signal that comes before the future is first polled is not
/// lost. Call it inside the command's tokio runtime.
pub fn interrupted() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let handlers = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    );
    async move {
        let (Ok(mut int), Ok(mut term)) = handlers else {
            // No handler could be installed: the signals keep their default action.
            return std::future::pending().await;
        };
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        eprintln!("interrupted: stopping");
    }
}

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
