"""Client hosts of their own on one machine: network namespaces on a bridge.

Each client gets a namespace with its own address and interface (a veth pair, its host end on
a bridge that carries the subnet's first address). Doors listening on every address are reached
at the bridge address; PostgreSQL and Redis, which listen on the loopback only, through socat
relays on the bridge address that this helper starts and stops by pid. The subnet is chosen
from the pytest process' pid, so parallel sessions never share one. Where namespaces cannot be
made (no `ip`, no CAP_NET_ADMIN) the test is skipped, saying so.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from devsite.processes import ManagedProcess


def subnet() -> tuple[str, str]:
    """(the bridge's address, the /24's prefix) for this process: 10.(200+a).b.0/24."""
    pid = os.getpid()
    prefix = f"10.{200 + pid % 50}.{(pid // 50) % 250}"
    return f"{prefix}.1", prefix


@dataclass(frozen=True)
class ClientNet:
    bridge_address: str
    namespaces: dict[str, str]  # client name -> namespace name
    addresses: dict[str, str]  # client name -> its address
    interfaces: dict[str, str]  # client name -> its interface (inside its namespace)

    def argv(self, client: str, argv: list[str]) -> list[str]:
        """`argv` run inside the client's namespace (ip netns exec execs it: the pid is its own)."""
        return ["ip", "netns", "exec", self.namespaces[client], *argv]


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


@contextlib.contextmanager
def client_network(clients: list[str], relay_ports: list[int], log_dir) -> Iterator[ClientNet]:
    """A namespace per client on a bridge; `relay_ports` of the loopback relayed to the bridge."""
    if shutil.which("ip") is None or shutil.which("socat") is None:
        pytest.skip("needs ip (iproute2) and socat for client namespaces")
    bridge_address, prefix = subnet()
    tag = f"{os.getpid() % 100000}"
    bridge = f"sob{tag}"
    made_bridge = False
    namespaces: dict[str, str] = {}
    relays: list[ManagedProcess] = []
    try:
        try:
            _ip("link", "add", bridge, "type", "bridge")
        except subprocess.CalledProcessError as exc:
            pytest.skip(f"cannot make a bridge for client namespaces: {exc.stderr.strip()}")
        made_bridge = True
        _ip("addr", "add", f"{bridge_address}/24", "dev", bridge)
        _ip("link", "set", bridge, "up")
        addresses, interfaces = {}, {}
        for number, client in enumerate(clients, start=10):
            namespace, host_end, client_end = f"so{tag}-{client}", f"v{tag}h{number}", f"v{tag}c{number}"
            _ip("netns", "add", namespace)
            namespaces[client] = namespace
            _ip("link", "add", host_end, "type", "veth", "peer", "name", client_end)
            _ip("link", "set", client_end, "netns", namespace)
            _ip("link", "set", host_end, "master", bridge, "up")
            _ip("-n", namespace, "addr", "add", f"{prefix}.{number}/24", "dev", client_end)
            _ip("-n", namespace, "link", "set", client_end, "up")
            _ip("-n", namespace, "link", "set", "lo", "up")
            addresses[client], interfaces[client] = f"{prefix}.{number}", client_end
        for port in relay_ports:
            argv = ["socat", f"TCP-LISTEN:{port},bind={bridge_address},fork,reuseaddr", f"TCP:127.0.0.1:{port}"]
            relays.append(ManagedProcess(f"relay-{port}", argv, dict(os.environ), log_dir).start())
        yield ClientNet(bridge_address, namespaces, addresses, interfaces)
    finally:
        # All at once, briefly: a relay keeps nothing worth a graceful stop.
        ManagedProcess.stop_all(relays, timeout=5.0)
        for namespace in namespaces.values():
            with contextlib.suppress(subprocess.CalledProcessError):
                _ip("netns", "del", namespace)  # its veth end goes with it, and so the host end
        if made_bridge:
            with contextlib.suppress(subprocess.CalledProcessError):
                _ip("link", "del", bridge)
