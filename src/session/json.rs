//! The JSON objects `agentlog status --json` and `agentlog ls --json` print, built here so the
//! command line and the bindings (python/) produce the same ones.

use crate::event::{Map, Value};
use crate::store::SessionInfo;

use super::lifecycle::Lifecycle;

fn object(members: Vec<(&str, Value)>) -> Value {
    let mut m = Map::new();
    for (k, v) in members {
        // The names below are distinct: a push cannot fail.
        let _ = m.push(k, v);
    }
    Value::Object(m)
}

fn or_null<T: Into<Value>>(v: Option<T>) -> Value {
    v.map_or(Value::Null, Into::into)
}

fn ids(v: impl Iterator<Item = String>) -> Value {
    Value::Array(v.map(Value::String).collect())
}

impl Lifecycle {
    /// The object `agentlog status --json` prints for a session of `events` events in this
    /// state: `{"state","openTurn","openStep","unansweredCalls":[callId…],
    /// "pendingApprovals":[callId…],"closedUnanswered":[callId…],"events","lastTurnEnd"}`, `null`
    /// for what is not open; `lastTurnEnd` is `{"turn","reason"}` (the reason's kind) of the last
    /// turn that ended, `null` before one has.
    pub fn status_json(&self, events: u64) -> Value {
        let work = self.open_work();
        object(vec![
            ("state", self.state().as_str().into()),
            ("openTurn", or_null(work.turn.map(|(t, _)| t))),
            ("openStep", or_null(work.step.map(|(s, _)| s))),
            (
                "unansweredCalls",
                ids(work.unanswered_calls.into_iter().map(|c| c.call_id)),
            ),
            ("pendingApprovals", ids(work.pending_approvals.into_iter())),
            (
                "closedUnanswered",
                ids(self.closed_unanswered().into_iter().map(|c| c.call_id)),
            ),
            ("events", events.into()),
            (
                "lastTurnEnd",
                self.last_end().map_or(Value::Null, |(turn, reason)| {
                    object(vec![
                        ("turn", turn.into()),
                        ("reason", reason.as_str().into()),
                    ])
                }),
            ),
        ])
    }
}

impl SessionInfo {
    /// The object `agentlog ls --json` prints for this session: `{"id","title","state","events",
    /// "bytes","createdAt","lastEventTime","parentSession","seedLength"}` (times in epoch
    /// milliseconds; `null` for what is absent; `seedLength`: the events copied from the parent
    /// by a fork).
    pub fn to_json(&self) -> Value {
        object(vec![
            ("id", self.id.clone().into()),
            ("title", or_null(self.title.clone())),
            ("state", self.state.as_str().into()),
            ("events", self.events.into()),
            ("bytes", self.bytes.into()),
            ("createdAt", self.created_at.into()),
            ("lastEventTime", or_null(self.last_event_time)),
            ("parentSession", or_null(self.parent_session.clone())),
            ("seedLength", or_null(self.seed_length)),
        ])
    }
}

#[cfg(test)]
mod tests {
    use crate::event::parse_draft_line;
    use crate::store::{NewSession, Store};

    /// The status object names what is open; the CLI and the Python package print this one.
    #[test]
    fn status_json_names_open_work() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let s = store.create(NewSession::default().id("s")).unwrap();
        for line in [
            r#"{"type":"turn/start","data":{"turn":1}}"#,
            r#"{"type":"step/start","data":{"turn":1,"step":1}}"#,
            r#"{"type":"tool/call","data":{"turn":1,"step":1,"callId":"c1","name":"ls","arguments":"{}"}}"#,
        ] {
            s.append_draft(parse_draft_line(line).unwrap()).unwrap();
        }
        assert_eq!(
            s.lifecycle().status_json(s.len()).to_string(),
            r#"{"state":"inferring","openTurn":1,"openStep":1,"unansweredCalls":["c1"],"pendingApprovals":[],"closedUnanswered":[],"events":3,"lastTurnEnd":null}"#
        );
        s.close().unwrap();
        let info = store.info("s").unwrap();
        let json = info.to_json().to_string();
        assert!(json.starts_with(r#"{"id":"s","title":null,"state":"active","events":3,"#));
        assert!(json.ends_with(r#","parentSession":null,"seedLength":null}"#));
    }
}
