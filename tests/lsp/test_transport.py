"""`ppdsl lsp`'s framing on raw stdio: an oversized `Content-Length` is answered and the server exits with a message
(E078), a wrong length costs one message and the stream is read on, a request with null params is answered with
InvalidParams, and the server exits when stdin ends or the editor's process is gone."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time

import pytest
from conftest import SERVER

from paths import ROOT

WAIT = 30.0


class Raw:
    """The server as a subprocess spoken to in bytes."""

    def __init__(self):
        env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        self.proc = subprocess.Popen(
            SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
        self.buffer = b""

    def send(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def message(self, obj: dict, extra: int = 0) -> None:
        """Send `obj` framed, its Content-Length off by `extra` bytes."""
        body = json.dumps(obj).encode()
        self.send(b"Content-Length: %d\r\n\r\n" % (len(body) + extra) + body)

    def _fill(self, deadline: float) -> None:
        ready, _, _ = select.select([self.proc.stdout], [], [], max(deadline - time.monotonic(), 0))
        if not ready:
            raise TimeoutError(f"no answer; the server's stderr: {self.stderr()}")
        chunk = os.read(self.proc.stdout.fileno(), 65536)
        if not chunk:
            raise EOFError(f"the server closed stdout; its stderr: {self.stderr()}")
        self.buffer += chunk

    def receive(self) -> dict:
        deadline = time.monotonic() + WAIT
        while b"\r\n\r\n" not in self.buffer:
            self._fill(deadline)
        head, _, rest = self.buffer.partition(b"\r\n\r\n")
        length = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
        self.buffer = rest
        while len(self.buffer) < length:
            self._fill(deadline)
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return json.loads(body)

    def answer(self, msg_id) -> dict:
        """The response to `msg_id` (notifications and other responses before it skipped)."""
        while True:
            message = self.receive()
            if "method" not in message and message.get("id") == msg_id:
                return message

    def initialize(self, process_id: int | None = None) -> None:
        params = {"processId": process_id, "capabilities": {}, "rootUri": None}
        self.message({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
        assert "result" in self.answer(0)
        self.message({"jsonrpc": "2.0", "method": "initialized", "params": {}})

    def exit_status(self, seconds: float = WAIT) -> int:
        return self.proc.wait(seconds)

    def stderr(self) -> str:
        if self.proc.poll() is None:
            return "(still running)"
        return self.proc.stderr.read().decode(errors="replace")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            stream.close()


@pytest.fixture
def raw():
    server = Raw()
    yield server
    server.close()


def test_an_oversized_content_length_is_answered_and_the_server_exits_cleanly(raw: Raw):
    raw.send(b"Content-Length: " + b"9" * 5000 + b"\r\n\r\n{}")
    error = raw.answer(None)
    assert error["error"]["code"] == -32600
    assert "more than the" in error["error"]["message"]
    assert raw.exit_status() == 1
    stderr = raw.stderr()
    assert "error[E078]" in stderr and "= help:" in stderr and "Traceback" not in stderr


def test_a_short_content_length_costs_one_message(raw: Raw):
    raw.initialize()
    hover = {"jsonrpc": "2.0", "id": 1, "method": "$/unknown", "params": {}}
    raw.message(hover, extra=-5)  # the body is cut: its last 5 bytes come before the next header
    raw.message({"jsonrpc": "2.0", "id": 2, "method": "$/unknown", "params": {}})
    assert raw.answer(None)["error"]["code"] == -32700
    assert raw.answer(2)["error"]["code"] == -32601  # read on: the next message is answered (method not found)


def test_a_long_content_length_costs_one_message(raw: Raw):
    raw.initialize()
    raw.message({"jsonrpc": "2.0", "id": 1, "method": "$/unknown", "params": {}}, extra=30)  # takes the next header
    raw.message({"jsonrpc": "2.0", "id": 2, "method": "$/unknown", "params": {}})
    raw.message({"jsonrpc": "2.0", "id": 3, "method": "$/unknown", "params": {}})
    assert raw.answer(None)["error"]["code"] == -32700
    assert raw.answer(2)["error"]["code"] == -32601 and raw.answer(3)["error"]["code"] == -32601


def test_a_request_with_null_params_is_answered_with_invalid_params(raw: Raw):
    raw.initialize()
    raw.message({"jsonrpc": "2.0", "id": 7, "method": "textDocument/hover", "params": None})
    error = raw.answer(7)["error"]
    assert error["code"] == -32602 and "textDocument/hover" in error["message"]
    raw.send(b"Content-Length: 2\r\n\r\n[]")  # not a request object at all
    assert raw.answer(None)["error"]["code"] == -32600
    raw.message({"jsonrpc": "2.0", "id": 8, "method": "shutdown"})
    assert raw.answer(8)["result"] is None
    raw.message({"jsonrpc": "2.0", "method": "exit"})
    assert raw.exit_status() == 0 and "Traceback" not in raw.stderr()


def test_the_server_exits_when_stdin_ends(raw: Raw):
    raw.initialize()
    raw.proc.stdin.close()
    assert raw.exit_status() == 1  # no `shutdown` came first
    assert "Traceback" not in raw.stderr()


def test_the_server_exits_when_the_editors_process_is_gone(raw: Raw):
    editor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        raw.initialize(editor.pid)
        time.sleep(1.5)
        assert raw.proc.poll() is None  # watched, alive: still serving
    finally:
        editor.kill()
        editor.wait()
    assert raw.exit_status() == 1
    stderr = raw.stderr()
    assert f"process ({editor.pid}) is gone" in stderr and "Traceback" not in stderr
