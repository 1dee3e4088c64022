"""Compares agentlog's Python calls with plain JSON lines, in one process, on the same events.

    python bench/bench.py [--events N] [--messages-events M]

Prints, per operation, microseconds per event and the ratio against the JSON baseline
(ratio > 1: agentlog is faster). The issue's targets:

- s.append(dict)   >= 1x  f.write(json.dumps(ev) + "\\n")
- s.append(str)    >= 2x  f.write(json.dumps(ev) + "\\n")
- list(r.events()) >= 2x  [json.loads(l) for l in f]

and r.messages() on a session of M events (derived by the crate, no Python-side replay); with
$AGENTLOG_BIN set, the same derivation by the command line for comparison.
"""

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time

import agentlog


def turn_events(turn):
    """One agent turn: a user message, a step with text and a tool call, its result, an answer."""
    call = f"call_{turn}"
    return [
        {"type": "turn/start", "data": {"turn": turn}},
        {"type": "user/message", "data": {"role": "user", "content": [
            {"type": "text", "text": f"Please read config.toml and tell me the port (turn {turn})."}]}},
        {"type": "step/start", "data": {"turn": turn, "step": 1}},
        {"type": "assistant/message", "data": {"turn": turn, "step": 1, "message": {
            "role": "assistant", "content": [
                {"type": "text", "text": "Reading the file."},
                {"type": "tool_use", "id": call, "name": "read_file", "input": {"path": "config.toml"}}]},
            "usage": {"inputTokens": 1200 + turn, "outputTokens": 40}}},
        {"type": "tool/call", "data": {"turn": turn, "step": 1, "callId": call, "name": "read_file",
                                       "arguments": "{\"path\":\"config.toml\"}"}},
        {"type": "tool/result", "data": {"turn": turn, "step": 1, "callId": call, "message": {
            "role": "tool", "toolName": "read_file", "content": "port = 8080\nhost = \"0.0.0.0\"\n", "isError": False}}},
        {"type": "step/end", "data": {"turn": turn, "step": 1}},
        {"type": "step/start", "data": {"turn": turn, "step": 2}},
        {"type": "assistant/message", "data": {"turn": turn, "step": 2, "message": {
            "role": "assistant", "content": [{"type": "text", "text": "The port is 8080."}]},
            "usage": {"inputTokens": 1300 + turn, "outputTokens": 12, "cacheRead": 1024}}},
        {"type": "step/end", "data": {"turn": turn, "step": 2}},
        {"type": "turn/end", "data": {"turn": turn, "reason": {"kind": "completed"}}},
    ]


def make_events(n):
    events, turn = [], 1
    while len(events) < n:
        events.extend(turn_events(turn))
        turn += 1
    # Whole turns only, so that the session ends idle.
    return events


def best_of(fs, repeat):
    """The best of `repeat` runs of each f() (seconds), the runs interleaved: f1, f2, f1, f2, ...
    Each f prepares its own state and returns the time of the part measured."""
    times = [[] for _ in fs]
    for _ in range(repeat):
        for t, f in zip(times, fs):
            t.append(f())
    return [min(t) for t in times]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--messages-events", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    events = make_events(args.events)
    n = len(events)
    lines = [json.dumps(e, separators=(",", ":")) for e in events]
    root = tempfile.mkdtemp(prefix="agentlog-bench-")
    try:
        store = agentlog.Store(os.path.join(root, "store"))
        counter = [0]

        def new_id():
            counter[0] += 1
            return f"bench-{counter[0]}"

        # Baseline: json.dumps + write per event.
        def json_write():
            path = os.path.join(root, "baseline.jsonl")
            t = time.perf_counter()
            with open(path, "w") as f:
                for ev in events:
                    f.write(json.dumps(ev) + "\n")
            return time.perf_counter() - t

        def append_dict():
            s = store.create(id=new_id())
            t = time.perf_counter()
            for ev in events:
                s.append(ev)
            el = time.perf_counter() - t
            s.close()
            return el

        def append_str():
            s = store.create(id=new_id())
            t = time.perf_counter()
            for line in lines:
                s.append(line)
            el = time.perf_counter() - t
            s.close()
            return el

        # Interleaved repeats: on a shared machine each operation sees the same load.
        t_write, t_dict, t_str = best_of([json_write, append_dict, append_str], args.repeat)
        read_id = f"bench-{counter[0]}"  # the last append_str session

        # Reading: json.loads per line of the file written above vs list(r.events()).
        path = os.path.join(root, "baseline.jsonl")

        def json_read():
            t = time.perf_counter()
            with open(path) as f:
                out = [json.loads(l) for l in f]
            el = time.perf_counter() - t
            assert len(out) == n
            return el

        r = store.reader(read_id)

        def events_read():
            t = time.perf_counter()
            out = list(r.events())
            el = time.perf_counter() - t
            assert len(out) == n
            return el

        t_loads, t_events = best_of([json_read, events_read], args.repeat)

        # The events read back equal the ones appended (seq and time added).
        back = list(r.events())
        assert all(b["data"] == e["data"] and b["type"] == e["type"] for b, e in zip(back, events))

        def us(t):
            return f"{t / n * 1e6:7.2f} us/event"

        print(f"events: {n} (one process, same events; best of {args.repeat})")
        print(f"f.write(json.dumps(ev)+'\\n')   {us(t_write)}")
        print(f"s.append(dict)                 {us(t_dict)}   ratio {t_write / t_dict:5.2f}x  (target >= 1)")
        print(f"s.append(str)                  {us(t_str)}   ratio {t_write / t_str:5.2f}x  (target >= 2)")
        print(f"[json.loads(l) for l in f]     {us(t_loads)}")
        print(f"list(r.events())               {us(t_events)}   ratio {t_loads / t_events:5.2f}x  (target >= 2)")

        if args.messages_events:
            m_events = make_events(args.messages_events)
            mid = new_id()
            s = store.create(id=mid)
            for i in range(0, len(m_events), 10_000):
                s.append_many(m_events[i:i + 10_000])
            s.close()
            rm = store.reader(mid)
            t = time.perf_counter()
            msgs = rm.messages(format="openai")
            t_msgs = time.perf_counter() - t
            print(f"r.messages('openai') on {len(m_events)} events: {t_msgs * 1000:.0f} ms "
                  f"({len(msgs)} messages)")
            cli = os.environ.get("AGENTLOG_BIN")
            if cli:
                # The same derivation by the Rust command line (plus printing its JSON).
                t = time.perf_counter()
                subprocess.run([cli, "--store", os.path.join(root, "store"), "derive", mid,
                                "--format", "openai"], stdout=subprocess.DEVNULL, check=True)
                print(f"agentlog derive --format openai (the CLI, for comparison): "
                      f"{(time.perf_counter() - t) * 1000:.0f} ms")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
