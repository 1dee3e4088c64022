//! `agentlog ship --nats URL [--stream NAME] [--replicas N] (SESSION…|--all) [--follow]` and
//! `agentlog ship --status`: sessions to a NATS JetStream stream (the library's `ship` module).

use std::process::ExitCode;

use agentlog::ship::{self, Remote, Sessions, ShipOptions};
use anyhow::{anyhow, Result};

use crate::cmd::{object, print_json};
use crate::target::Ctx;

/// Ship sessions to a NATS JetStream stream
///
/// Publishes every event of the sessions, in seq order, to subject agentlog.<session>.events of
/// the stream (created when missing: file storage, --replicas replicas, subjects agentlog.>),
/// and each session's metadata (header, state) to agentlog.<session>.meta. A session's cursor
/// (kept in the store, under ship/<stream>/) moves only past events the stream acknowledged:
/// run it again after a crash, a network loss or a server restart and it goes on from there,
/// with no gap and no duplicate. --follow keeps shipping new appends and new sessions until
/// interrupted by SIGINT or SIGTERM, which stop it cleanly, every cursor written, exit 0 (every
/// session looked at every 50 ms, one appended to lately every 5 ms).
/// --status prints, per session, the shipped seq against the local length (no server needed);
/// with --nats also what the stream holds of it (its event messages and last seq).
#[derive(Debug, clap::Args)]
#[command(
    override_usage = "agentlog ship [OPTIONS] --nats <URL> <SESSIONS>...\n       agentlog ship [OPTIONS] --nats <URL> --all\n       agentlog ship --status [--nats <URL>] [SESSIONS]..."
)]
pub struct Args {
    /// The sessions (ids in the store)
    #[arg(required_unless_present_any = ["all", "status"])]
    sessions: Vec<String>,
    /// Every session of the store (and, with --follow, every new one); one that cannot be
    /// shipped (another history in the stream, a damaged log) is named and left out
    #[arg(long, conflicts_with = "sessions")]
    all: bool,
    /// The NATS server, e.g. nats://127.0.0.1:4222 (with --status: also ask the stream)
    #[arg(long, value_name = "URL", required_unless_present = "status")]
    nats: Option<String>,
    /// The JetStream stream
    #[arg(long, value_name = "NAME", default_value = ship::DEFAULT_STREAM)]
    stream: String,
    /// Replicas of a stream created by this command (1 to 5)
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=5))]
    replicas: usize,
    /// Keep shipping new appends and new sessions until interrupted
    #[arg(long)]
    follow: bool,
    /// Print the shipped seq of each session against its local length (and, with --nats, the
    /// stream's messages and last seq of it)
    #[arg(long, conflicts_with_all = ["follow", "sessions", "all"])]
    status: bool,
    /// With --status: one JSON object per line, {"session","shipped","local"} (with --nats also
    /// "stream_events" and "stream_last_seq")
    #[arg(long, requires = "status")]
    json: bool,
}

/// One line of `ship --status`.
fn print_status(r: &ship::ShipStatus, json: bool) -> Result<()> {
    if json {
        let mut members = vec![
            ("session", r.id.clone().into()),
            ("shipped", r.shipped.into()),
            (
                "local",
                r.local.map_or(agentlog::event::Value::Null, Into::into),
            ),
        ];
        if let Some(s) = &r.stream {
            members.push(("stream_events", s.events.into()));
            members.push((
                "stream_last_seq",
                s.last_seq.map_or(agentlog::event::Value::Null, Into::into),
            ));
        }
        return print_json(&object(members));
    }
    let local = r.local.map_or_else(|| "-".to_string(), |n| n.to_string());
    let behind = match r.local {
        Some(n) if n > r.shipped => format!("  ({} to ship)", n - r.shipped),
        Some(_) => "  (shipped)".to_string(),
        None => "  (deleted)".to_string(),
    };
    let stream = match &r.stream {
        None => String::new(),
        Some(s) => match s.last_seq {
            None => "  stream: none".to_string(),
            Some(last) if s.events == last + 1 => {
                format!("  stream: {} events, last seq {last}", s.events)
            }
            // A stream missing some of the seqs (deleted or expired by its limits), or holding
            // one twice (published outside agentlog's ship).
            Some(last) if s.events <= last => format!(
                "  stream: {} events, last seq {last} ({} seqs missing)",
                s.events,
                last + 1 - s.events
            ),
            Some(last) => format!(
                "  stream: {} events, last seq {last} (some seqs twice)",
                s.events
            ),
        },
    };
    outln!("{}  {}/{}{behind}{stream}", r.id, r.shipped, local)?;
    Ok(())
}

