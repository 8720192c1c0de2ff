"""A real ``signoff serve`` for the benchmarks, and cheap clients to load it.

The clients are raw asyncio: one keep-alive HTTP/1.1 connection per :class:`Http`, and
WebSocket sockets (:class:`WsCounter`) that find what they count in the raw frames without
decoding the JSON. A benchmark of the server must not measure its own client: ``httpx`` and
the ``websockets`` library cost tens of microseconds a call or a message, which on a 2-core
machine is taken from the server being measured.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import re
import resource
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

API = "/api/v1"
HOST = "127.0.0.1"


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


def raise_open_files() -> int:
    """Raise this process's open-file limit to its hard limit (children inherit it)."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def pct(samples: list[float], q: float) -> float:
    """The q-quantile of samples in seconds, in milliseconds (0 when there are none)."""
    if not samples:
        return 0.0
    ordered = sorted(samples)
    return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process ``pid`` so far, from /proc (the OS's own count)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime (fields 14 and 15)


def tree_cpu_seconds(pid: int) -> float:
    """:func:`cpu_seconds` of process ``pid`` and of the children it runs (a SQLite writer
    process): the server's CPU wherever its work runs."""
    total = cpu_seconds(pid)
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            with contextlib.suppress(FileNotFoundError):  # it has just ended
                total += cpu_seconds(int(child))
    return total


def rss_bytes(pid: int) -> int:
    """Resident memory of process ``pid``, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


@dataclass
class Served:
    """A running ``signoff serve`` process."""

    process: subprocess.Popen[str]
    port: int
    admin: str

    @property
    def pid(self) -> int:
        """The server's process id (``python -m signoff serve`` is that process)."""
        return self.process.pid

    @property
    def base(self) -> str:
        """The server's URL."""
        return f"http://{HOST}:{self.port}"

    def stop(self) -> None:
        """Stop the server and wait for it."""
        self.process.terminate()
        try:
            self.process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.communicate()


def start_server(home: Path, *options: str) -> Served:
    """``signoff serve`` on a fresh SQLite file in ``home`` (also its config dir), once
    /healthz answers; its log lines (warnings and worse) go to ``home/serve.log``."""
    port = free_port()
    env = {**os.environ, "XDG_CONFIG_HOME": str(home), "SIGNOFF_LOG_LEVEL": "warning"}
    command = [sys.executable, "-m", "signoff", "serve", "--port", str(port)]
    command += ["--db", f"sqlite:///{home / 'bench.db'}", *options]
    with (home / "serve.log").open("w") as log:
        process = subprocess.Popen(  # noqa: S603 - this interpreter running signoff, our arguments
            command, stdout=subprocess.PIPE, stderr=log, text=True, env=env
        )
    assert process.stdout is not None
    admin = ""
    for line in process.stdout:  # the banner ends with "Ctrl+C stops." once it listens
        if line.startswith("admin token: "):
            admin = line.split(": ", 1)[1].strip()
        if line.startswith("Ctrl+C"):
            break
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex((HOST, port)) == 0:
                return Served(process, port, admin)
        if process.poll() is not None:
            raise SystemExit(f"signoff serve exited: {(home / 'serve.log').read_text()}")
        time.sleep(0.05)
    process.kill()
    raise SystemExit("signoff serve did not come up")


class Http:
    """One keep-alive HTTP/1.1 connection sending a bearer token; JSON in and out."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, port: int, token: str
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._port = port
        self._auth = f"Authorization: Bearer {token}\r\n"

    @classmethod
    async def open(cls, port: int, token: str) -> Http:
        """Connect to the server on ``port``."""
        reader, writer = await asyncio.open_connection(HOST, port)
        return cls(reader, writer, port, token)

    async def ready(self) -> None:
        """Connect again if the server closed the connection (``serve --header-timeout``
        closes one left idle)."""
        if self._reader.at_eof() or self._writer.is_closing():
            self._writer.close()
            self._reader, self._writer = await asyncio.open_connection(HOST, self._port)

    def send(self, method: str, path: str, body: Any = None) -> None:
        """Write one request (read its answer with :meth:`answer`; call :meth:`ready` first
        after the connection may have idled)."""
        payload = b"" if body is None else json.dumps(body).encode()
        head = f"{method} {path} HTTP/1.1\r\nHost: {HOST}\r\n{self._auth}"
        if body is not None:
            head += "Content-Type: application/json\r\n"
        head += f"Content-Length: {len(payload)}\r\n\r\n"
        self._writer.write(head.encode() + payload)

    async def answer(self) -> tuple[int, bytes]:
        """The status and body of the next response (bodies with Content-Length only)."""
        head = await self._reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        match = _LENGTH.search(head)
        body = await self._reader.readexactly(int(match[1])) if match else b""
        return status, body

    async def call(self, method: str, path: str, body: Any = None) -> Any:
        """Send a request and return its JSON answer; anything but a 2xx raises."""
        await self.ready()
        self.send(method, path, body)
        status, raw = await self.answer()
        if not 200 <= status < 300:
            raise AssertionError(f"{method} {path}: {status} {raw[:300]!r}")
        return json.loads(raw) if raw else None

    def close(self) -> None:
        """Close the connection."""
        self._writer.close()


_LENGTH = re.compile(rb"(?i)\r\ncontent-length: *(\d+)")


async def make_token(port: int, admin: str, name: str, role: str) -> str:
    """A new token made through the API."""
    http = await Http.open(port, admin)
    try:
        made = await http.call("POST", f"{API}/tokens", {"name": name, "role": role})
    finally:
        http.close()
    token: str = made["token"]
    return token


def ws_handshake(path: str, token: str) -> bytes:
    """A WebSocket upgrade request without extensions: frames come back uncompressed."""
    key = base64.b64encode(os.urandom(16)).decode()
    return (
        f"GET {path} HTTP/1.1\r\nHost: {HOST}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
        f"Authorization: Bearer {token}\r\n\r\n"
    ).encode()


_TEXT_FIN = 0x81
"""A whole text frame's first byte (the server sends each event as one)."""
_SEQ = b'{"seq": '
"""How an event's frame begins (``json.dumps``' separators; a heartbeat's does not)."""
_DECIDED_TYPE = b', "type": "decided"'
"""What follows a ``decided`` event's seq."""
_DECIDED = re.compile(rb'"request": \{"id": "([^"]+)"')
_CLOSE = b"\x88\x82\x00\x00\x00\x00\x03\xe8"  # masked, code 1000


SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
"""Linux's option (35 on x86-64 and arm64; Python does not name it) asking ``recvmsg`` for the
time the kernel received the data read: the arrival at the client's machine, whatever its own
process's scheduling does after."""

_STAMP_SPACE = socket.CMSG_SPACE(16)  # one struct timespec


@dataclass
class WsStats:
    """What one WebSocket saw: events in order, and when each ``decided`` event arrived."""

    events: int = 0
    heartbeats: int = 0
    gaps: int = 0
    repeats: int = 0
    last_seq: int = 0
    closed_by_server: int = 0
    decided: list[tuple[str, float, float]] = field(default_factory=list)
    """Per ``decided`` event: the request id, when the kernel received the data holding it
    and when this process read it (both ``time.time()`` seconds)."""


class WsCounter:
    """A WebSocket client that counts the server's frames without decoding their JSON.

    It reads its socket itself (``recvmsg`` from a reader callback) so that each read comes
    with the kernel's receive time (``SO_TIMESTAMPNS``; for TCP, the time of the newest data
    in the read, so never earlier than a frame's true arrival). A frame's seq is read from its
    first bytes (``{"seq": N,``); a ``decided`` event's request id is matched in the raw text
    only when the type that follows the seq says ``decided``. Pings are answered. The frames
    of a read are walked in one loop without a call per event: on a 2-core machine the
    client processes share the cores with the server, and what they spend is CPU the
    server's latency waits for (bench/RESULTS.md, "Latency at 60 lifecycles a second").
    """

    def __init__(
        self,
        sock: socket.socket,
        opened: asyncio.Future[None],
        on_event: Callable[[bytes], None] | None = None,
    ) -> None:
        self._sock = sock
        self._opened = opened
        self._on_event = on_event
        self._buffer = b""
        self._upgraded = False
        self._open = True
        self.stats = WsStats()

    def readable(self) -> None:
        """Read what the socket has (the event loop's reader callback)."""
        try:
            data, ancillary, _, _ = self._sock.recvmsg(1 << 18, _STAMP_SPACE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as error:
            self._lost(f"read failed: {error}")
            return
        read = time.time()
        if not data:
            self._lost("connection closed")
            return
        arrived = read
        for level, kind, raw in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(raw) >= 16:
                seconds, nanoseconds = struct.unpack("qq", raw[:16])
                arrived = seconds + nanoseconds / 1e9
        self._received(data, arrived, read)

    def _received(self, data: bytes, arrived: float, read: float) -> None:
        buffer = self._buffer + data if self._buffer else data
        if not self._upgraded:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                self._buffer = buffer
                return
            if buffer[9:12] != b"101":
                self._lost(buffer[: end + 4].decode(errors="replace"))
                return
            self._upgraded = True
            if not self._opened.done():
                self._opened.set_result(None)
            buffer = buffer[end + 4 :]
        # one loop over the frames, with no call and no attribute lookup for an event's frame:
        # the client processes' CPU is what a 2-core machine has left after the server's
        stats, on_event = self.stats, self._on_event
        last = stats.last_seq
        at, size = 0, len(buffer)
        while size - at >= 2:
            head, length = buffer[at], buffer[at + 1] & 0x7F
            if length < 126:
                start = at + 2
            elif length == 126:
                if size - at < 4:
                    break
                length, start = (buffer[at + 2] << 8) | buffer[at + 3], at + 4
            else:
                if size - at < 10:
                    break
                length, start = int.from_bytes(buffer[at + 2 : at + 10]), at + 10
            end = start + length
            if size < end:
                break
            if head == _TEXT_FIN and buffer.startswith(_SEQ, start):
                comma = buffer.index(b",", start, end)
                seq = int(buffer[start + len(_SEQ) : comma])
                if last and seq != last + 1:
                    if seq <= last:
                        stats.repeats += 1
                    else:
                        stats.gaps += 1
                last = max(seq, last)
                stats.events += 1
                if buffer.startswith(_DECIDED_TYPE, comma):
                    found = _DECIDED.search(buffer, comma, end)
                    if found:
                        stats.decided.append((found[1].decode(), arrived, read))
                if on_event is not None:
                    on_event(buffer[start:end])
            else:
                self._frame(head & 0x0F, buffer[start:end])
            at = end
        stats.last_seq = last
        self._buffer = buffer[at:]

    def _frame(self, opcode: int, payload: bytes) -> None:
        """A frame other than an event's: a heartbeat, a ping, a close."""
        if opcode == 1:
            self.stats.heartbeats += 1
        elif opcode == 9:
            # a pong echoes the ping's data (the server's keepalive checks it), masked with a
            # zero key, which leaves the data as it is
            self._send(bytes([0x8A, 0x80 | len(payload)]) + bytes(4) + payload)
        elif opcode == 8:
            self.stats.closed_by_server += 1
            self._shut()

    def _send(self, data: bytes) -> None:
        """Write a small frame (a pong, a close) without waiting; a full buffer drops it."""
        with contextlib.suppress(OSError):
            self._sock.send(data)

    def _shut(self) -> None:
        if self._open:
            self._open = False
            asyncio.get_running_loop().remove_reader(self._sock.fileno())
            self._sock.close()

    def _lost(self, why: str) -> None:
        if not self._opened.done():
            self._opened.set_exception(ConnectionError(f"WebSocket refused: {why}"))
        self._shut()

    def close(self) -> None:
        """Send a close frame and drop the connection."""
        if self._open:
            self._send(_CLOSE)
            self._shut()


async def open_ws(
    port: int, token: str, on_event: Callable[[bytes], None] | None = None
) -> WsCounter:
    """A :class:`WsCounter` on ``/api/v1/ws``, once the server accepted it; ``on_event`` is
    given each event's JSON text."""
    loop = asyncio.get_running_loop()
    opened: asyncio.Future[None] = loop.create_future()
    sock = socket.socket()
    sock.setblocking(False)
    try:
        await loop.sock_connect(sock, (HOST, port))
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        await loop.sock_sendall(sock, ws_handshake(f"{API}/ws", token))
    except OSError:
        sock.close()
        raise
    counter = WsCounter(sock, opened, on_event)
    loop.add_reader(sock.fileno(), counter.readable)
    await opened
    return counter
