"""Every outbound call has a deadline, checked on the source (docs/operations.md, "Deadlines").

Every module of the project's packages is parsed with `ast` (nothing is imported) and each call
that reaches another server is looked at:

- HTTP through requests or httpx (``requests.post``, ``session.request``, ``(session or
  requests).get``), ``urlopen`` and ``http.client``'s connections: a ``timeout`` argument;
- ``smtplib.SMTP``/``SMTP_SSL`` and ``socket.create_connection``: a ``timeout`` argument (and
  Django's mail backend, which opens SMTP for ``send_mail``: ``EMAIL_TIMEOUT`` set);
- ``subprocess.run``, ``check_output``, ``check_call`` and ``call``: a ``timeout`` argument,
  whatever the program (the network tools among them, xrdfs, curl, gfal-*, hang on a silent
  server like any client; a local one costs nothing to bound);
- a gfal2 context's calls that talk to storage (stat, checksum, listdir, mkdir, unlink, open,
  filecopy …), and a copier's ``copy()``: inside a lambda handed to the deadline helper
  (``campaigns.runs.executors.deadline.with_deadline``, or ``Gfal2Copier._deadline``).

An exception is an entry of ``ALLOWED`` below with its reason; an entry that matches nothing
fails, so it is deleted rather than left to hide the next call without a deadline.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("storageops", "campaigns", "collectors", "alerts", "devsite")
NOT_PARSED = {"migrations", "__pycache__"}

HTTP_METHODS = {"get", "post", "put", "patch", "delete", "head", "options", "request", "send"}
SUBPROCESS_WAITERS = {"run", "check_output", "check_call", "call"}
GFAL2_CONTEXT_CALLS = {
    "stat", "lstat", "checksum", "listdir", "opendir", "mkdir", "mkdir_rec", "unlink", "rmdir", "rename",
    "open", "filecopy", "access", "chmod", "readlink", "symlink", "getxattr", "setxattr", "listxattr",
    "bring_online", "bring_online_poll", "release", "abort_bring_online", "token_retrieve",
}  # fmt: skip
DEADLINE_HELPERS = {"with_deadline", "_deadline", "call_with_deadline", "run_with_deadline"}

#: (file, function, kind) -> why that call needs no deadline here. ``function`` is the
#: qualified name of the innermost enclosing function ("Class.method").
_COPY_POOL = (
    "run by a thread of the copy pool (executors/copy_threads.py), whose enforce_deadlines "
    "cancels the copy's context at the campaign's timeout + DEADLINE_GRACE and gives the copy up "
    "GIVE_UP s later"
)
_READINESS_STEP = (
    "a readiness step runs whole under deadline.call_with_deadline (readiness._Runner.run), which "
    "cancels the copier's contexts at the endpoint's timeout and gives the step up GIVE_UP s later"
)
ALLOWED: dict[tuple[str, str, str], str] = {
    ("campaigns/runs/engines/gfal2/client.py", "Gfal2Copier.copy", "gfal2"): _COPY_POOL,
    ("campaigns/runs/engines/gfal2/client.py", "Gfal2Copier._stream", "gfal2"): _COPY_POOL + " (called by copy)",
    ("campaigns/runs/engines/gfal2/client.py", "Gfal2Copier._check_streamed", "gfal2"): _COPY_POOL
    + " (called by _stream)",
    ("campaigns/runs/engines/gfal2/checksum.py", "Gfal2Checksummer.copy", "gfal2"): _COPY_POOL,
    ("campaigns/runs/executors/copy_threads.py", "CopyThreads._run", "gfal2"): "the copy pool itself: "
    "enforce_deadlines cancels a copy past its deadline and gives it up GIVE_UP s later",
    # The readiness check's copies (its download and third-party steps); its uploads, stats,
    # checksums and deletes go through the copier's deadlined calls.
    ("campaigns/readiness/__init__.py", "_Runner._download", "gfal2"): _READINESS_STEP,
    ("campaigns/readiness/__init__.py", "_Runner._tpc", "gfal2"): _READINESS_STEP,
}


@dataclass(frozen=True)
class Offence:
    path: str
    line: int
    function: str
    kind: str
    call: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line} in {self.function or '<module>'}: {self.call} ({self.kind}) has no deadline"


def _modules() -> list[Path]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if not NOT_PARSED.intersection(path.relative_to(ROOT).parts):
                found.append(path)
    return found


def _has_keyword(call: ast.Call, name: str) -> bool:
    return any(k.arg == name for k in call.keywords) or any(k.arg is None for k in call.keywords)


def _is_http_receiver(receiver: ast.expr) -> bool:
    """requests, httpx, a requests session (``self.session``, ``(session or requests)``);
    not Django's ``request.session``, a dict of the visitor's session."""
    text = ast.unparse(receiver)
    if "request.session" in text:
        return False
    return bool(re.search(r"\b(requests|httpx)\b", text) or re.search(r"(^|\.)session$", text))


def _kind(call: ast.Call) -> tuple[str, str] | None:
    """(kind, what) of an outbound call that lacks its timeout; None when fine or not outbound."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    text = ast.unparse(func)
    timed = _has_keyword(call, "timeout")
    if isinstance(func, ast.Attribute) and name in HTTP_METHODS and _is_http_receiver(func.value):
        return None if timed else ("http", text)
    if name == "urlopen":
        return None if timed or len(call.args) >= 3 else ("http", text)
    if name in ("HTTPConnection", "HTTPSConnection"):
        return None if timed or len(call.args) >= 3 else ("http", text)
    if name in ("SMTP", "SMTP_SSL", "LMTP"):
        return None if timed or len(call.args) >= 4 else ("smtp", text)
    if name == "create_connection":
        return None if timed or len(call.args) >= 2 else ("socket", text)
    if isinstance(func, ast.Attribute) and name in SUBPROCESS_WAITERS and ast.unparse(func.value) == "subprocess":
        return None if timed else ("subprocess", text)
    if isinstance(func, ast.Attribute) and name in GFAL2_CONTEXT_CALLS and _is_gfal2_context(func.value):
        return ("gfal2", text)  # judged by where it is (under a deadline helper or not)
    if isinstance(func, ast.Attribute) and name == "copy" and "copier" in ast.unparse(func.value):
        # A copier's copy() calls its context's filecopy with no deadline of its own: the copy
        # pool's is what bounds it, so a copy anywhere else needs one too.
        return ("gfal2", text)
    return None


