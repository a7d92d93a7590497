"""Start and stop real GridFTP servers (globus-gridftp-server) on loopback, with GSI, for tests.

DPM- and EOS-era sites still test gsiftp:// doors, so StorageOps copies through gfal2's GridFTP
plugin against the real server, not a double. GSI wants more than the TLS of davs://:

* a certificate directory with the CA's ``<hash>.signing_policy`` beside its ``<hash>.0``
  (Globus refuses a CA without one);
* the host certificate *and* its key owned by the account the server runs as: Globus checks
  the certificate's owner too ("File is not owned by current user"), so each server gets a copy;
* a grid-mapfile naming the user's distinguished name and the account it maps to: the server
  runs as ``nobody`` (it cannot switch users unless it is root), so every DN maps to ``nobody``;
* an RFC 3820 proxy of a user certificate, made by ``grid-proxy-init`` (globus-proxy-utils),
  which gfal2 presents per URL (``cred_set``), as an endpoint's x509_proxy.

The daemon forks a process per connection; it runs as our child in a session of its own and is
stopped by its group (never by name), as devsite.xrootd_server does with xrootd. The whole file
system is visible to it as its account sees it: URLs carry absolute paths below ``data_dir``.
Only the standard library is used.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from devsite.processes import dying_with_parent, guard_group, stop_processes
from devsite.xrootd_server import (
    LOCAL_COMMAND_TIMEOUT,
    LOOPBACK,
    TestCA,
    _chown_to_server,
    _chown_tree_to_server,
    _file_lock,
    _run_openssl,
    _server_account,
    free_port,
    make_traversable,
)

USER_SUBJECT = "/O=storageops/CN=storageops test user"
_CA_SUBJECT = "/O=storageops/CN=storageops throw-away test CA"
_USER_EXTENSIONS = """[ext]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment,dataEncipherment
extendedKeyUsage = clientAuth
"""


class GridFTPServerError(RuntimeError):
    """A server or its credentials could not be made or started."""


@dataclass(frozen=True)
class GridCredentials:
    """What GSI needs on both sides: a CA directory Globus accepts, a user proxy, a grid-mapfile."""

    cert_dir: Path  # X509_CERT_DIR: the CA, its hash link and its signing policy
    proxy: Path  # the user's proxy (certificate, key and chain in one file)
    gridmap: Path
    host_cert: Path
    host_key: Path
    subject: str = USER_SUBJECT


def make_grid_credentials(ca: TestCA, directory: Path, hours: int = 48) -> GridCredentials:
    """A user certificate signed by the test CA, a proxy of it, a signing policy and a
    grid-mapfile in ``directory``; reused while the proxy has an hour left (idempotent)."""
    directory = Path(directory).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    certs = directory / "certificates"
    creds = GridCredentials(
        cert_dir=certs,
        proxy=directory / "proxy.pem",
        gridmap=directory / "grid-mapfile",
        host_cert=ca.host_cert,
        host_key=ca.host_key,
    )
    with _file_lock(directory / ".lock"):
        if not _valid_for(creds.proxy, 3600):
            _create(ca, directory, creds, hours)
        for path in (directory, certs):
            os.chmod(path, 0o755)  # noqa: S103 -- the server account must read the CA and the map
    make_traversable(directory)
    return creds


def _valid_for(proxy: Path, seconds: int) -> bool:
    if not proxy.is_file():
        return False
    check = subprocess.run(
        ["openssl", "x509", "-in", str(proxy), "-noout", "-checkend", str(seconds)],
        capture_output=True,
        check=False,
        timeout=LOCAL_COMMAND_TIMEOUT,
    )
    return check.returncode == 0


def _create(ca: TestCA, directory: Path, creds: GridCredentials, hours: int) -> None:
    certs = creds.cert_dir
    shutil.rmtree(certs, ignore_errors=True)
    certs.mkdir()
    shutil.copyfile(ca.ca_cert, certs / "ca.pem")
    digest = subprocess.run(
        ["openssl", "x509", "-in", str(ca.ca_cert), "-noout", "-subject_hash"],
        capture_output=True,
        text=True,
        check=True,
        timeout=LOCAL_COMMAND_TIMEOUT,
    ).stdout.strip()
    (certs / f"{digest}.0").symlink_to("ca.pem")
    (certs / f"{digest}.signing_policy").write_text(
        f"access_id_CA X509 '{_CA_SUBJECT}'\npos_rights globus CA:sign\ncond_subjects globus '\"/O=storageops/*\"'\n"
    )
    key, csr, cert = directory / "userkey.pem", directory / "user.csr", directory / "usercert.pem"
    (directory / "user.cnf").write_text(_USER_EXTENSIONS)
    old_umask = os.umask(0o077)
    try:
        _run_openssl(["req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-subj", USER_SUBJECT,
                      "-out", str(csr)], cwd=directory)  # fmt: skip
        # The serial file is kept here, not beside the CA certificate (openssl's default): the CA's
        # folder is the doors' certificate directory, and XrdHttpTPC, which reads every file in it,
        # refused to start on a ca.srl it could not read (the https doors of stressed run 19).
        _run_openssl(["x509", "-req", "-in", str(csr), "-CA", str(ca.ca_cert), "-CAkey", str(ca.ca_key),
                      "-CAserial", str(directory / "ca.srl"), "-CAcreateserial", "-days", "30", "-sha256",
                      "-extfile", str(directory / "user.cnf"), "-extensions", "ext", "-out", str(cert)],
                     cwd=directory)  # fmt: skip
    finally:
        os.umask(old_umask)
    os.chmod(cert, 0o644)
    init = shutil.which("grid-proxy-init")
    if init is None:
        raise GridFTPServerError("grid-proxy-init is not installed (Debian package globus-proxy-utils)")
    made = subprocess.run(
        [
            init,
            "-cert",
            str(cert),
            "-key",
            str(key),
            "-out",
            str(creds.proxy),
            "-valid",
            f"{hours}:00",
            "-bits",
            "2048",
        ],
        env={**os.environ, "X509_CERT_DIR": str(certs)},
        capture_output=True,
        text=True,
        check=False,
        timeout=LOCAL_COMMAND_TIMEOUT,
    )
    if made.returncode != 0:
        raise GridFTPServerError(f"grid-proxy-init failed ({made.returncode}): {made.stderr.strip()}")
    creds.gridmap.write_text(f'"{USER_SUBJECT}" nobody\n')
    os.chmod(creds.gridmap, 0o644)


class GridFTPServer:
    """One ``globus-gridftp-server`` on 127.0.0.1 with GSI, writing below ``data_dir``."""

    def __init__(self, name: str, data_dir: Path, creds: GridCredentials, port: int | None = None) -> None:
        self.name = name
        self.data_dir = Path(data_dir).resolve()
        self.creds = creds
        self.port = port if port is not None else free_port()
        self.workdir = self.data_dir.parent / f"{name}.gridftp"
        self.log_path = self.workdir / "gridftp.log"
        self._proc: subprocess.Popen[bytes] | None = None

    def url_for(self, path: str) -> str:
        """gsiftp:// URL of ``path`` below ``data_dir`` (GridFTP paths are absolute)."""
        return f"gsiftp://{LOOPBACK}:{self.port}{self.local_path(path)}"

    def local_path(self, path: str) -> Path:
        return self.data_dir / path.lstrip("/")

    def start(self, timeout: float = 20.0) -> GridFTPServer:
        binary = shutil.which("globus-gridftp-server")
        if binary is None:
            raise GridFTPServerError("globus-gridftp-server is not installed (globus-gridftp-server-progs)")
        for folder in (self.data_dir, self.workdir):
            folder.mkdir(parents=True, exist_ok=True)
        _chown_tree_to_server(self.data_dir)
        make_traversable(self.data_dir)
        # Globus wants the host certificate owned by the account it runs as, like its key.
        cert, key = self.workdir / "hostcert.pem", self.workdir / "hostkey.pem"
        for source, copy, mode in ((self.creds.host_cert, cert, 0o644), (self.creds.host_key, key, 0o600)):
            shutil.copyfile(source, copy)
            os.chmod(copy, mode)
            _chown_to_server(copy)
        _chown_to_server(self.workdir)
        self.log_path.unlink(missing_ok=True)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "X509_USER_CERT": str(cert),
            "X509_USER_KEY": str(key),
            "X509_CERT_DIR": str(self.creds.cert_dir),
            "GRIDMAP": str(self.creds.gridmap),
        }
        # -s (the default): a daemon in the foreground, a process forked per connection; not -S,
        # which would detach from us, nor -debug, which serves one connection at a time.
        argv = [binary, "-p", str(self.port), "-control-interface", LOOPBACK, "-data-interface", LOOPBACK,
                "-d", "error,warn,info,transfer", "-l", str(self.log_path), "-disable-usage-stats"]  # fmt: skip
        with open(os.devnull, "rb") as devnull:
            self._proc = subprocess.Popen(
                dying_with_parent(argv, account=_server_account()),
                cwd=self.workdir,
                env=env,
                stdin=devnull,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        guard_group(self._proc.pid)
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.stop(timeout=3.0)
            raise
        return self

    def _wait_ready(self, timeout: float) -> None:
        """Up once its own log says it started (another process may answer on a lost port) and
        its port answers with the FTP greeting."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise GridFTPServerError(f"{self.name} exited with {self._proc.returncode}:\n{self.log_tail()}")
            if "Server started" in self.log_tail() and _greets(self.port):
                return
            time.sleep(0.1)
        raise GridFTPServerError(
            f"{self.name} did not answer on port {self.port} in {timeout:.0f} s:\n{self.log_tail()}"
        )

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:]) or "(no log written)"

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the daemon's group (it and its per-connection children), SIGKILL after timeout."""
        if self._proc is None:
            return
        try:
            stop_processes([(self.name, self._proc)], grace=timeout)
        finally:
            self._proc = None

    def __enter__(self) -> GridFTPServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _greets(port: int) -> bool:
    try:
        with socket.create_connection((LOOPBACK, port), timeout=1.0) as sock:
            return sock.recv(3) == b"220"
    except OSError:
        return False
