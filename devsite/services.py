"""The site's own PostgreSQL and Redis, for `make run` and `make test` on a machine without them.

Started from the distribution's packages (``postgresql``, ``redis-server``) before Django's
settings load, since the settings read DATABASE_URL and CELERY_BROKER_URL at import: so this
module imports nothing of Django, only the standard library, psycopg and devsite's process
helpers. ``devsite.launch`` uses it; tests use it directly.

Layout under the var folder, per *set* of services ("site" for `make run`, "test" for
`make test`, so that both may run beside each other on one var folder)::

    var/services/<set>/postgres/          the cluster (initdb'd once, kept between starts)
    var/services/<set>/postgres.password  the password of its "storageops" role (0600)
    var/services/<set>/redis/             redis-server's working folder and its config (0600)
    var/run/<set>/{launcher,postgres,redis}.pid   PidFile records, as runsite's children
    var/log/<set>-{postgres,redis}.log
    var/secrets.key                       the key sealing the site's secrets (0600), made once
                                          when neither STORAGEOPS_SECRETS_KEY nor its _FILE is set

Both listen on free loopback ports chosen at each start, with a password (another user of
the machine may reach a loopback port, not our files), and run as ``nobody`` when started by
root (PostgreSQL refuses root). Each runs in a session of its own with the parent-death
signal and the group guard of ``devsite.processes``: nothing outlives the process that
started it, even a SIGKILLed one. What a crash leaves (pid files, a postmaster.pid whose
postgres is dead, or alive with its pid reused by another process) is found by the next
start and cleared (``clear_leftovers``).

Redis keeps nothing on disk (no RDB, no AOF): the database is the truth, Celery messages
only say "go and look at run 42", and a lost message is found again by ``recover_runs``
from the database. A crash then never leaves a half-written file behind to repair.
"""

from __future__ import annotations

import base64
import contextlib
import glob
import os
import pwd
import re
import secrets
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from devsite.processes import (
    PidFile,
    cmdline,
    describe,
    dying_with_parent,
    guard_group,
    is_alive,
    release_group,
    session_members,
    signal_session,
    start_time,
)
from devsite.supervisor import Leftovers
from devsite.xrootd_server import SERVER_USER, XRootDServerError, free_port, make_traversable

LOOPBACK = "127.0.0.1"
DATABASE = "storageops"
ROLE = "storageops"
#: The launcher's own pid file in the set's pid folder; the services' are ``<name>.pid``.
LAUNCHER = "launcher"
#: Unix socket paths are limited to 107 bytes; PostgreSQL's is "<dir>/.s.PGSQL.<port>".
_SOCKET_PATH_MAX = 107


class ServiceError(RuntimeError):
    """A service could not be prepared, started or stopped; the message says what to do."""


def default_var_dir() -> Path:
    """The var folder as storageops.settings computes it (STORAGEOPS_VAR_DIR or ./var)."""
    return Path(os.environ.get("STORAGEOPS_VAR_DIR") or Path(__file__).resolve().parent.parent / "var")


def service_account() -> pwd.struct_passwd | None:
    """Whom the servers run as: ``nobody`` when we are root, else ourselves (None)."""
    return pwd.getpwnam(SERVER_USER) if os.geteuid() == 0 else None


@dataclass(frozen=True)
class ServiceDirs:
    """Where one set of services keeps its data, pid files and logs."""

    var_dir: Path
    name: str = "site"

    @property
    def root(self) -> Path:
        return self.var_dir / "services" / self.name

    @property
    def pid_dir(self) -> Path:
        return self.var_dir / "run" / self.name

    @property
    def log_dir(self) -> Path:
        return self.var_dir / "log"

    def make(self) -> None:
        for path in (self.root, self.pid_dir, self.log_dir):
            path.mkdir(parents=True, exist_ok=True)
        try:
            make_traversable(self.root)  # no-op unless root: nobody must reach its data folder
        except XRootDServerError as exc:
            raise ServiceError(f"{exc} (STORAGEOPS_VAR_DIR={self.var_dir})") from None


def _own(path: Path, account: pwd.struct_passwd | None) -> None:
    if account is not None:
        os.chown(path, account.pw_uid, account.pw_gid)


def _secret(path: Path) -> str:
    """A password kept in ``path`` (0600, ours), made on first use."""
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    value = secrets.token_urlsafe(24)
    path.touch(mode=0o600)
    path.write_text(value + "\n")
    return value


SECRETS_KEY = "STORAGEOPS_SECRETS_KEY"


