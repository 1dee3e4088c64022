//! `agentlog restore --nats URL [--stream NAME] (SESSION…|--all) [--follow] [--id NEW]`:
//! sessions rebuilt in the local store from a NATS JetStream stream (the library's `ship`
//! module).

use std::process::ExitCode;

use agentlog::ship::{self, Remote, Sessions, ShipOptions};
use anyhow::{anyhow, Result};

use crate::target::Ctx;

/// Restore sessions from a NATS JetStream stream
///
/// Rebuilds the sessions in the local store from what `agentlog ship` published: a session not
/// in the store is created (its `export --header` is the source's, byte for byte); one restored
/// before gets the events it lacks and its current title and state. --follow keeps the store in
/// step with the stream until SIGINT or SIGTERM (a clean stop, exit 0): new events and (with
/// --all) new sessions, so search, stats --all and tail -f work here across every host's
/// sessions.
#[derive(Debug, clap::Args)]
#[command(
    override_usage = "agentlog restore [OPTIONS] --nats <URL> <SESSIONS>...\n       agentlog restore [OPTIONS] --nats <URL> --all"
)]
pub struct Args {
    /// The sessions (ids in the stream)
    #[arg(required_unless_present = "all")]
    sessions: Vec<String>,
    /// Every session of the stream (and, with --follow, every new one); a local session of the
    /// same id that is not the stream's is named and left out
    #[arg(long, conflicts_with = "sessions")]
    all: bool,
    /// The NATS server, e.g. nats://127.0.0.1:4222
    #[arg(long, value_name = "URL")]
    nats: String,
    /// The JetStream stream
    #[arg(long, value_name = "NAME", default_value = ship::DEFAULT_STREAM)]
    stream: String,
    /// Keep restoring new events and new sessions until interrupted
    #[arg(long)]
    follow: bool,
    /// Restore the one SESSION under this id
    #[arg(long, value_name = "NEW", conflicts_with_all = ["all", "follow"])]
    id: Option<String>,
}

pub fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    // A store that does not exist yet is made once the stream is reached: a server that is
    // down (or a stream that does not exist) leaves no empty store behind.
    ctx.exists()?;
    if !args.all && args.sessions.is_empty() {
        return Err(anyhow!("name the sessions to restore, or give --all"));
    }
    if args.id.is_some() && args.sessions.len() != 1 {
        return Err(anyhow!("--id renames one session: name exactly one"));
    }
    let options = ShipOptions {
        stream: args.stream,
        ..ShipOptions::default()
    };
    let rt = ship::runtime()?;
    rt.block_on(async {
        let remote = if args.follow {
            // A central host may start before any host shipped: wait for the stream (and the
            // server), saying so once.
            let mut said = false;
            loop {
                match Remote::open(&args.nats, options.clone()).await {
                    Ok(r) => break r,
                    Err(agentlog::Error::Remote(e)) => {
                        if !said {
                            eprintln!("waiting: {e}");
                            said = true;
                        }
                        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    }
                    Err(e) => return Err(e),
                }
            }
        } else {
            Remote::open(&args.nats, options).await?
        };
        let store = ctx
            .open_store()
            .map_err(|e| agentlog::Error::Invalid(format!("{e:#}")))?;
        let sessions = if args.all {
            Sessions::All
        } else {
            Sessions::Ids(args.sessions.clone())
        };
        if args.follow {
            // Until SIGINT or SIGTERM: then every cursor is written and the command exits 0.
            let stop = crate::cmd::interrupted();
            if !args.all {
                // Named sessions: one that cannot be restored stops the command.
                return remote.restore_follow(&store, sessions, stop, |_| {}).await;
            }
            // Every session: one that cannot be restored is named and left out.
            return remote
                .restore_follow_skipping(
                    &store,
                    sessions,
                    stop,
                    |_| {},
                    |id, e| {
                        eprintln!("{id}: not restored, left out until restore restarts: {e}");
                    },
                )
                .await;
        }
        let reports = match (&sessions, &args.id) {
            (Sessions::All, _) => remote.restore_all(&store).await?,
            (Sessions::Ids(ids), new_id) => {
                let mut out = Vec::new();
                for id in ids {
                    out.push(remote.restore(&store, id, new_id.as_deref()).await?);
                }
                out
            }
        };
        for r in reports {
            outln!("{}: {} events restored, {} in all", r.id, r.restored, r.len)
                .map_err(|e| agentlog::Error::Remote(e.to_string()))?;
        }
        Ok(())
    })
    .map_err(|e| anyhow!("restore: {e}"))?;
    Ok(ExitCode::SUCCESS)
}
