"""The agentlog Python package: every call and exception, the command line reading what Python
wrote and the other way round, two processes, a crash."""

import inspect
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import agentlog

from conftest import REPO

EXAMPLE = REPO / "examples" / "sessions" / "coding-session.jsonl"


def turn(n, call="c1"):
    """A complete turn: a user message, a step with a tool call and its result, an answer."""
    return [
        {"type": "turn/start", "data": {"turn": n}},
        {"type": "user/message", "data": {"role": "user", "content": [{"type": "text", "text": "list files"}]}},
        {"type": "step/start", "data": {"turn": n, "step": 1}},
        {"type": "assistant/message", "data": {"turn": n, "step": 1, "message": {"role": "assistant", "content": [
            {"type": "text", "text": "Listing."},
            {"type": "tool_use", "id": call, "name": "ls", "input": {"path": "."}}]}}},
        {"type": "tool/call", "data": {"turn": n, "step": 1, "callId": call, "name": "ls", "arguments": "{\"path\":\".\"}"}},
        {"type": "tool/result", "data": {"turn": n, "step": 1, "callId": call, "message": {
            "role": "tool", "toolName": "ls", "content": "a.txt\nb.txt", "isError": False}}},
        {"type": "step/end", "data": {"turn": n, "step": 1}},
        {"type": "step/start", "data": {"turn": n, "step": 2}},
        {"type": "assistant/message", "data": {"turn": n, "step": 2, "message": {"role": "assistant", "content": [
            {"type": "text", "text": "Two files."}]}}},
        {"type": "step/end", "data": {"turn": n, "step": 2}},
        {"type": "turn/end", "data": {"turn": n, "reason": {"kind": "completed"}}},
    ]