def secrets_key_env(var_dir: Path, environ: dict[str, str] | None = None) -> dict[str, str]:
    """STORAGEOPS_SECRETS_KEY_FILE naming var/secrets.key, a Fernet key made there once (0600),
    when neither STORAGEOPS_SECRETS_KEY nor STORAGEOPS_SECRETS_KEY_FILE is set: the secrets a
    developer's site or the tests store are sealed (storageops.sealed) without anyone making a
    key. A key given is used as it is."""
    environ = os.environ if environ is None else environ
    if environ.get(SECRETS_KEY) or environ.get(f"{SECRETS_KEY}_FILE"):
        return {}
    path = var_dir / "secrets.key"
    try:
        _make_key_file(path)
    except OSError as exc:
        raise ServiceError(f"{exc}: set STORAGEOPS_SECRETS_KEY or STORAGEOPS_SECRETS_KEY_FILE instead") from None
    return {f"{SECRETS_KEY}_FILE": str(path)}


def _make_key_file(path: Path) -> None:
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    # Written whole under another name, then linked in: a launcher starting beside this one
    # (make run and make test) finds no file or the whole key, and the first key made is kept.
    draft = path.with_name(f".{path.name}.{os.getpid()}")
    draft.unlink(missing_ok=True)
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(base64.urlsafe_b64encode(secrets.token_bytes(32)).decode("ascii") + "\n")
    try:
        os.link(draft, path)
    except FileExistsError:
        pass
    finally:
        draft.unlink()


class _Service:
    """One server process: started in a session of its own, recorded, stopped by its pid."""

    name = ""
    #: What stops the server cleanly and quickly (PostgreSQL: SIGINT, its "fast" shutdown).
    stop_signal = signal.SIGTERM

    def __init__(self, dirs: ServiceDirs, account: pwd.struct_passwd | None) -> None:
        self.dirs = dirs
        self.account = account
        self.port = 0
        self.proc: subprocess.Popen | None = None

    @property
    def log_path(self) -> Path:
        return self.dirs.log_dir / f"{self.dirs.name}-{self.name}.log"

    @property
    def pid_path(self) -> Path:
        return self.dirs.pid_dir / f"{self.name}.pid"

    def argv(self) -> list[str]:
        raise NotImplementedError

    def ready(self) -> bool:
        raise NotImplementedError

    def start(self, timeout: float = 60.0, port: int | None = None) -> None:
        """Start on a free port (or ``port``) and wait until it answers; a port lost to a race is retried.

        ``port``: a restart where its clients expect it (a soak's server killed and started
        again: the worker's broker URL names the port); a port still held is tried again."""
        for attempt in range(3):
            self.port = port or free_port(LOOPBACK)
            offset = self.log_path.stat().st_size if self.log_path.exists() else 0
            with self.log_path.open("ab") as log:
                self.proc = subprocess.Popen(
                    dying_with_parent(self.argv(), account=self.account),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    close_fds=True,
                )
            guard_group(self.proc.pid)
            PidFile.record(self.pid_path, self.name, self.proc.pid, self.proc.args)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                if self.ready():
                    return
                time.sleep(0.1)
            text = self._log_since(offset)
            self.stop()
            if "in use" in text and attempt < 2:
                if port:
                    time.sleep(1.0)  # the killed server's socket may linger a moment
                continue
            raise ServiceError(f"{self.name} did not start (see {self.log_path}):\n{text[-2000:]}")

    def _log_since(self, offset: int) -> str:
        try:
            with self.log_path.open("rb") as log:
                log.seek(offset)
                return log.read().decode(errors="replace")
        except OSError:
            return ""

    def stop(self, grace: float = 15.0) -> None:
        """``stop_signal`` to the server; after ``grace`` s, SIGKILL to its whole session."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(self.stop_signal)
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        # What is left of the session (a backend that outlived its postmaster) goes too.
        signal_session(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        release_group(self.proc.pid)
        self.pid_path.unlink(missing_ok=True)
        self.proc = None


def postgres_bin() -> Path:
    """The newest of the distribution's PostgreSQL server folders (/usr/lib/postgresql/<v>/bin)."""
    found = glob.glob("/usr/lib/postgresql/*/bin/postgres")
    if not found:
        raise ServiceError(
            "PostgreSQL's server binaries are missing (/usr/lib/postgresql/<version>/bin): "
            "run `bash scripts/bootstrap.sh run` (it installs the postgresql package), or set "
            "DATABASE_URL to a PostgreSQL server of your own."
        )
    return Path(max(found, key=lambda path: int(re.sub(r"\D", "", Path(path).parts[-3]) or 0))).parent


