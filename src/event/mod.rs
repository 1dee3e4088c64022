//! The typed event model and its canonical JSONL codec (EVENTS.md §2–4).
