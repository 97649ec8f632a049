"""A tiny MCP server for tests/test_mcp.py: NDJSON JSON-RPC 2.0 on stdin/stdout (MCP 2024-11-05).

    python tests/mcp_echo.py [--grandchild] [--no-tools] [--init-error]

Tools: say (the text back), sum (a + b), oops (an isError result), boom (answers, then exits), nap (sleeps
`seconds` first), chatty (a notification, a reply with another id and a line that is not JSON before its reply,
all in one write), parts (two text parts, an image part and a part that is not an object), info (its name:
as server `get`, its `get_info` collides with the built-in tool). --grandchild leaves a
child of its own holding stdout and stderr open; --no-tools lists none; --init-error refuses `initialize`.
Each process counts its calls: `count` answers how many calls it has had (a respawn starts again at 1).
"""

import json
import subprocess
import sys
import time

ARGS = set(sys.argv[1:])
TOOLS = [
    {"name": "say", "description": "Says the text back",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
    {"name": "sum", "description": "Adds a and b", "inputSchema": {"type": "object", "properties": {
        "a": {"type": "number"}, "b": {"type": "number"}}}},
    {"name": "oops", "description": "Always an error"},
    {"name": "boom", "description": "Answers, then the process exits", "inputSchema": "not an object"},
    {"name": "nap", "description": "Sleeps", "inputSchema": {"type": "object"}},
    {"name": "chatty", "description": "Noise before its reply", "inputSchema": {"type": "object"}},
    {"name": "parts", "description": "Several content parts", "inputSchema": {"type": "object"}},
    {"name": "count", "description": "Calls so far", "inputSchema": {"type": "object"}},
    {"name": "info", "description": "Who answers", "inputSchema": {"type": "object", "properties": {}}},
]
calls = 0


def text(req_id, s, **kw):
    return {"jsonrpc": "2.0", "id": req_id, "result": {"content": [{"type": "text", "text": s}], **kw}}


def call(req_id, name, args):
    global calls
    calls += 1
    if name == "say":
        return text(req_id, "said: " + str(args.get("text")))
    if name == "sum":
        return text(req_id, str(args.get("a", 0) + args.get("b", 0)))
    if name == "oops":
        return text(req_id, "it went wrong", isError=True)
    if name == "boom":
        sys.stdout.write(json.dumps(text(req_id, "bye")) + "\n")
        sys.stdout.flush()
        sys.exit(3)
    if name == "nap":
        time.sleep(args.get("seconds", 1))
        return text(req_id, "awake")
    if name == "chatty":
        noise = [{"jsonrpc": "2.0", "method": "notifications/progress", "params": {"p": 1}},
                 {"jsonrpc": "2.0", "id": req_id + 1000, "result": {}}]
        sys.stdout.write("".join(json.dumps(n) + "\n" for n in noise) + "not json\n" + json.dumps(text(req_id, "done"))
                         + "\n")
        sys.stdout.flush()
        return None
    if name == "parts":
        return {"jsonrpc": "2.0", "id": req_id, "result": {"content": [
            {"type": "text", "text": "one"}, {"type": "image", "data": "x"}, 5, {"type": "text", "text": "two"}]}}
    if name == "count":
        return text(req_id, str(calls))
    if name == "info":
        return text(req_id, "mcp-echo")
    return {"jsonrpc": "2.0", "id": req_id, "error": {"code": -32602, "message": f"Unknown tool: {name}"}}


def main():
    if "--grandchild" in ARGS:
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    for line in sys.stdin:
        try:
            req = json.loads(line)
        except ValueError:
            continue
        rid, method, params = req.get("id"), req.get("method"), req.get("params") or {}
        if rid is None:
            continue                                 # a notification
        if method == "initialize":
            if "--init-error" in ARGS:
                out = {"jsonrpc": "2.0", "id": rid, "error": {"code": -1, "message": "not today"}}
            else:
                out = {"jsonrpc": "2.0", "id": rid, "result": {"protocolVersion": "2024-11-05",
                                                               "capabilities": {"tools": {}},
                                                               "serverInfo": {"name": "mcp-echo", "version": "0"}}}
        elif method == "tools/list":
            out = {"jsonrpc": "2.0", "id": rid, "result": {"tools": [] if "--no-tools" in ARGS else TOOLS}}
        elif method == "tools/call":
            out = call(rid, params.get("name"), params.get("arguments") or {})
        else:
            out = {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}}
        if out is not None:
            sys.stdout.write(json.dumps(out) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