class OwnPostgres(_Service):
    name = "postgres"
    stop_signal = signal.SIGINT

    def __init__(self, dirs: ServiceDirs, account: pwd.struct_passwd | None, durable: bool = True) -> None:
        super().__init__(dirs, account)
        self.bin = postgres_bin()
        self.data = dirs.root / "postgres"
        self.password = _secret(dirs.root / "postgres.password")
        # make test's cluster may be thrown away after a crash: no flushes at all there.
        self.durable = durable

    @property
    def url(self) -> str:
        return f"postgres://{ROLE}:{self.password}@{LOOPBACK}:{self.port}/{DATABASE}"

    def _socket_dir(self) -> str:
        # Under var, never the distribution's /var/run/postgresql; none when var's path is too
        # long for a unix socket (the site connects over TCP anyway).
        return str(self.data) if len(f"{self.data}/.s.PGSQL.{self.port}") <= _SOCKET_PATH_MAX else ""

    def prepare(self) -> None:
        """initdb once: the role ``storageops`` with our password, UTF-8, C.UTF-8 collation."""
        if (self.data / "PG_VERSION").exists():
            return
        self.data.mkdir(mode=0o700, exist_ok=True)
        _own(self.data, self.account)
        pwfile = self.dirs.root / "postgres.pwfile"
        pwfile.touch(mode=0o600)
        pwfile.write_text(self.password + "\n")
        _own(pwfile, self.account)
        try:
            done = subprocess.run(
                dying_with_parent(
                    [str(self.bin / "initdb"), "-D", str(self.data), "-U", ROLE, f"--pwfile={pwfile}",
                     "--auth=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"],
                    account=self.account,
                ),
                capture_output=True, text=True, timeout=300, check=False,
            )  # fmt: skip
        finally:
            pwfile.unlink(missing_ok=True)
        if done.returncode != 0:
            raise ServiceError(f"initdb failed ({done.returncode}):\n{(done.stdout + done.stderr)[-2000:]}")

    def argv(self) -> list[str]:
        settings = {
            "listen_addresses": LOOPBACK,
            "unix_socket_directories": self._socket_dir(),
            # The site's web, worker, beat, collectors and clients; a test session's xdist
            # workers, their Celery workers and live servers.
            "max_connections": "300",
            # make test's cluster holds nothing worth a flush: its test databases go at the end.
            **({} if self.durable else {"fsync": "off", "full_page_writes": "off", "synchronous_commit": "off"}),
        }
        options = [arg for key, value in settings.items() for arg in ("-c", f"{key}={value}")]
        return [str(self.bin / "postgres"), "-D", str(self.data), "-p", str(self.port), *options]

    def ready(self) -> bool:
        import psycopg  # the launcher's interpreter has it (requirements.txt)

        try:
            with psycopg.connect(self.url.rsplit("/", 1)[0] + "/postgres", connect_timeout=2) as conn:
                conn.autocommit = True
                if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE]).fetchone() is None:
                    conn.execute(f'CREATE DATABASE "{DATABASE}"')
            return True
        except psycopg.OperationalError:
            return False

    def postmaster_pid(self) -> int | None:
        """The pid postmaster.pid names, if the file is there."""
        try:
            return int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None

    def clear_stale_lock(self, say: Callable[[str], None]) -> None:
        """A postmaster.pid left by a crash: stop its postgres if it is ours and alive, else remove it.

        PostgreSQL removes a lock of a dead pid itself, but refuses to start when that pid now
        belongs to another live process (pids are reused): it cannot tell it is not a postmaster.
        """
        pid = self.postmaster_pid()
        if pid is None:
            return
        argv = cmdline(pid)
        if is_alive(pid) and argv[:1] == [str(self.bin / "postgres")] and str(self.data) in argv:
            say(f"A PostgreSQL of this var folder is still running (pid {pid}); stopping it.")
            _stop_pid(pid, self.stop_signal)
        else:
            now = f"; the pid is {describe(pid)} now" if is_alive(pid) else ""
            say(f"Removed the postmaster.pid of a PostgreSQL that is gone (pid {pid}{now}).")
        (self.data / "postmaster.pid").unlink(missing_ok=True)


class OwnRedis(_Service):
    name = "redis"

    def __init__(self, dirs: ServiceDirs, account: pwd.struct_passwd | None) -> None:
        super().__init__(dirs, account)
        self.dir = dirs.root / "redis"
        self.password = _secret(dirs.root / "redis.password")

    @property
    def url(self) -> str:
        return f"redis://:{self.password}@{LOOPBACK}:{self.port}/0"

    @property
    def config_path(self) -> Path:
        return self.dir / "redis.conf"

    def prepare(self) -> None:
        """The config file: the password stays out of the command line, which every user can read."""
        self.dir.mkdir(mode=0o700, exist_ok=True)
        _own(self.dir, self.account)

    def argv(self) -> list[str]:
        self.config_path.touch(mode=0o600)
        self.config_path.write_text(
            f"bind {LOOPBACK}\nport {self.port}\nrequirepass {self.password}\n"
            f'dir {self.dir}\nsave ""\nappendonly no\ndaemonize no\nlogfile ""\n'
            # Keep the command line as started: PidFile recognises the process by it.
            "set-proc-title no\n"
        )
        _own(self.config_path, self.account)
        return ["/usr/bin/redis-server", str(self.config_path)]

    def ready(self) -> bool:
        try:
            with socket.create_connection((LOOPBACK, self.port), timeout=2) as sock:
                sock.sendall(f"AUTH {self.password}\r\nPING\r\n".encode())
                answer = b""
                while answer.count(b"\r\n") < 2:
                    chunk = sock.recv(256)
                    if not chunk:
                        break
                    answer += chunk
            return answer == b"+OK\r\n+PONG\r\n"
        except OSError:
            return False


