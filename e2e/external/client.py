#!/usr/bin/python3
"""An independent Berth harness: Python standard library only, no Berth code.

It starts the orchestrator binary named on the command line with
`serve --stdio` (and the test-only tools, BERTH_TEST_TOOLS=1), speaks
JSON-RPC 2.0 with Content-Length framing over its stdin and stdout, and
checks the protocol's behaviours: initialize, runs, tools/list per surface,
refusal of higher tiers, every error code with the connection still usable,
a panicking tool, $/cancelRequest, harness/ask both ways, ownership of runs
across two WebSocket connections (a minimal RFC 6455 client below), and
that stopping a run leaves no child process.

Usage: client.py /path/to/orchestrator
Exit status 0 when every check passes; otherwise the first failure is
printed and the status is 1.
"""

import base64
import json
import os
import re
import select
import socket
import struct
import subprocess
import sys
import tempfile
import time

TIMEOUT = 60.0


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


class StdioConn:
    """One JSON-RPC connection over a child's stdio."""

    def __init__(self, argv, env):
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr, env=env)
        self.fd = self.proc.stdout.fileno()
        self.buf = b""
        self.next_id = 1
        self.on_request = {}  # method -> function(params) -> (result, error)

    def _fill(self):
        """Read whatever the child has written next into the buffer."""
        ready, _, _ = select.select([self.fd], [], [], TIMEOUT)
        check(ready, "no message from the orchestrator within %ss" % TIMEOUT)
        chunk = os.read(self.fd, 65536)
        check(chunk, "the orchestrator closed its stdout")
        self.buf += chunk

    def _read(self, n):
        while len(self.buf) < n:
            self._fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _read_line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line.decode()

    def send_raw(self, body):
        if isinstance(body, str):
            body = body.encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def send(self, msg):
        self.send_raw(json.dumps(msg))

    def recv(self):
        length = None
        while True:
            line = self._read_line()
            if line == "":
                break
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        check(length is not None, "a message without Content-Length")
        return json.loads(self._read(length))

    def recv_reply(self, want_id):
        """Read until the reply to want_id, answering Berth's requests."""
        while True:
            msg = self.recv()
            if "method" in msg:
                self._serve(msg)
                continue
            if msg.get("id") == want_id:
                return msg
            raise Failure("unexpected message %r while waiting for id %r" % (msg, want_id))

    def _serve(self, msg):
        handler = self.on_request.get(msg["method"])
        if "id" not in msg:
            return
        if handler is None:
            self.send({"jsonrpc": "2.0", "id": msg["id"],
                       "error": {"code": -32601, "message": "no handler for " + msg["method"]}})
            return
        result, error = handler(msg.get("params"))
        reply = {"jsonrpc": "2.0", "id": msg["id"]}
        if error is not None:
            reply["error"] = error
        else:
            reply["result"] = result
        self.send(reply)

    def request(self, method, params):
        rid = self.next_id
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return self.recv_reply(rid)

    def call(self, method, params):
        msg = self.request(method, params)
        check("error" not in msg, "%s failed: %r" % (method, msg.get("error")))
        return msg["result"]

    def close(self):
        self.proc.stdin.close()
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise Failure("the orchestrator did not exit after its stdin closed")
        self.stderr.seek(0)
        check(code == 0, "the orchestrator exited with %d: %s" % (code, self.stderr.read().decode()))


