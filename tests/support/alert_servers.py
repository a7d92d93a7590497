"""Where alerts land in tests: an SMTP server and a webhook (HTTP) server on free loopback ports,
each in a thread of the test process, keeping what they received."""

from __future__ import annotations

import json
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.support.ports import free_port

with warnings.catch_warnings():
    # The standard library's own SMTP server (deprecated, still in 3.11): no extra package for a test.
    warnings.simplefilter("ignore", DeprecationWarning)
    import asyncore
    import smtpd


class _Mailbox(smtpd.SMTPServer):
    def __init__(self, port: int) -> None:
        super().__init__(("127.0.0.1", port), None, decode_data=True)
        self.port = port
        self.messages: list[tuple[str, list[str], str]] = []

    def process_message(self, peer, mailfrom, rcpttos, data, **kwargs):
        self.messages.append((mailfrom, rcpttos, data))


@contextmanager
def smtp_server() -> Iterator[_Mailbox]:
    """Messages received: (from, recipients, the whole message with its headers)."""
    server = _Mailbox(free_port())
    thread = threading.Thread(target=asyncore.loop, kwargs={"timeout": 0.1, "map": server._map}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.close()
        thread.join(timeout=5)


@dataclass
class Webhook:
    url: str
    received: list[dict] = field(default_factory=list)


@contextmanager
def webhook_server() -> Iterator[Webhook]:
    """JSON bodies POSTed to it, answered 200."""
    hook = Webhook("")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            hook.received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    hook.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/storageops"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hook
    finally:
        server.shutdown()
        server.server_close()
