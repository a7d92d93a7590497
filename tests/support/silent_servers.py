"""Servers that accept a connection and never answer, to prove a client's deadline: a TCP one
(SMTP's greeting, XRootD's handshake never come) and an HTTP one (it reads the request, then
stays silent). Each runs in a thread of the test process on a free loopback port and holds
every connection open until the test ends, as a hung door or a stuck proxy would."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class SilentServer:
    port: int
    #: Connections accepted so far; the request bytes each sent (HTTP reads them).
    accepted: int = 0
    received: list[bytes] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@contextmanager
def _silent(read_request: bool) -> Iterator[SilentServer]:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    listener.settimeout(0.2)
    server = SilentServer(listener.getsockname()[1])
    held: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            held.append(conn)
            server.accepted += 1
            if read_request:
                conn.settimeout(2)
                try:
                    server.received.append(conn.recv(65536))
                except OSError:
                    pass

    thread = threading.Thread(target=serve, name=f"silent-{server.port}", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()
        for conn in held:
            conn.close()


@contextmanager
def silent_tcp_server() -> Iterator[SilentServer]:
    """Accepts every connection and never sends a byte (nor reads one)."""
    with _silent(read_request=False) as server:
        yield server


@contextmanager
def silent_http_server() -> Iterator[SilentServer]:
    """Accepts every connection, reads the request, and never responds."""
    with _silent(read_request=True) as server:
        yield server
