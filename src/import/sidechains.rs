//! The session `<id>-sidechains`: the inline sidechain lines of a Claude Code main file
//! (subagent traffic of 1.0.x files) as a session of their own, `parentSession` the main one.
//! The lines' raw text stays in the main session (exported from there), so these events carry
//! none. Its `session.json` member `import` is `{"sidechainsOf": <main id>, "resume"?: …}`
//! (`resume`: the Claude Code builder's state for the next run, as a main file's).

use std::path::Path;

use crate::error::Result;
use crate::event::{Map, Opt, Value};
use crate::session::{Session, SessionMeta};
use crate::store::Store;
use crate::util::now_ms;

use super::{claude_code, get, get_str, parse_time, Builder, SrcLine, Summary, META_MEMBER};

/// The sidechains of one main file in one run.
pub(super) struct Sidechains<'a> {
    /// The main session's id.
    pub main: &'a str,
    /// The source file (its name tells a subagent file).
    pub path: &'a Path,
    /// The file as warnings name it.
    pub shown: &'a str,
    /// Leave a turn open at the end ([`super::Options::keep_open`]).
    pub keep_open: bool,
    /// The last run left a turn of the sidechains session open.
    pub left_open: bool,
}

impl Sidechains<'_> {
    /// Builds (or extends) the sidechains session from the lines at `indexes` of `src` (the
    /// inline sidechain lines a build of the main file set aside). With none, a turn an earlier
    /// run left open is closed (unless `keep_open`). Returns whether a turn of the session is
    /// open now. A failure is a warning (the main session is imported); the session is then as
    /// it was.
    pub fn import(
        &self,
        store: &Store,
        src: &[SrcLine<'_>],
        indexes: &[usize],
        summary: &mut Summary,
    ) -> Result<bool> {
        if indexes.is_empty() && (self.keep_open || !self.left_open) {
            return Ok(self.left_open);
        }
        let lines = lines_at(src, indexes);
        let id = sidechains_id(self.main);
        let dir = store.session_dir(&id)?;
        let (session, created) = if dir.join(crate::session::META_FILE).is_file() {
            (store.open_session(&id)?, false)
        } else if lines.is_empty() {
            return Ok(false);
        } else {
            let mut meta = SessionMeta::new(id.clone(), now_ms());
            meta.parent_session = Opt::Present(self.main.to_owned());
            let _ = meta.store_extra.push(META_MEMBER, self.member(None));
            (
                Session::create(&dir, meta, store.config().session_options())?,
                true,
            )
        };
        let resume = session
            .meta()
            .store_extra
            .get(META_MEMBER)
            .and_then(|m| get(m, "resume"))
            .cloned();
        let mut builder = Builder::new(summary, self.shown.to_owned(), &session);
        builder.keep_raw = false;
        builder.keep_open = self.keep_open;
        builder.resume_in = resume.clone();
        if session.is_empty() {
            if let Some(t) = lines.iter().find_map(|l| {
                l.value
                    .as_ref()
                    .and_then(|v| get_str(v, "timestamp"))
                    .and_then(parse_time)
            }) {
                builder.time = t;
            }
        }
        let built = claude_code::build(&mut builder, &lines, self.path, true);
        let drafts = std::mem::take(&mut builder.out);
        let open = builder.turn_is_open();
        let resume_out = builder.resume_out.take();
        drop(builder);
        let outcome = built.and_then(|()| {
            let appended = !drafts.is_empty();
            session.append_drafts(drafts)?;
            if resume_out != resume {
                let member = self.member(resume_out);
                session.update_meta(|m| {
                    let _ = m.store_extra.remove(META_MEMBER);
                    let _ = m.store_extra.push(META_MEMBER, member);
                })?;
            }
            Ok(appended)
        });
        session.close()?;
        match outcome {
            Ok(appended) => {
                if created {
                    summary.created.push(id);
                } else if appended {
                    summary.updated.push(id);
                }
                Ok(open)
            }
            Err(e) => {
                if created {
                    let _ = std::fs::remove_dir_all(&dir);
                }
                summary.warnings.push(format!(
                    "{}: the inline sidechains were not imported: {e}",
                    self.shown
                ));
                Ok(self.left_open)
            }
        }
    }

    /// The session's `import` member.
    fn member(&self, resume: Option<Value>) -> Value {
        let mut m = Map::new();
        let _ = m.push("sidechainsOf", self.main.into());
        if let Some(r) = resume {
            let _ = m.push("resume", r);
        }
        Value::Object(m)
    }
}

/// The id of the sidechains session of main session `main`: `<main>-sidechains`, the main id
/// cut so that the whole fits in 128 characters (cutting the suffix instead could make it the
/// main id itself).
pub(crate) fn sidechains_id(main: &str) -> String {
    const SUFFIX: &str = "-sidechains";
    let keep = main
        .char_indices()
        .nth(128 - SUFFIX.len())
        .map_or(main.len(), |(i, _)| i);
    format!("{}{SUFFIX}", &main[..keep])
}

/// The lines at `indexes` of `src` (the inline sidechain lines a build of the main file set
/// aside), for a build of their own.
pub(super) fn lines_at<'d>(src: &[SrcLine<'d>], indexes: &[usize]) -> Vec<SrcLine<'d>> {
    indexes
        .iter()
        .filter_map(|&i| src.get(i))
        .map(|l| SrcLine {
            n: l.n,
            bytes: l.bytes,
            value: l.value.clone(),
        })
        .collect()
}
