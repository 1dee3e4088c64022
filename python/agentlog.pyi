"""agentlog: append-only, checksummed, memory-mapped logs of LLM agent sessions (type stubs)."""

import os
import pathlib
from types import TracebackType
from typing import Any, Dict, Iterable, Iterator, List, Literal, Optional, Type, Union

__version__: str

#: An event as a dict: {"type", "seq", "time", "data", "surfaceOp"?, "sourceEventSeqs"?, ...}.
Event = Dict[str, Any]
#: An event to append: a dict (seq and time may be left out) or one JSONL line.
EventIn = Union[Dict[str, Any], str, bytes]
Format = Literal["neutral", "openai", "anthropic"]
PathLike = Union[str, "os.PathLike[str]"]

class Error(Exception):
    """The base of every error agentlog raises."""

class LifecycleError(Error):
    """An event refused by a lifecycle rule; nothing was written."""

    rule: str
    rule_text: str
    seq: int
    open: Dict[str, Optional[int]]
    event_type: str
    detail: str

class ParseError(Error):
    """A line or event refused by the parser; nothing was written."""

    line: int
    column: Optional[int]

class CorruptionError(Error):
    """Damaged data, named by file, byte offset and seq where known."""

    path: Optional[str]
    offset: Optional[int]
    seq: Optional[int]

class LockError(Error):
    """Another writer holds the session."""

    pid: Optional[int]

class DiskFullError(Error):
    """The disk is full; nothing was written."""

class Store:
    """A directory of sessions (opened or created; its agentlog.toml is honoured)."""

    def __init__(self, path: PathLike) -> None: ...
    @property
    def path(self) -> pathlib.Path: ...
    def create(
        self,
        id: Optional[str] = None,
        title: Optional[str] = None,
        header: Optional[Dict[str, Any]] = None,
    ) -> Session: ...
    def open(self, id: str) -> Session: ...
    def reader(self, id: str) -> Reader: ...
    def sessions(self) -> List[Dict[str, Any]]: ...
    def import_jsonl(self, path: PathLike, id: Optional[str] = None) -> str: ...
    def fork(
        self,
        id: str,
        at: Optional[int] = None,
        turn: Optional[int] = None,
        new_id: Optional[str] = None,
    ) -> str: ...
    def search(
        self,
        session: Union[str, List[str], None] = None,
        type: Union[str, List[str], None] = None,
        tool: Optional[str] = None,
        turn: Optional[int] = None,
        since: Optional[int] = None,
        until: Optional[int] = None,
        text: Optional[str] = None,
        limit: Optional[int] = None,
    ) -> List[Dict[str, Any]]: ...
    def stats(self, id: Optional[str] = None) -> Dict[str, Any]: ...

class Session:
    """A session opened for writing; a context manager that closes it."""

    @property
    def id(self) -> str: ...
    @property
    def closed(self) -> bool: ...
    def append(self, event: EventIn) -> Optional[int]: ...
    def append_many(self, events: Iterable[EventIn]) -> List[Optional[int]]: ...
    def sync(self) -> None: ...
    def close(self) -> None: ...
    def status(self) -> Dict[str, Any]: ...
    def messages(self, format: Format = "neutral", at: Optional[int] = None) -> Any: ...
    def close_open_work(self, reason: str = "interrupted") -> List[int]: ...
    def reader(self) -> Reader: ...
    def __len__(self) -> int: ...
    def __enter__(self) -> Session: ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...

class Reader:
    """A reader of one session (any number, any process, while a writer appends)."""

    @property
    def id(self) -> str: ...
    def __len__(self) -> int: ...
    def events(self, start: int = 0, stop: Optional[int] = None) -> Events: ...
    def get(self, seq: int) -> Event: ...
    def follow(self, start: Optional[int] = None, timeout: Optional[float] = None) -> Events: ...
    def export(self, path: Optional[PathLike] = None, header: bool = False) -> Union[str, int]: ...
    def messages(self, format: Format = "neutral", at: Optional[int] = None) -> Any: ...
    def status(self) -> Dict[str, Any]: ...

class Events(Iterator[Event]):
    """An iterator of events as dicts."""

    def __iter__(self) -> Events: ...
    def __next__(self) -> Event: ...
