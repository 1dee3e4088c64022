import json
import sys
import tempfile

import agentlog

store = agentlog.Store(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp())


def read_file(path):
    return "port = 8080\n"  # the tool (a stand-in for real work)


with store.create(title="demo", header={"cwd": "/work"}) as s:
    s.append({"type": "system/message", "data": {"role": "system", "content": [
        {"type": "text", "text": "You are a coding agent."}]}})
    s.append({"type": "turn/start", "data": {"turn": 1}})
    s.append({"type": "user/message", "data": {"role": "user", "content": [
        {"type": "text", "text": "Which port does the server use?"}]}})
    # Step 1: the model asks for a tool (its reply would come from the provider's API).
    s.append({"type": "step/start", "data": {"turn": 1, "step": 1}})
    s.append({"type": "assistant/message", "data": {"turn": 1, "step": 1, "message": {
        "role": "assistant", "content": [
            {"type": "tool_use", "id": "call_1", "name": "read_file", "input": {"path": "config.toml"}}]},
        "usage": {"inputTokens": 812, "outputTokens": 25}}})
    s.append({"type": "tool/call", "data": {"turn": 1, "step": 1, "callId": "call_1",
                                            "name": "read_file", "arguments": '{"path":"config.toml"}'}})
    s.append({"type": "tool/result", "data": {"turn": 1, "step": 1, "callId": "call_1", "message": {
        "role": "tool", "toolName": "read_file", "content": read_file("config.toml"), "isError": False}}})
    s.append({"type": "step/end", "data": {"turn": 1, "step": 1}})
    # Step 2: the model answers.
    s.append({"type": "step/start", "data": {"turn": 1, "step": 2}})
    s.append({"type": "assistant/message", "data": {"turn": 1, "step": 2, "message": {
        "role": "assistant", "content": [{"type": "text", "text": "Port 8080."}]}}})
    s.append({"type": "step/end", "data": {"turn": 1, "step": 2}})
    s.append({"type": "turn/end", "data": {"turn": 1, "reason": {"kind": "completed"}}})

    # A broken event is refused, and nothing is written.
    try:
        s.append({"type": "turn/end", "data": {"turn": 1, "reason": {"kind": "completed"}}})
    except agentlog.LifecycleError as e:
        print("refused:", e.rule, "at seq", e.seq)

    print(s.status()["state"])                         # idle
    history = s.messages(format="openai")              # what the next request sends
    print(json.dumps(history, indent=1))

r = store.reader(s.id)
print(len(r), [e["type"] for e in r.events(start=9)])  # 12 ['assistant/message', 'step/end', 'turn/end']
print(store.stats(s.id)["tokens"]["input"])            # 812