def _stop_pid(pid: int, sig: int, grace: float = 15.0) -> None:
    """Stop a process that is not our child (found by a pid file): ``sig``, then its session killed."""
    started = start_time(pid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and is_alive(pid, started):
        time.sleep(0.05)
    if is_alive(pid, started):
        signal_session(pid, signal.SIGKILL)
        while is_alive(pid, started):
            time.sleep(0.05)
    # The rest of its session (a postmaster's backends and helpers notice its death a moment
    # later, seconds on a loaded machine): gone too before this returns, so that stopped means
    # nothing of it is left, not only its leader.
    deadline = time.monotonic() + grace
    while session_members(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if session_members(pid):
        signal_session(pid, signal.SIGKILL)
        while session_members(pid) and time.monotonic() < deadline + grace:
            time.sleep(0.05)


def claim(dirs: ServiceDirs) -> Path:
    """Record this process as the one launcher of the set; the pid file to remove at the end.

    Refused (ServiceError) while another live process holds it: the next start takes whatever
    servers it finds recorded for a leftover of a crashed launcher and stops them, and they
    would be a running site's (or a soak's) database and broker."""
    pid_file = dirs.pid_dir / f"{LAUNCHER}.pid"
    earlier = Leftovers.find(dirs.pid_dir, LAUNCHER)
    if earlier.supervisor_running:
        raise ServiceError(
            f"A launcher of the {dirs.name!r} servers is already running with this var folder "
            f"({dirs.var_dir}) as pid {earlier.supervisor.pid}: stop it first, or use another STORAGEOPS_VAR_DIR."
        )
    dirs.pid_dir.mkdir(parents=True, exist_ok=True)
    PidFile.record(pid_file, LAUNCHER, os.getpid())
    return pid_file


class Services:
    """The set of own servers one launcher needs: PostgreSQL, Redis, or both."""

    def __init__(
        self,
        dirs: ServiceDirs,
        postgres: bool = True,
        redis: bool = True,
        durable: bool = True,
        say: Callable[[str], None] = print,
    ) -> None:
        self.dirs = dirs
        self.say = say
        account = service_account()
        self.postgres = OwnPostgres(dirs, account, durable) if postgres else None
        self.redis = OwnRedis(dirs, account) if redis else None

    @property
    def running(self) -> list[_Service]:
        return [s for s in (self.postgres, self.redis) if s is not None and s.proc is not None]

    def env(self) -> dict[str, str]:
        """DATABASE_URL / CELERY_BROKER_URL of the servers started."""
        env = {}
        if self.postgres is not None:
            env["DATABASE_URL"] = self.postgres.url
        if self.redis is not None:
            env["CELERY_BROKER_URL"] = self.redis.url
        return env

    def clear_leftovers(self) -> None:
        """Stop what a crashed launcher of this set left running, by its pid files; clear a stale lock."""
        leftovers = Leftovers.find(self.dirs.pid_dir, LAUNCHER)
        for record in leftovers.running:
            # Each by its own clean stop (PostgreSQL's SIGTERM would wait for its clients to leave).
            self.say(f"An earlier launcher left {record.name} running (pid {record.pid}); stopping it.")
            _stop_pid(record.pid, OwnPostgres.stop_signal if record.name == "postgres" else signal.SIGTERM)
        if leftovers.gone:
            gone = ", ".join(f"{record.name} (pid {record.pid})" for record in leftovers.gone)
            self.say(f"An earlier launcher did not stop cleanly; its {gone} are gone already.")
        for record in [*leftovers.running, *leftovers.gone]:
            (self.dirs.pid_dir / f"{record.name}.pid").unlink(missing_ok=True)
        if self.postgres is not None:
            self.postgres.clear_stale_lock(self.say)

    def start(self) -> None:
        self.dirs.make()
        self.clear_leftovers()
        try:
            for service in (self.postgres, self.redis):
                if service is not None:
                    service.prepare()
                    service.start()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Redis first, then PostgreSQL; each by its pid, nothing of their sessions left."""
        for service in reversed(self.running):
            service.stop()

    def pids(self) -> list[int]:
        return [s.proc.pid for s in self.running]
