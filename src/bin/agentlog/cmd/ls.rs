//! `agentlog ls [--json] [--all]`: the sessions of the store.

use std::process::ExitCode;

use anyhow::Result;

use agentlog::event::Value;
use agentlog::store::{Deleted, SessionInfo};

use crate::cmd::print_json;
use crate::output::{date_time, one_line, size, Color, Paint};
use crate::target::{explain, Ctx};

/// List the sessions of the store
///
/// A table of id, state, events, size, created, last event time, parent (when any session has
/// one) and title. --json prints one JSON array of {"id","title","state","events","bytes","createdAt",
/// "lastEventTime","parentSession","seedLength"} (times in epoch milliseconds; null for what is absent).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print one JSON array
    #[arg(long)]
    json: bool,
    /// Include deleted sessions (not yet removed by garbage collection)
    #[arg(long)]
    all: bool,
}

pub fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    let mut infos = Vec::new();
    let mut failed = false;
    ctx.require()?;
    let store = ctx.open_store()?;
    let ids = store
        .ids(if args.all {
            Deleted::Include
        } else {
            Deleted::Skip
        })
        .map_err(|e| ctx.error("cannot list store", e))?;
    for id in ids {
        match store.info(&id) {
            Ok(info) => infos.push(info),
            Err(e) => {
                eprintln!("error: {:#}", explain(e, &id));
                failed = true;
            }
        }
    }
    if args.json {
        print_json(&Value::Array(
            infos.iter().map(SessionInfo::to_json).collect(),
        ))?;
    } else {
        table(&infos)?;
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn table(infos: &[SessionInfo]) -> Result<()> {
    let p = Paint::stdout();
    let with_parent = infos.iter().any(|i| i.parent_session.is_some());
    let mut rows = vec![vec![
        "ID".to_string(),
        "STATE".into(),
        "EVENTS".into(),
        "SIZE".into(),
        "CREATED".into(),
        "LAST EVENT".into(),
    ]];
    if with_parent {
        rows[0].push("FORKED FROM".into());
    }
    rows[0].push("TITLE".into());
    for i in infos {
        let mut row = vec![
            i.id.clone(),
            i.state.as_str().to_string(),
            i.events.to_string(),
            size(i.bytes),
            date_time(i.created_at),
            i.last_event_time.map_or("-".into(), date_time),
        ];
        if with_parent {
            // Lineage: the parent and how many of its events the fork started with.
            row.push(match (&i.parent_session, i.seed_length) {
                (Some(p), Some(n)) => format!("{p}@{n}"),
                (Some(p), None) => p.clone(),
                (None, _) => "-".into(),
            });
        }
        // One line, without control characters (a title could hold escapes or line breaks).
        row.push(one_line(i.title.as_deref().unwrap_or_default(), 80));
        rows.push(row);
    }
    let columns = rows[0].len();
    let widths: Vec<usize> = (0..columns)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    for (n, row) in rows.iter().enumerate() {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            let last = c + 1 == columns;
            let pad = widths[c].saturating_sub(cell.chars().count());
            // Numbers right-aligned.
            let text = if c == 2 || c == 3 {
                format!("{}{cell}", " ".repeat(pad))
            } else if last {
                cell.clone()
            } else {
                format!("{cell}{}", " ".repeat(pad))
            };
            let text = match (n, c) {
                (0, _) => p.paint(Color::Bold, &text),
                (_, 0) => p.paint(Color::Cyan, &text),
                (_, 1) if cell != "active" => p.paint(Color::Yellow, &text),
                _ => text,
            };
            line.push_str(&text);
            if !last {
                line.push_str("  ");
            }
        }
        outln!("{}", line.trim_end())?;
    }
    Ok(())
}
