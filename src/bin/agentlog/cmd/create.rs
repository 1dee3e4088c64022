//! `agentlog create [--id ID] [--title T]`: a new, empty session.

use std::process::ExitCode;

use anyhow::{anyhow, Result};

use agentlog::store::NewSession;

use crate::target::Ctx;

/// Create an empty session and print its id
///
/// The id is --id, else a new unique, time-sortable one. An id that exists is refused. The store
/// is created when missing. Prints the id alone on stdout; then `agentlog append ID` adds events.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The session id (1 to 128 characters from A-Z a-z 0-9 . _ -; one may start with -)
    #[arg(long, allow_hyphen_values = true)]
    id: Option<String>,
    /// The session title
    #[arg(long)]
    title: Option<String>,
}

pub fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    if let Some(id) = &args.id {
        agentlog::session::validate_id(id).map_err(|e| anyhow!("{e}"))?;
    }
    let store = ctx.open_store()?;
    let new = NewSession {
        id: args.id,
        title: args.title,
        ..NewSession::default()
    };
    let id = create(ctx, &store, new)?;
    outln!("{id}")?;
    Ok(ExitCode::SUCCESS)
}

/// Creates the session (closed again at once); returns its id.
pub fn create(ctx: &Ctx, store: &agentlog::store::Store, new: NewSession) -> Result<String> {
    let session = store.create(new).map_err(|e| match e {
        agentlog::Error::Exists(id) => anyhow!(
            "cannot create session {id:?}: it exists already in store {} (choose another id, or \
             leave --id out for a new one)",
            ctx.shown()
        ),
        other => ctx.error("cannot create a session in store", other),
    })?;
    let id = session.id();
    session
        .close()
        .map_err(|e| crate::target::explain(e, &id))?;
    Ok(id)
}