class WebSocketConn:
    """A minimal RFC 6455 client: text frames, masking, no extensions."""

    def __init__(self, host, port, token):
        self.sock = socket.create_connection((host, port), timeout=TIMEOUT)
        key = base64.b64encode(os.urandom(16)).decode()
        req = ("GET /v1/rpc HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n" % (host, port, key))
        if token is not None:
            req += "Authorization: Bearer %s\r\n" % token
        self.sock.sendall((req + "\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(1)
            check(chunk, "the server closed the connection during the handshake")
            head += chunk
        self.status = int(head.split(b" ", 2)[1])
        self.next_id = 1

    def _recv_exact(self, n):
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            check(chunk, "the server closed the WebSocket")
            out += chunk
        return out

    def send(self, msg):
        payload = json.dumps(msg).encode()
        header = bytes([0x81])
        n = len(payload)
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 65536:
            header += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def recv(self):
        b0, b1 = self._recv_exact(2)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack(">H", self._recv_exact(2))[0]
        elif n == 127:
            n = struct.unpack(">Q", self._recv_exact(8))[0]
        payload = self._recv_exact(n)
        check(b0 & 0x0F == 1, "expected a text frame, got opcode %d" % (b0 & 0x0F))
        return json.loads(payload)

    def request(self, method, params):
        rid = self.next_id
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        msg = self.recv()
        check(msg.get("id") == rid, "reply for the wrong id: %r" % msg)
        return msg

    def close(self):
        self.sock.close()


def text_of(result):
    return "\n".join(b.get("text", "") for b in result["content"] if b["type"] == "text")


def error_code(msg):
    return msg.get("error", {}).get("code")


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def check_stdio(binary, env, workdir):
    c = StdioConn([binary, "serve", "--stdio"], env)
    try:
        init = c.call("initialize", {"client": {"name": "client.py", "version": "1"}})
        check(init["server"]["name"] == "berth" and init["protocolVersion"], "initialize: %r" % init)

        run = c.call("run/start", {"workdir": workdir})
        run_id = run["runId"]
        check(run["enclosure"]["driver"] == "host", "run/start enclosure: %r" % run)

        # Surfaces and tiers.
        full = {t["name"]: t for t in c.call("tools/list", {"runId": run_id, "surface": "full"})["tools"]}
        for name, tier in (("test_echo", "read"), ("test_write", "write"), ("test_exec", "exec")):
            check(name in full and full[name]["tier"] == tier, "full surface: %s (%s) missing" % (name, tier))
            check(full[name]["inputSchema"]["type"] == "object", "inputSchema of %s" % name)
        for surface in ("plan", "readonly"):
            tools = c.call("tools/list", {"runId": run_id, "surface": surface})["tools"]
            check(tools and all(t["tier"] == "read" for t in tools), "%s lists a non-read tool: %r" % (surface, tools))
            res = c.call("tools/call", {"runId": run_id, "surface": surface, "name": "test_exec",
                                        "arguments": {"argv": ["true"]}})
            check(res["isError"] and "not allowed on the %s surface" % surface in text_of(res),
                  "test_exec from %s was not refused: %r" % (surface, res))
        res = c.call("tools/call", {"runId": run_id, "surface": "full", "name": "test_exec",
                                    "arguments": {"argv": ["echo", "from exec"]}})
        check(not res["isError"] and text_of(res) == "from exec\n", "test_exec on full: %r" % res)

        # Every error code, and the connection answers afterwards.
        def still_usable():
            res = c.call("tools/call", {"runId": run_id, "name": "test_echo", "arguments": {"text": "ok"}})
            check(text_of(res) == "ok", "the connection is not usable: %r" % res)

        for body, code, words in (
                ('{"jsonrpc":"2.0","id":50,"method":', -32700, "not valid JSON"),
                ('{"jsonrpc":"2.0","id":51}', -32600, ""),
                ('"just a string"', -32600, "must be a JSON object"),
                ('{"jsonrpc":"2.0","id":52,"method":"no/such"}', -32601, "no/such"),
                ('{"jsonrpc":"2.0","id":53,"method":"run/start","params":{"workdir":1}}', -32602, '"workdir"'),
                ('{"jsonrpc":"2.0","id":54,"method":"tools/call","params":{"runId":"%s","nme":"x"}}' % run_id,
                 -32602, '"nme"'),
                ('{"jsonrpc":"2.0","id":55,"method":"tools/list","params":{"runId":"run_none"}}', -32001,
                 "unknown run"),
        ):
            c.send_raw(body)
            msg = c.recv()
            check(error_code(msg) == code and words in msg["error"]["message"],
                  "%s: got %r, want code %d mentioning %r" % (body, msg, code, words))
            still_usable()

        # Oversized message (the limit is 16 MiB by default).
        big = json.dumps({"jsonrpc": "2.0", "id": 60, "method": "tools/call",
                          "params": {"runId": run_id, "name": "test_echo",
                                     "arguments": {"text": "x" * (17 << 20)}}})
        c.send_raw(big)
        msg = c.recv()
        check(error_code(msg) == -32600 and "exceeds the limit" in msg["error"]["message"], "oversized: %r" % msg)
        still_usable()

        # Schema validation names the field.
        res = c.call("tools/call", {"runId": run_id, "name": "test_echo", "arguments": {"text": 5}})
        check(res["isError"] and '"text"' in text_of(res), "bad arguments: %r" % res)

        # A panicking tool is an error result; the server goes on.
        res = c.call("tools/call", {"runId": run_id, "name": "test_panic", "arguments": {}})
        check(res["isError"], "test_panic: %r" % res)
        still_usable()

        # $/cancelRequest cancels a slow call.
        c.send({"jsonrpc": "2.0", "id": 70, "method": "tools/call",
                "params": {"runId": run_id, "name": "test_slow", "arguments": {"seconds": 60}}})
        time.sleep(0.2)
        started = time.time()
        c.send({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 70}})
        msg = c.recv_reply(70)
        check(error_code(msg) == -32800 and time.time() - started < 10, "cancel: %r" % msg)

        # harness/ask: an answer, then a refusal in the harness's words.
        asked = []
        c.on_request["harness/ask"] = lambda p: (asked.append(p) or
                                                 ({"outcome": "answered", "text": "blue"}, None))
        res = c.call("tools/call", {"runId": run_id, "name": "test_ask", "arguments": {"question": "colour?"}})
        check(not res["isError"] and '"text":"blue"' in text_of(res), "ask answered: %r" % res)
        check(asked and asked[0]["runId"] == run_id and asked[0]["card"]["question"] == "colour?",
              "harness/ask params: %r" % asked)
        c.on_request["harness/ask"] = lambda p: (None, {"code": -32000, "message": "nobody is here"})
        res = c.call("tools/call", {"runId": run_id, "name": "test_ask", "arguments": {"question": "q"}})
        check(res["isError"] and "nobody is here" in text_of(res), "ask refused: %r" % res)

        # Stopping a run leaves no child process.
        res = c.call("tools/call", {"runId": run_id, "name": "test_child", "arguments": {}})
        pid = int(text_of(res))
        check(alive(pid), "the child %d is not running" % pid)
        c.call("run/stop", {"runId": run_id})
        deadline = time.time() + 10
        while alive(pid):
            check(time.time() < deadline, "child %d outlived run/stop" % pid)
            time.sleep(0.05)
        msg = c.request("tools/list", {"runId": run_id})
        check(error_code(msg) == -32001, "tools/list after run/stop: %r" % msg)
    finally:
        c.close()


def check_websocket(binary, env, workdir, tmp):
    token_file = os.path.join(tmp, "token")
    with open(token_file, "w") as f:
        f.write("py-token\n")
    proc = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--token-file", token_file],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        addr = None
        deadline = time.time() + TIMEOUT
        while addr is None:
            check(time.time() < deadline, "serve printed no address")
            line = proc.stderr.readline().decode()
            check(line, "serve exited before listening")
            m = re.search(r"listening on http://(\S+):(\d+)", line)
            if m:
                addr = (m.group(1), int(m.group(2)))
        for token in (None, "wrong"):
            ws = WebSocketConn(addr[0], addr[1], token)
            check(ws.status == 401, "token %r: HTTP %d, want 401" % (token, ws.status))
            ws.close()
        a = WebSocketConn(addr[0], addr[1], "py-token")
        b = WebSocketConn(addr[0], addr[1], "py-token")
        check(a.status == 101 and b.status == 101, "upgrade: %d %d" % (a.status, b.status))
        run_id = a.request("run/start", {"workdir": workdir})["result"]["runId"]
        msg = b.request("tools/list", {"runId": run_id})
        check(error_code(msg) == -32001, "another connection saw the run: %r" % msg)
        msg = b.request("run/stop", {"runId": run_id})
        check(error_code(msg) == -32001, "another connection stopped the run: %r" % msg)
        msg = a.request("tools/list", {"runId": run_id})
        check("result" in msg, "the owner cannot list: %r" % msg)
        a.close()
        b.close()
    finally:
        proc.terminate()
        check(proc.wait(timeout=30) == 0, "serve did not exit cleanly on SIGTERM")


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    binary = sys.argv[1]
    env = dict(os.environ, BERTH_TEST_TOOLS="1")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = os.path.realpath(tmp)
        try:
            check_stdio(binary, env, workdir)
            check_websocket(binary, env, workdir, tmp)
        except Failure as f:
            print("FAIL:", f, file=sys.stderr)
            return 1
    print("ok: every check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