def run_cli(cli, store_dir, *args, input=None):
    p = subprocess.run([cli, "--store", str(store_dir), *args], input=input, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p.stdout


def stripped(ev):
    """An event without the members the log assigns."""
    return {k: v for k, v in ev.items() if k not in ("seq", "time")}


# --- values ---------------------------------------------------------------------------------


def test_dict_round_trip_keeps_numbers_and_types(store):
    """What append takes as a dict comes back equal: big ints stay exact ints, floats keep their
    value and stay floats, strings with escapes and control characters, nesting, member order."""
    data = {
        "big": 2**80, "neg_big": -(2**70), "i64max": 2**63 - 1, "u64": 2**64 - 1, "small": -5, "zero": 0,
        "f": 0.1, "third": 1 / 3, "huge": 1e300, "tiny": 5e-324, "whole": 3.0, "negzero": -0.0,
        "s": "é \"quoted\" back\\slash\n\t\x01 \U0001F600", "empty": "", "t": True, "fl": False, "n": None,
        "nested": {"list": [1, 2.5, None, [True, {"k": "v"}]], "z": {}, "a": []},
    }
    with store.create(id="vals") as s:
        assert s.append({"type": "x/custom", "data": data, "extraMember": [1]}) == 0
    ev = store.reader("vals").get(0)
    assert ev["data"] == data
    assert ev["extraMember"] == [1]
    assert list(ev["data"]) == list(data)  # member order kept
    for k, v in data.items():
        assert type(ev["data"][k]) is type(v), k
    assert str(ev["data"]["negzero"]) == "-0.0"
    assert ev["data"]["third"] == 1 / 3 and ev["data"]["tiny"] == 5e-324


def test_append_line_str_and_bytes(store):
    """A JSONL line as str or bytes is appended as given; seq and time are assigned."""
    with store.create(id="lines") as s:
        assert s.append('{"type":"turn/start","data":{"turn":1}}') == 0
        assert s.append(b'{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}\n') == 1
        assert len(s) == 2
    evs = list(store.reader("lines").events())
    assert [e["seq"] for e in evs] == [0, 1]
    assert all(isinstance(e["time"], int) and e["time"] > 1_600_000_000_000 for e in evs)


@pytest.mark.parametrize("bad,exc", [
    ({1, 2}, TypeError),
    ((1, 2), TypeError),
    (b"bytes", TypeError),
    (object(), TypeError),
    (float("nan"), ValueError),
    (float("inf"), ValueError),
    (-float("inf"), ValueError),
    ("lone \ud800 surrogate", ValueError),
])
def test_non_json_values_refused(store, bad, exc):
    """A value JSON cannot hold is refused with TypeError or ValueError, and nothing is written."""
    with store.create(id="bad") as s:
        with pytest.raises(exc):
            s.append({"type": "x/custom", "data": {"v": bad}})
        assert len(s) == 0


def test_non_str_keys_and_cycles_refused(store):
    """A dict with a non-str key is a TypeError; a dict that contains itself a ValueError (not a
    crash); neither writes anything."""
    with store.create(id="bad") as s:
        with pytest.raises(TypeError, match="keys are str"):
            s.append({"type": "x/custom", "data": {1: "one"}})
        loop = {}
        loop["self"] = loop
        with pytest.raises(ValueError, match="nested deeper"):
            s.append({"type": "x/custom", "data": loop})
        with pytest.raises(TypeError):
            s.append(42)
        assert len(s) == 0


# --- errors ---------------------------------------------------------------------------------


def test_lifecycle_error_fields(store):
    """A refused event raises LifecycleError with the rule, the seq and what was open; nothing is
    written."""
    with store.create(id="lc") as s:
        s.append({"type": "turn/start", "data": {"turn": 1}})
        with pytest.raises(agentlog.LifecycleError) as ei:
            s.append({"type": "turn/start", "data": {"turn": 2}})
        e = ei.value
        assert isinstance(e, agentlog.Error)
        assert e.rule == "TurnStartWhenIdle"
        assert e.rule_text == "turn/start only when no turn is open"
        assert e.seq == 1
        assert e.open == {"turn": 1, "step": None, "compaction": None}
        assert e.event_type == "turn/start"
        assert len(s) == 1


def test_parse_error_fields(store):
    """A malformed line raises ParseError with line and column; in append_many the line is the
    event's place in the batch, and nothing of the batch is written."""
    with store.create(id="pe") as s:
        with pytest.raises(agentlog.ParseError) as ei:
            s.append('{"type":"turn/start","data":{"turn":1};')
        assert ei.value.line == 1 and ei.value.column == 39
        with pytest.raises(agentlog.ParseError) as ei:
            s.append({"type": "turn/start", "data": {}})
        assert "data.turn" in str(ei.value)
        with pytest.raises(agentlog.ParseError) as ei:
            s.append_many([{"type": "turn/start", "data": {"turn": 1}}, "{}", "not json"])
        assert ei.value.line == 2
        assert len(s) == 0


def test_append_many_is_all_or_nothing(store):
    """append_many appends in one call; one refused event (by a rule) writes none of them."""
    with store.create(id="many") as s:
        assert s.append_many(turn(1)) == list(range(11))
        with pytest.raises(agentlog.LifecycleError) as ei:
            s.append_many([{"type": "turn/start", "data": {"turn": 2}}, {"type": "turn/start", "data": {"turn": 3}}])
        assert ei.value.seq == 12
        assert len(s) == 11


def test_lock_error_names_the_holder(store):
    """A second writer of a session is refused with LockError naming the holder's pid."""
    s = store.create(id="locked")
    with pytest.raises(agentlog.LockError) as ei:
        store.open("locked")
    assert ei.value.pid == os.getpid()
    s.close()
    store.open("locked").close()


def test_corruption_error_names_file_offset_seq(store, store_dir):
    """A damaged record is reported as CorruptionError with its file, byte offset and seq."""
    with store.create(id="dmg") as s:
        s.append({"type": "x/custom", "data": {"v": "first"}})
        s.append({"type": "x/custom", "data": {"v": "MARKER-TO-DAMAGE"}})
        s.append({"type": "x/custom", "data": {"v": "third"}})
    damaged = None
    for f in (store_dir / "sessions" / "dmg").iterdir():
        b = f.read_bytes()
        i = b.find(b"MARKER-TO-DAMAGE")
        if i >= 0:
            f.write_bytes(b[:i] + b"X" + b[i + 1:])
            damaged = f
    assert damaged is not None
    with pytest.raises(agentlog.CorruptionError) as ei:
        r = store.reader("dmg")
        list(r.events())
    e = ei.value
    assert e.path == str(damaged)
    assert e.seq == 1
    assert isinstance(e.offset, int) and e.offset > 0


DISK_FULL = r"""
import sys, agentlog
store = agentlog.Store(sys.argv[1])
s = store.create(id="full")
try:
    for i in range(100000):
        s.append({"type": "x/custom", "data": {"blob": "x" * 60000, "i": i}})
except agentlog.DiskFullError as e:
    print("DiskFullError", len(s), e)
"""


def test_disk_full_error(tmp_path):
    """A full disk raises DiskFullError (a 16 MiB tmpfs; needs root to mount it)."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (not root)")
    try:
        (mnt / "store").mkdir()
        (mnt / "store" / "agentlog.toml").write_text('segment_size = "1MiB"\n')
        p = subprocess.run([sys.executable, "-c", DISK_FULL, str(mnt / "store")], capture_output=True, text=True, timeout=120)
        assert p.stdout.startswith("DiskFullError"), (p.returncode, p.stdout, p.stderr)
        written = int(p.stdout.split()[1])
        assert 0 < written < 1000
    finally:
        subprocess.run(["umount", str(mnt)])


def test_errors_are_agentlog_errors(store):
    """Other failures are agentlog.Error: no such session, an id that exists, an invalid id."""
    with pytest.raises(agentlog.Error, match="no session"):
        store.reader("missing")
    store.create(id="dup").close()
    with pytest.raises(agentlog.Error, match="exists already"):
        store.create(id="dup")
    with pytest.raises(agentlog.Error, match="invalid session id"):
        store.create(id="../escape")
    for cls in (agentlog.LifecycleError, agentlog.ParseError, agentlog.CorruptionError,
                agentlog.LockError, agentlog.DiskFullError):
        assert issubclass(cls, agentlog.Error)


# --- sessions and readers -------------------------------------------------------------------


def test_context_manager_and_close(store):
    """`with` closes the session; closing twice is fine; a closed session refuses appends."""
    with store.create(id="cm", title="T") as s:
        assert s.id == "cm" and not s.closed
        s.append({"type": "turn/start", "data": {"turn": 1}})
        s.sync()
    assert s.closed
    s.close()
    with pytest.raises(agentlog.Error, match="closed"):
        s.append({"type": "turn/end", "data": {"turn": 1, "reason": {"kind": "completed"}}})
    with pytest.raises(agentlog.Error, match="closed"):
        len(s)
    # Reopened, it goes on where it was.
    with store.open("cm") as s2:
        assert len(s2) == 1
        assert s2.status()["state"] == "pending"


def test_create_with_header(store):
    """create(header=) takes the header's cwd and config (kept in session.json) and its title."""
    with store.create(id="h", header={"type": "session", "cwd": "/work", "config": {"model": "m", "t": 0.5}, "title": "from header"}) as s:
        pass
    head = json.loads(store.reader("h").export(header=True).splitlines()[0])
    assert head["cwd"] == "/work" and head["title"] == "from header" and head["id"] == "h"
    with pytest.raises(ValueError, match="unknown header member"):
        store.create(header={"nope": 1})
    assert [i["id"] for i in store.sessions()] == ["h"]
    # A new id when none is given: time-sortable, unique.
    a, b = store.create(), store.create()
    assert a.id < b.id
    a.close(), b.close()


def test_status_and_messages(store):
    """status() is the turn state and what is open; messages() the derived history, in the three
    formats and at an earlier length."""
    with store.create(id="m") as s:
        evs = turn(1)
        s.append_many(evs[:5])
        st = s.status()
        assert st == {"state": "toolInvoking", "openTurn": 1, "openStep": 1, "unansweredCalls": ["c1"],
                      "pendingApprovals": [], "closedUnanswered": [], "events": 5, "lastTurnEnd": None}
        s.append_many(evs[5:])
        assert s.status()["state"] == "idle"
        neutral = s.messages()
        assert [m["role"] for m in neutral] == ["user", "assistant", "user", "assistant"]
        assert neutral[2]["content"][0]["type"] == "tool_result"
        openai = s.messages(format="openai")
        assert openai[1]["tool_calls"][0]["id"] == "c1"
        assert openai[2] == {"role": "tool", "tool_call_id": "c1", "content": "a.txt\nb.txt"}
        anthropic = s.messages("anthropic")
        assert "system" not in anthropic and len(anthropic["messages"]) == 4
        assert s.messages(at=2) == [{"role": "user", "content": [{"type": "text", "text": "list files"}]}]
        with pytest.raises(ValueError, match="unknown format"):
            s.messages(format="gemini")
        r = s.reader()
        assert r.messages("openai") == openai
        assert r.messages(at=2) == s.messages(at=2)
        assert r.status() == s.status()


def test_reader_events_get_len(store):
    """events(start, stop), get(seq) and len() see what the writer appended, also later appends."""
    s = store.create(id="rd")
    s.append_many(turn(1))
    r = store.reader("rd")
    assert len(r) == 11
    assert [e["seq"] for e in r.events(3, 6)] == [3, 4, 5]
    assert [e["seq"] for e in r.events(9)] == [9, 10]
    assert list(r.events(20)) == []
    assert stripped(r.get(4)) == turn(1)[4]
    s.append_many(turn(2, call="c2"))
    assert len(r) == 22 and r.get(21)["type"] == "turn/end"
    with pytest.raises(agentlog.Error, match="out of range"):
        r.get(22)
    assert [stripped(e) for e in r.events()] == turn(1) + turn(2, call="c2")
    s.close()


def test_export_to_str_and_file(store, tmp_path):
    """export() returns canonical JSONL; export(path) writes the same to a file and returns the
    number of events."""
    assert store.import_jsonl(EXAMPLE) == "sess-0001"
    r = store.reader("sess-0001")
    text = r.export(header=True)
    assert text == EXAMPLE.read_text()  # import then export: the same bytes
    out = tmp_path / "out.jsonl"
    assert r.export(out) == len(r)
    assert out.read_text() == r.export()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_import_refused_writes_nothing(store, tmp_path):
    """A refused import names the line and creates nothing."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}\n{"type":"turn/start","seq":1,"time":2,"data":{"turn":2}}\n')
    with pytest.raises(agentlog.LifecycleError, match="line 2"):
        store.import_jsonl(bad, id="bad")
    assert store.sessions() == []


def test_fork(store):
    """fork(at=) and fork(turn=) make new sessions holding the first events; one of the two."""
    with store.create(id="p") as s:
        s.append_many(turn(1) + turn(2, call="c2"))
    assert len(store.reader(store.fork("p", at=5, new_id="f5"))) == 5
    t1 = store.fork("p", turn=1)
    assert len(store.reader(t1)) == 11
    info = {i["id"]: i for i in store.sessions()}
    assert info["f5"]["parentSession"] == "p"
    with pytest.raises(ValueError):
        store.fork("p")
    with pytest.raises(ValueError):
        store.fork("p", at=1, turn=1)
    with pytest.raises(agentlog.Error):
        store.fork("p", at=100)


def test_search(store):
    """search() filters by session, type, tool, turn, time, text and limit."""
    with store.create(id="a") as s:
        s.append_many(turn(1) + turn(2, call="c2"))
    with store.create(id="b") as s:
        s.append_many(turn(1, call="z"))
    calls = store.search(type="tool/call")
    assert [(m["session"], m["event"]["data"]["callId"]) for m in calls] == [("a", "c1"), ("a", "c2"), ("b", "z")]
    assert len(store.search(session="a", type=["tool/call", "tool/result"])) == 4
    assert len(store.search(session=["a", "b"], tool="ls")) == 6
    assert [m["event"]["seq"] for m in store.search(session="a", turn=2, type="turn")] == [11, 21]
    assert len(store.search(text="TWO FILES")) == 3
    assert len(store.search(limit=4)) == 4
    assert store.search(since=2**62) == [] and len(store.search(until=2**62)) == 33


def test_stats(store):
    """stats(id) of a session, stats() summed over the store."""
    with store.create(id="a") as s:
        s.append_many(turn(1))
    with store.create(id="b") as s:
        s.append_many(turn(1) + turn(2, call="c2"))
    a = store.stats("a")
    assert a["events"] == 11 and a["turns"] == 1 and a["tools"]["ls"]["calls"] == 1
    total = store.stats()
    assert total["sessions"] == 2 and total["events"] == 33 and total["tools"]["ls"]["calls"] == 3


def test_follow_yields_then_stops_after_timeout(store):
    """follow(start=0) yields what is there and stops after `timeout` seconds without news;
    follow() (start None) yields only new events."""
    s = store.create(id="fo")
    s.append_many(turn(1))
    r = store.reader("fo")
    t = time.monotonic()
    assert len(list(r.follow(start=0, timeout=0.3))) == 11
    assert time.monotonic() - t >= 0.3
    assert list(r.follow(timeout=0.2)) == []
    with pytest.raises(ValueError):
        r.follow(timeout=-1)
    s.close()


def test_follow_releases_the_gil(store):
    """A thread waiting in follow() does not hold the GIL: the main thread appends meanwhile and
    the follower receives the events."""
    s = store.create(id="gil")
    got = []
    follower = threading.Thread(target=lambda: got.extend(store.reader("gil").follow(start=0, timeout=1.5)))
    follower.start()
    time.sleep(0.2)
    for ev in turn(1):
        s.append(ev)
        time.sleep(0.01)
    follower.join()
    assert [e["seq"] for e in got] == list(range(11))
    s.close()


def test_docstrings_and_stubs():
    """Every class and call has a docstring; the type stubs and py.typed ship with the package."""
    for cls in (agentlog.Store, agentlog.Session, agentlog.Reader):
        assert cls.__doc__
        for name, member in inspect.getmembers(cls):
            if not name.startswith("_") and callable(member):
                assert member.__doc__, f"{cls.__name__}.{name}"
    for exc in (agentlog.Error, agentlog.LifecycleError, agentlog.ParseError, agentlog.CorruptionError,
                agentlog.LockError, agentlog.DiskFullError):
        assert exc.__doc__
    pkg = Path(agentlog.__file__).parent
    assert (pkg / "py.typed").exists()
    stub = (pkg / "__init__.pyi").read_text()
    for name in ("class Store", "def append_many", "def follow", "class LifecycleError", "pid: Optional[int]"):
        assert name in stub
    assert agentlog.__version__


# --- with the command line ------------------------------------------------------------------


def test_python_written_read_by_cli(cli, store, store_dir):
    """A session written from Python: the CLI exports the same JSONL, derives the same history,
    and prints the same ls / status / stats / search JSON."""
    with store.create(id="py", title="from python") as s:
        s.append_many(turn(1))
        s.append({"type": "turn/start", "data": {"turn": 2}})
    r = store.reader("py")
    assert run_cli(cli, store_dir, "export", "py", "--header") == r.export(header=True)
    assert json.loads(run_cli(cli, store_dir, "derive", "py", "--format", "openai")) == r.messages("openai")
    assert json.loads(run_cli(cli, store_dir, "ls", "--json")) == store.sessions()
    assert json.loads(run_cli(cli, store_dir, "status", "py", "--json")) == r.status()
    assert json.loads(run_cli(cli, store_dir, "stats", "py", "--json")) == store.stats("py")
    assert json.loads(run_cli(cli, store_dir, "stats", "--all", "--json")) == store.stats()
    lines = run_cli(cli, store_dir, "search", "--tool", "ls", "--json").splitlines()
    assert [json.loads(l) for l in lines] == store.search(tool="ls")
    run_cli(cli, store_dir, "verify", "py")


def test_cli_written_read_by_python(cli, store, store_dir):
    """A session imported and appended to by the CLI is read by Python as written."""
    sid = run_cli(cli, store_dir, "import", str(EXAMPLE)).strip()
    assert sid == "sess-0001"
    assert store.reader(sid).export(header=True) == EXAMPLE.read_text()
    run_cli(cli, store_dir, "import", "-", "--id", "cli2", input=json.dumps({"type": "x/custom", "seq": 0, "time": 5, "data": {"n": 2**70}}) + "\n")
    lines = "\n".join(json.dumps(e) for e in turn(1)) + "\n"
    run_cli(cli, store_dir, "append", "cli2", input=lines)
    r = store.reader("cli2")
    evs = list(r.events())
    assert evs[0] == {"type": "x/custom", "seq": 0, "time": 5, "data": {"n": 2**70}}
    assert [stripped(e) for e in evs[1:]] == turn(1)
    # Python can go on writing it.
    with store.open("cli2") as s:
        assert s.append({"type": "turn/start", "data": {"turn": 2}}) == 12


# --- processes ------------------------------------------------------------------------------

WRITER = r"""
import sys, time, json, agentlog
store = agentlog.Store(sys.argv[1])
s = store.open(sys.argv[2])
print("ready", flush=True)
for line in sys.stdin:
    s.append(line)
    time.sleep(0.005)
s.close()
"""


def test_writer_and_follow_reader_in_two_processes(store, store_dir):
    """A writer process appends while this process follows: every event arrives, in order."""
    store.create(id="two").close()
    r = store.reader("two")
    w = subprocess.Popen([sys.executable, "-c", WRITER, str(store_dir), "two"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    assert w.stdout.readline().strip() == "ready"
    events = turn(1) + turn(2, call="c2") + turn(3, call="c3")
    w.stdin.write("".join(json.dumps(e) + "\n" for e in events))
    w.stdin.close()
    got = []
    for ev in r.follow(start=0, timeout=5):
        got.append(ev)
        if len(got) == len(events):
            break
    assert w.wait(timeout=30) == 0
    assert [stripped(e) for e in got] == events
    assert [e["seq"] for e in got] == list(range(len(events)))


CRASHER = r"""
import os, sys, agentlog
store = agentlog.Store(sys.argv[1])
s = store.create(id="crash")
s.append({"type": "turn/start", "data": {"turn": 1}})
s.append({"type": "user/message", "data": {"role": "user", "content": [{"type": "text", "text": "go"}]}})
s.append({"type": "step/start", "data": {"turn": 1, "step": 1}})
s.append({"type": "assistant/message", "data": {"turn": 1, "step": 1, "message": {"role": "assistant", "content": [
    {"type": "tool_use", "id": "k1", "name": "sh", "input": {"cmd": "make"}}]}}})
s.append({"type": "tool/call", "data": {"turn": 1, "step": 1, "callId": "k1", "name": "sh", "arguments": "make"}})
os._exit(3)
"""


def test_crash_then_status_and_close(store, store_dir, cli):
    """A writer killed with os._exit: its session reopens with every event, status names the
    open turn, step and unanswered call, close_open_work closes them, and the session goes on."""
    p = subprocess.run([sys.executable, "-c", CRASHER, str(store_dir)])
    assert p.returncode == 3
    assert store.reader("crash").status() == {"state": "toolInvoking", "openTurn": 1, "openStep": 1,
                                              "unansweredCalls": ["k1"], "pendingApprovals": [], "closedUnanswered": [],
                                              "events": 5, "lastTurnEnd": None}
    with store.open("crash") as s:
        assert len(s) == 5
        assert s.status()["unansweredCalls"] == ["k1"]
        seqs = s.close_open_work()
        assert seqs == [5, 6, 7]
        assert s.status() == {"state": "idle", "openTurn": None, "openStep": None, "unansweredCalls": [],
                              "pendingApprovals": [], "closedUnanswered": [], "events": 8,
                              "lastTurnEnd": {"turn": 1, "reason": "interrupted"}}
        r = s.reader()
        assert r.get(5)["data"]["message"]["isError"] is True
        assert r.get(7)["data"]["reason"]["kind"] == "interrupted"
        assert s.close_open_work() == []
        with pytest.raises(ValueError):
            s.close_open_work(reason="nope")
        # The history is valid for a provider again: the tool use has its result.
        assert s.messages("openai")[-1]["role"] == "tool"
        s.append({"type": "turn/start", "data": {"turn": 2}})
    run_cli(cli, store_dir, "verify", "crash")


def test_events_across_batches(store):
    """events() renders in growing batches (64 events, then twice as many, up to 4096): across
    their edges no event is lost or repeated, with any start and stop."""
    n = 10_000
    with store.create(id="big") as s:
        s.append_many({"type": "x/n", "data": {"i": i}} for i in range(n))
    r = store.reader("big")
    assert [e["data"]["i"] for e in r.events()] == list(range(n))
    assert [e["seq"] for e in r.events(63, 4300)] == list(range(63, 4300))
    assert [e["seq"] for e in r.follow(start=n - 5000, timeout=0)] == list(range(n - 5000, n))


def test_readme_agent_loop_example(tmp_path):
    """The README's "From Python" example is examples/agent_loop.py verbatim, and it runs: the
    refused event, the idle state, the OpenAI history with the tool call and its result."""
    code = (REPO / "python" / "examples" / "agent_loop.py").read_text()
    assert "```python\n" + code + "```" in (REPO / "README.md").read_text()
    p = subprocess.run([sys.executable, str(REPO / "python" / "examples" / "agent_loop.py"), str(tmp_path / "s")],
                       capture_output=True, text=True, check=True)
    out = p.stdout
    assert out.startswith("refused: TurnEndClosesOpenTurn at seq 12\nidle\n")
    history = json.loads(out[out.index("\n[") + 1:out.index("\n]\n") + 2])
    assert history[2]["tool_calls"][0]["function"]["name"] == "read_file"
    assert history[3] == {"role": "tool", "tool_call_id": "call_1", "content": "port = 8080\n"}
    assert out.endswith("12 ['assistant/message', 'step/end', 'turn/end']\n812\n")


def test_store_path_reprs_and_sync_durability(store_dir):
    """Store.path, the reprs and ids; with durability "sync" in agentlog.toml appends (which then
    release the GIL while they wait for the disk) work as with the default."""
    store_dir.mkdir()
    (store_dir / "agentlog.toml").write_text('durability = "sync"\n')
    store = agentlog.Store(str(store_dir))
    assert store.path == store_dir and repr(store) == f'agentlog.Store("{store_dir}")'
    with store.create(id="sy") as s:
        assert repr(s) == 'agentlog.Session("sy")'
        assert [s.append(e) for e in turn(1)] == list(range(11))
        r = s.reader()
        assert r.id == "sy" and repr(r) == 'agentlog.Reader("sy")' and len(r) == 11
    assert [stripped(e) for e in store.reader("sy").events()] == turn(1)


# --- regressions of the 2026-12-07 sweep -----------------------------------------------------


def test_messages_of_a_log_damaged_after_its_checkpoint_raise(store, store_dir):
    """A log damaged after its checkpoint was written: messages() returned a history holding a
    made-up system message ("agentlog: the message of the event at seq 10 cannot be read")
    where the damaged message was. It raises CorruptionError now, as `agentlog derive` fails."""
    with store.create(id="c1") as s:
        for i in range(50):
            s.append({"type": "user/message", "data": {"role": "user", "content": [
                {"type": "text", "text": f"msg {i} " + "p" * 50}]}})
    seg = next((store_dir / "sessions" / "c1").glob("*.seg"))
    data = bytearray(seg.read_bytes())
    data[data.index(b"msg 10 ") + 3] ^= 0x01
    seg.write_bytes(bytes(data))
    for fmt in ("neutral", "openai", "anthropic"):
        with pytest.raises(agentlog.CorruptionError) as ei:
            store.reader("c1").messages(fmt)
        assert ei.value.seq == 10
    with store.open("c1") as w:
        with pytest.raises(agentlog.CorruptionError):
            w.messages()


def test_messages_at_beyond_the_log_is_refused(store):
    """messages(at=N) with N past the log returned the whole history; it is refused, as
    `derive --at` refuses it."""
    with store.create(id="m") as s:
        s.append_many(turn(1))
        with pytest.raises(ValueError, match="holds 11 events"):
            s.messages(at=12)
        assert s.messages(at=11) == s.messages()
    with pytest.raises(ValueError, match="holds 11 events"):
        store.reader("m").messages(at=99)


def test_follow_with_a_timeout_longer_than_a_duration_waits(store):
    """follow(timeout=1e20) panicked in Rust (PyO3's PanicException, which `except Exception`
    does not catch). A timeout longer than the crate's clock holds means no timeout."""
    with store.create(id="f") as s:
        s.append_many(turn(1))
    events = store.reader("f").follow(start=0, timeout=1e20)
    assert next(events)["seq"] == 0


def test_ints_of_any_length_and_numbers_a_float_cannot_hold(store):
    """An int of more than 4300 digits made the session unreadable from Python (CPython's limit
    on int/str conversion), and could not be appended; `1E+400` came back as infinity, which
    append refuses and json.dumps writes as `Infinity`. Both now round-trip exactly: the int as
    an int, the number a float cannot hold as a decimal.Decimal of its text."""
    import decimal
    huge = 7 * 10 ** 5000 + 12345
    with store.create(id="n") as s:
        s.append({"type": "x/num", "data": {"v": huge, "w": -huge}})
        s.append('{"type":"x/num","data":{"big":1E+400,"tiny":1e-400,"plain":2.5}}')
    r = store.reader("n")
    first = r.get(0)["data"]
    assert first["v"] == huge and first["w"] == -huge
    second = r.get(1)["data"]
    assert second["big"] == decimal.Decimal("1E+400")
    assert second["tiny"] == decimal.Decimal("1e-400")
    assert second["plain"] == 2.5 and isinstance(second["plain"], float)
    # What came out goes back in with the same values (a Decimal writes its own notation:
    # `1e-400` comes back as `1E-400`).
    with store.create(id="copy") as c:
        c.append_many([{k: v for k, v in e.items() if k != "seq"} for e in r.events()])
    assert list(store.reader("copy").events()) == list(r.events())
    assert store.reader("copy").export().splitlines()[0] == r.export().splitlines()[0]
    with pytest.raises(ValueError):
        with store.create(id="nan") as s:
            s.append({"type": "x/num", "data": {"v": decimal.Decimal("NaN")}})


def test_append_many_of_one_event_says_it_takes_a_list(store):
    """append_many(event) iterated a dict's keys (or a str's characters) and refused each as a
    line of its own; it now says it takes an iterable of events."""
    with store.create(id="a") as s:
        for one in ({"type": "turn/start", "data": {"turn": 1}}, '{"type":"turn/start","data":{"turn":1}}'):
            with pytest.raises(TypeError, match="not one event"):
                s.append_many(one)
        assert len(s) == 0


def test_io_errors_name_the_path_given(store, tmp_path):
    """import_jsonl(a directory) raised ParseError ("line 1: read failed"), and export(a
    directory) named an internal temporary file."""
    d = tmp_path / "adir"
    d.mkdir()
    with pytest.raises(agentlog.Error) as ei:
        store.import_jsonl(d)
    assert not isinstance(ei.value, agentlog.ParseError)
    assert str(d) in str(ei.value)
    with store.create(id="x") as s:
        s.append({"type": "x/y", "data": {}})
    with pytest.raises(agentlog.Error) as ei:
        store.reader("x").export(d)
    assert str(d) in str(ei.value) and ".tmp" not in str(ei.value)


def test_store_wide_search_and_stats_leave_a_damaged_session_out_with_a_warning(store, store_dir):
    """One damaged session stopped store.search() and store.stats() with CorruptionError,
    returning nothing of the others; the command line names it and serves the rest. They now
    leave it out with a RuntimeWarning naming it; naming it in `session=` still raises."""
    for sid in ("a-bad", "b-good"):
        with store.create(id=sid) as s:
            s.append_many(turn(1))
    seg = next((store_dir / "sessions" / "a-bad").glob("*.seg"))
    data = bytearray(seg.read_bytes())
    data[data.index(b"list files") + 2] ^= 0x01
    seg.write_bytes(bytes(data))
    with pytest.warns(RuntimeWarning, match="a-bad"):
        found = store.search(text="two files")
    assert [f["session"] for f in found] == ["b-good"]
    with pytest.warns(RuntimeWarning, match="a-bad"):
        stats = store.stats()
    assert stats["sessions"] == 1
    with pytest.raises(agentlog.CorruptionError):
        store.search(session="a-bad", text="two files")


def test_search_signature_names_type(store):
    """inspect.signature(Store.search) showed `type=Ellipsis`."""
    sig = inspect.signature(agentlog.Store.search)
    assert sig.parameters["type"].default is None
    assert agentlog.Session.__enter__.__doc__


def test_follow_goes_on_after_a_purge_rewrites_the_session(store, store_dir, cli):
    """follow() went silent once `purge` (or `redact`) rewrote the session: it waited on the
    old files. It now follows the new ones: the purge's audit event, then what is appended."""
    with store.create(id="p") as s:
        s.append_many(turn(1))
    events = store.reader("p").follow(timeout=10)
    run_cli(cli, store_dir, "purge", "p", "--seq", "1..1")
    assert next(events)["type"] == "audit/purge"
    with store.open("p") as s:
        s.append(turn(2)[0])
    assert next(events)["type"] == "turn/start"