pub fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    // Shipping only reads the store: a mistyped --store is an error, never a new store.
    ctx.require()?;
    let store = ctx.open_store()?;
    if args.status {
        let rows = match &args.nats {
            None => {
                ship::status(&store, &args.stream).map_err(|e| ctx.error("cannot read store", e))?
            }
            Some(url) => {
                let options = ShipOptions {
                    stream: args.stream.clone(),
                    ..ShipOptions::default()
                };
                ship::runtime()?
                    .block_on(async { Remote::open(url, options).await?.status(&store).await })
                    .map_err(|e| anyhow!("ship --status: {e}"))?
            }
        };
        for r in &rows {
            print_status(r, args.json)?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    if !args.all && args.sessions.is_empty() {
        return Err(anyhow!("name the sessions to ship, or give --all"));
    }
    let url = args.nats.ok_or_else(|| anyhow!("--nats URL is required"))?;
    let options = ShipOptions {
        stream: args.stream,
        replicas: args.replicas,
        ..ShipOptions::default()
    };
    let rt = ship::runtime()?;
    rt.block_on(async {
        let remote = Remote::connect(&url, options).await?;
        if args.follow {
            let sessions = if args.all {
                Sessions::All
            } else {
                Sessions::Ids(args.sessions.clone())
            };
            // Until SIGINT or SIGTERM: then every cursor is written and the command exits 0.
            let stop = crate::cmd::interrupted();
            let shipped = |id: &str, r: &ship::ShipReport| {
                eprintln!("{id}: shipped {} (cursor {})", r.shipped, r.cursor);
            };
            if !args.all {
                // Named sessions: one that cannot be shipped stops the command.
                return remote
                    .follow(&store, sessions, stop, shipped)
                    .await
                    .map(|()| 0);
            }
            // Every session: one that cannot be shipped is named and left out.
            return remote
                .follow_skipping(&store, sessions, stop, shipped, |id, e| {
                    eprintln!("{id}: not shipped, left out until ship restarts: {e}");
                })
                .await
                .map(|()| 0);
        }
        let ids = if args.all {
            // Deleted ones too: their deletion is shipped (metadata only).
            store.ids(agentlog::store::Deleted::Include)?
        } else {
            args.sessions.clone()
        };
        // A session that cannot be shipped (another history in the stream, a damaged log) is
        // named and the others are shipped; a failure of the server or the network stops it.
        let mut failed = 0usize;
        for id in ids {
            match remote.ship(&store, &id).await {
                Ok(r) => outln!("{id}: {} events shipped, cursor {}", r.shipped, r.cursor)
                    .map_err(|e| agentlog::Error::Remote(e.to_string()))?,
                Err(e @ agentlog::Error::Remote(_)) => return Err(e),
                Err(e) => {
                    eprintln!("ship: {id}: not shipped: {e}");
                    failed += 1;
                }
            }
        }
        Ok(failed)
    })
    .map_err(|e| anyhow!("ship: {e}"))
    .and_then(|failed| match failed {
        0 => Ok(ExitCode::SUCCESS),
        1 => Err(anyhow!("ship: 1 session not shipped (named above)")),
        n => Err(anyhow!("ship: {n} sessions not shipped (named above)")),
    })
}