def _is_gfal2_context(receiver: ast.expr) -> bool:
    text = ast.unparse(receiver)
    return text in ("ctx", "context", "self.ctx", "self.context") or "_context()" in text or "creat_context()" in text


class _Walker(ast.NodeVisitor):
    def __init__(self, path: str) -> None:
        self.path = path
        self.scope: list[str] = []
        self.deadline_lambdas: set[int] = set()  # id() of lambdas handed to a deadline helper
        self.lambdas: list[ast.Lambda] = []
        self.found: list[Offence] = []

    def _scoped(self, node) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scoped

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.lambdas.append(node)
        self.generic_visit(node)
        self.lambdas.pop()

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        helper = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if helper in DEADLINE_HELPERS:
            self.deadline_lambdas.update(id(arg) for arg in node.args if isinstance(arg, ast.Lambda))
        kind = _kind(node)
        if kind is not None:
            what, text = kind
            under_deadline = what == "gfal2" and any(id(lam) in self.deadline_lambdas for lam in self.lambdas)
            if not under_deadline:
                self.found.append(Offence(self.path, node.lineno, ".".join(self.scope), what, text))
        self.generic_visit(node)


def _offences() -> list[Offence]:
    found = []
    for path in _modules():
        walker = _Walker(str(path.relative_to(ROOT)))
        walker.visit(ast.parse(path.read_text(), str(path)))
        found += walker.found
    return found


def test_every_outbound_call_has_a_deadline():
    offences = [o for o in _offences() if (o.path, o.function, o.kind) not in ALLOWED]
    assert not offences, "calls without a deadline:\n" + "\n".join(map(str, offences))


def test_every_allowed_exception_still_matches_a_call():
    matched = {(o.path, o.function, o.kind) for o in _offences()}
    stale = [key for key in ALLOWED if key not in matched]
    assert not stale, f"ALLOWED entries that match no call any more (delete them): {stale}"
    assert all(reason.strip() for reason in ALLOWED.values())


def test_django_mail_has_a_timeout():
    """send_mail opens SMTP through Django's backend, which takes its timeout from the settings."""
    assert settings.EMAIL_TIMEOUT and settings.EMAIL_TIMEOUT <= 30


def _offences_in(source: str) -> list[Offence]:
    walker = _Walker("example.py")
    walker.visit(ast.parse(source))
    return walker.found


def test_the_check_finds_each_kind_of_call_without_a_deadline():
    """The check itself: each kind is caught, and the same call with its deadline passes."""
    bad = """
import requests, smtplib, socket, subprocess, urllib.request
def f(session, ctx, url):
    requests.post(url, json={})
    session.get(url)
    (session or requests).get(url)
    urllib.request.urlopen(url)
    smtplib.SMTP("mail", 25)
    socket.create_connection(("h", 1))
    subprocess.run(["xrdfs", "h", "stat", "/"])
    ctx.stat(url)
    self._context()[0].checksum(url, "adler32")
    with_deadline(ctx, ctx.stat, 5, "stat")  # the call itself, not a lambda: not under the deadline
    self.copier(step).copy(job)
"""
    good = """
import requests, smtplib, socket, subprocess, urllib.request
def f(session, ctx, url, request):
    requests.post(url, json={}, timeout=10)
    session.get(url, timeout=5)
    (session or requests).get(url, timeout=5)
    urllib.request.urlopen(url, timeout=5)
    smtplib.SMTP("mail", 25, timeout=10)
    socket.create_connection(("h", 1), 2)
    subprocess.run(["xrdfs", "h", "stat", "/"], timeout=20)
    with_deadline(ctx, lambda: ctx.stat(url), 5, "stat")
    self._deadline(ctx, lambda: ctx.listdir(url), "listing")
    request.session.get("key")
    ctx.transfer_parameters()
"""
    kinds = [o.kind for o in _offences_in(bad)]
    assert kinds == ["http", "http", "http", "http", "smtp", "socket", "subprocess", "gfal2", "gfal2", "gfal2"], kinds
    assert _offences_in(good) == []
