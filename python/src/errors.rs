//! The exception classes and the mapping of the crate's errors onto them.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use agentlog_core::log;
use agentlog_core::Error as CoreError;

create_exception!(
    agentlog,
    Error,
    PyException,
    "The base of every error agentlog raises (also: no such session, a session that exists \
     already, an archived or deleted session, an invalid id or option, an I/O failure)."
);
create_exception!(
    agentlog,
    LifecycleError,
    Error,
    "An event refused by a lifecycle rule (docs/events.md §6); nothing was written. Fields: `rule` \
     (the rule's name, e.g. \"TurnStartWhenIdle\"), `rule_text` (the rule in words), `seq` (the \
     seq the event would have had), `open` (a dict {\"turn\",\"step\",\"compaction\"}: what was \
     open, None for what was not), `event_type`, `detail`."
);
create_exception!(
    agentlog,
    ParseError,
    Error,
    "A JSONL line or event refused by the parser (malformed JSON, a missing or mistyped member, \
     a seq that is not the next one, ...); nothing was written. Fields: `line` (1-based), \
     `column` (1-based, in characters; None when the error has no place on the line)."
);
create_exception!(
    agentlog,
    CorruptionError,
    Error,
    "Damaged data, detected and named. Fields: `path` (the damaged file, or None), `offset` (the \
     byte offset in it, or None), `seq` (the seq there, or None)."
);
create_exception!(
    agentlog,
    LockError,
    Error,
    "Another writer (in this or another process) holds the session. Field: `pid` (the holder's \
     process id when known, else None)."
);
create_exception!(
    agentlog,
    DiskFullError,
    Error,
    "The disk is full; nothing was written (free space and retry)."
);

/// An error of this package itself (a bug): raised as `agentlog.Error`.
pub fn internal(msg: String) -> PyErr {
    Error::new_err(format!("internal error: {msg}"))
}

fn with_fields(py: Python<'_>, err: PyErr, fields: &[(&str, Py<PyAny>)]) -> PyErr {
    let v = err.value(py);
    for (k, val) in fields {
        // Setting an attribute on a fresh exception instance cannot fail.
        let _ = v.setattr(*k, val);
    }
    err
}

fn opt<'py, T: IntoPyObject<'py>>(py: Python<'py>, v: Option<T>) -> Py<PyAny> {
    match v {
        Some(v) => {
            use pyo3::IntoPyObjectExt;
            v.into_py_any(py).unwrap_or_else(|_| py.None())
        }
        None => py.None(),
    }
}

/// The Python exception for a crate error.
pub fn to_py(py: Python<'_>, e: CoreError) -> PyErr {
    let msg = e.to_string();
    match &e {
        CoreError::Lifecycle(l) => {
            let open = PyDict::new(py);
            let _ = open.set_item("turn", l.open.turn);
            let _ = open.set_item("step", l.open.step);
            let _ = open.set_item("compaction", l.open.compaction);
            with_fields(
                py,
                LifecycleError::new_err(msg),
                &[
                    ("rule", opt(py, Some(format!("{:?}", l.rule)))),
                    ("rule_text", opt(py, Some(l.rule.text()))),
                    ("seq", opt(py, Some(l.seq))),
                    ("open", open.into_any().unbind()),
                    ("event_type", opt(py, Some(l.type_name.as_str()))),
                    ("detail", opt(py, Some(l.detail.as_str()))),
                ],
            )
        }
        CoreError::Parse(p) => with_fields(
            py,
            ParseError::new_err(msg),
            &[
                ("line", opt(py, Some(p.line))),
                ("column", opt(py, p.column)),
            ],
        ),
        CoreError::Archive { seq, .. } => with_fields(
            py,
            CorruptionError::new_err(msg),
            &[
                ("path", py.None()),
                ("offset", py.None()),
                ("seq", opt(py, *seq)),
            ],
        ),
        CoreError::Log(l) => log_to_py(py, l, msg),
        CoreError::Io { source, .. } if source.kind() == std::io::ErrorKind::StorageFull => {
            DiskFullError::new_err(msg)
        }
        _ => Error::new_err(msg),
    }
}

fn log_to_py(py: Python<'_>, l: &log::Error, msg: String) -> PyErr {
    if let Some(c) = l.corruption() {
        return with_fields(
            py,
            CorruptionError::new_err(msg),
            &[
                ("path", opt(py, Some(c.path.to_string_lossy().into_owned()))),
                ("offset", opt(py, Some(c.offset))),
                ("seq", opt(py, c.seq)),
            ],
        );
    }
    if l.is_disk_full() {
        return DiskFullError::new_err(msg);
    }
    match l {
        log::Error::Locked { holder, .. } => {
            // The lock file holds "pid N".
            let pid = holder
                .as_deref()
                .and_then(|h| h.trim().strip_prefix("pid "))
                .and_then(|p| p.trim().parse::<u32>().ok());
            with_fields(py, LockError::new_err(msg), &[("pid", opt(py, pid))])
        }
        _ => Error::new_err(msg),
    }
}

/// Registers the exception classes, with their fields defaulting to None on the class.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let classes: [(&str, Bound<'_, pyo3::types::PyType>, &[&str]); 6] = [
        ("Error", py.get_type::<Error>(), &[]),
        (
            "LifecycleError",
            py.get_type::<LifecycleError>(),
            &["rule", "rule_text", "seq", "open", "event_type", "detail"],
        ),
        (
            "ParseError",
            py.get_type::<ParseError>(),
            &["line", "column"],
        ),
        (
            "CorruptionError",
            py.get_type::<CorruptionError>(),
            &["path", "offset", "seq"],
        ),
        ("LockError", py.get_type::<LockError>(), &["pid"]),
        ("DiskFullError", py.get_type::<DiskFullError>(), &[]),
    ];
    for (name, class, fields) in classes {
        for f in fields {
            class.setattr(*f, py.None())?;
        }
        m.add(name, class)?;
    }
    Ok(())
}
