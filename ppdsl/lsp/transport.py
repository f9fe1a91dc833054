"""The server's end of stdio: messages framed by `Content-Length`, read within caps, every framing error answered
or the connection closed with a message, and the server gone when its client is.

pygls' own loop exited with a traceback on `Content-Length: 999...9` (it tried to read that much), lost its
framing for good after a length that was too short (the rest of the body was taken for headers), and left a
request with `params: null` unanswered (it failed while decoding, before it knew the id). Here:

- a header line is read up to `MAX_HEADER_LINE` bytes, a body up to `MAX_MESSAGE_BYTES` (any document the server
  holds, `SCHEDULE_BYTES`, fits whatever its JSON escapes); a longer `Content-Length` is answered with an error
  (id null) and the server exits with a message (E078), for what follows it cannot be framed;
- a body that is not JSON is answered with a parse error (id null), and reading resumes at the next
  `Content-Length` header, inside that body or after it: one bad length costs one message;
- a request whose params do not fit its method (`null`, a wrong type) is answered with InvalidParams, its id kept;
- the server exits when stdin ends, and when the process that started it (`processId` of `initialize`) is gone,
  polled every `PARENT_POLL_SECONDS`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import sys
import threading
from collections.abc import Callable
from typing import BinaryIO

from lsprotocol.types import ResponseErrorMessage
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInternalError,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcParseError,
)
from pygls.io_ import StdoutWriter
from pygls.protocol.json_rpc import JsonRPCNotification, JsonRPCRequestMessage, JsonRPCResponseMessage
from pygls.server import JsonRPCServer

from ppdsl.common.diagnostics import Diagnostic, SourceCache, render
from ppdsl.common.files import SCHEDULE_BYTES, MiB

log = logging.getLogger(__name__)
MAX_HEADER_LINE = 4096
MAX_MESSAGE_BYTES = 6 * SCHEDULE_BYTES + MiB  # `\u0001` is six bytes of JSON for one of text
PARENT_POLL_SECONDS = 1.0
# searched for at a header line's end: after a body cut short, its rest is on the line before the next header
CONTENT_LENGTH = re.compile(rb"content-length:[ \t]*([0-9]+)[ \t]*\r?\n\Z", re.IGNORECASE)
LONG_LENGTH = re.compile(rb"(?:.*)content-length:[ \t]*[0-9]+\Z", re.IGNORECASE | re.DOTALL)


class Frames:
    """The messages of a byte stream: `next()` gives ("message", the decoded JSON), ("unparsable", None),
    ("too_large", the length) or ("eof", None). Blocking: it runs on a thread of its own."""

    def __init__(self, stream: BinaryIO):
        self.stream = stream
        self.pending = b""  # bytes taken back after a body that was not JSON

    def _readline(self) -> bytes:
        if self.pending:
            end = self.pending.find(b"\n")
            if end >= 0 or len(self.pending) >= MAX_HEADER_LINE:
                cut = min(end + 1 if end >= 0 else MAX_HEADER_LINE, MAX_HEADER_LINE)
                line, self.pending = self.pending[:cut], self.pending[cut:]
                return line
            line, self.pending = self.pending, b""
            return line + self.stream.readline(MAX_HEADER_LINE - len(line))
        return self.stream.readline(MAX_HEADER_LINE)

    def _read(self, n: int) -> bytes:
        taken, self.pending = self.pending[:n], self.pending[n:]
        return taken + self.stream.read(n - len(taken)) if len(taken) < n else taken

    def next(self) -> tuple[str, object]:
        length = None
        while True:
            line = self._readline()
            if not line:
                return "eof", None
            if line in (b"\r\n", b"\n"):
                if length is not None:
                    break
                continue  # a blank line before any header: nothing to frame yet
            if not line.endswith(b"\n") and len(line) >= MAX_HEADER_LINE:  # a header line past the cap
                if LONG_LENGTH.match(line):
                    length = MAX_MESSAGE_BYTES + 1  # thousands of digits
                while line and not line.endswith(b"\n"):  # the rest of the line is no header
                    line = self.stream.readline(MAX_HEADER_LINE)
                continue
            m = CONTENT_LENGTH.search(line)
            if m:
                digits = m.group(1).lstrip(b"0") or b"0"
                length = int(digits) if len(digits) <= 12 else MAX_MESSAGE_BYTES + 1
        if length > MAX_MESSAGE_BYTES:
            return "too_large", length
        body = self._read(length)
        if len(body) < length:
            return "eof", None
        try:
            return "message", json.loads(body)
        except (ValueError, RecursionError):  # not UTF-8, not JSON, nested past Python's stack, a 5000-digit number
            again = body.find(b"Content-Length:", 1)
            if again >= 0:  # a length too long took the next message's header: read again from there
                self.pending = body[again:] + self.pending
            return "unparsable", None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it exists, another user's
        return True
    with contextlib.suppress(OSError):  # a zombie is gone too, only not reaped yet
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    return True


class Connection:
    """One client over stdin / stdout: `run()` serves it, and returns the exit status."""

    def __init__(self, server: JsonRPCServer, stdin: BinaryIO, stdout: BinaryIO):
        self.server, self.protocol = server, server.protocol
        self.stdin, self.stdout = stdin, stdout

    def error(self, msg_id: object, err: JsonRpcException) -> None:
        self.protocol._send_response(msg_id, None, err.to_response_error())

    def structure(self, data: dict) -> object:
        """The message as pygls' types (what `structure_message` does, without logging a traceback for a message
        whose params do not fit: that is the client's mistake, answered, not the server's)."""
        protocol, converter = self.protocol, self.protocol._converter
        if "id" in data and "error" in data:
            kind = ResponseErrorMessage
        elif "id" in data and "method" in data:
            kind = protocol.get_message_type(data["method"]) or JsonRPCRequestMessage
        elif "id" in data:
            kind = protocol._result_types.pop(data["id"], None) or JsonRPCResponseMessage
        else:
            kind = protocol.get_message_type(data.get("method", "")) or JsonRPCNotification
        try:
            return converter.structure(data, kind)
        except Exception as err:
            inner = getattr(err, "exceptions", None)  # cattrs' validation errors are exception groups
            detail = str(inner[0]) if inner else str(err)
            raise JsonRpcInvalidParams(message=detail) from None

    def dispatch(self, data: object) -> None:
        msg_id = data.get("id") if isinstance(data, dict) else None
        is_request = isinstance(data, dict) and "method" in data and "id" in data
        if not isinstance(data, dict) or data.get("jsonrpc") != "2.0":
            self.error(None if not isinstance(msg_id, (int, str)) else msg_id, JsonRpcInvalidRequest())
            return
        try:
            message = self.structure(data)
        except JsonRpcException as err:
            if is_request and isinstance(msg_id, (int, str)):
                method = data.get("method")
                self.error(msg_id, JsonRpcInvalidParams(message=f"invalid params for `{method}`: {err.message}"))
            elif is_request:
                self.error(None, JsonRpcInvalidRequest(message="the request's id is not a number or a string"))
            else:
                log.warning("dropped a notification whose params do not fit its method: %s", data.get("method"))
            return
        try:
            self.protocol.handle_message(message)
        except (SystemExit, KeyboardInterrupt):
            raise
        except Exception as err:  # a message pygls cannot take: answer it if it was a request, keep serving
            log.exception("handling a message")
            if is_request and isinstance(msg_id, (int, str)):
                self.error(msg_id, JsonRpcInternalError(message=str(err)))

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()
        deliver: Callable = lambda item: loop.call_soon_threadsafe(queue.put_nowait, item)  # noqa: E731
        threading.Thread(target=_read_all, args=(self.stdin, deliver), name="ppdsl-stdin", daemon=True).start()
        watcher = asyncio.ensure_future(self.watch_parent(queue))
        try:
            while True:
                kind, payload = await queue.get()
                if kind == "message":
                    self.dispatch(payload)
                elif kind == "unparsable":
                    self.error(None, JsonRpcParseError(message="a message is not JSON; reading on at the next header"))
                elif kind == "too_large":
                    why = (
                        f"a message of {payload} bytes (Content-Length) is more than the {MAX_MESSAGE_BYTES} "
                        "the server reads"
                    )
                    self.error(None, JsonRpcInvalidRequest(message=f"{why}; closing the connection"))
                    diag = Diagnostic(
                        "E078",
                        f"{why}: what follows cannot be framed, so ppdsl lsp exits",
                        help="the client sent a wrong length: fix the client (or the editor extension) and restart",
                    )
                    print(render(diag, SourceCache()), file=sys.stderr)
                    return 1
                elif kind == "gone":
                    print(f"ppdsl lsp: the editor's process ({payload}) is gone: exiting", file=sys.stderr)
                    return 1
                else:  # stdin ended: the client closed the connection
                    return 0 if self.protocol._shutdown else 1
        finally:
            watcher.cancel()

    async def watch_parent(self, queue: asyncio.Queue) -> None:
        """Poll the client's process once `initialize` named it; a process not alive then is not one this
        server can see (another PID namespace: a container's editor), and is not watched."""
        pid = None
        while pid is None:
            await asyncio.sleep(PARENT_POLL_SECONDS / 4)
            given = getattr(self.server, "process_id", None)
            if isinstance(given, int) and given > 0:
                pid = given if _alive(given) else -1
        if pid < 0:
            return
        while _alive(pid):
            await asyncio.sleep(PARENT_POLL_SECONDS)
        queue.put_nowait(("gone", pid))


def _read_all(stream: BinaryIO, deliver: Callable) -> None:
    frames = Frames(stream)
    while True:
        try:
            item = frames.next()
        except (OSError, ValueError) as err:  # stdin closed under the thread
            log.info("reading stdin: %s", err)
            item = ("eof", None)
        deliver(item)
        if item[0] in ("eof", "too_large"):
            return


def serve_stdio(server: JsonRPCServer) -> int:
    """Serve the client on stdin / stdout until it exits, closes stdin or its process is gone; the exit status."""
    server._stop_event = threading.Event()
    server.protocol.set_writer(StdoutWriter(sys.stdout.buffer))
    connection = Connection(server, sys.stdin.buffer, sys.stdout.buffer)
    try:
        status = asyncio.run(connection.run())
    except SystemExit as done:  # the `exit` notification: 0 after `shutdown`, 1 without
        status = done.code if isinstance(done.code, int) else 0
    except BrokenPipeError:
        print("ppdsl lsp: the editor closed its end of the connection: exiting", file=sys.stderr)
        status = 1
    except KeyboardInterrupt:
        status = 130
    return status
