"""Real gsiftp:// copies through gfal2's GridFTP plugin and real globus-gridftp-servers with GSI:
uploads, third-party copies and downloads, each file's bytes and adler32 read from the servers'
disks, and the streams and TCP buffer a campaign asks for seen in the servers' own transfer logs."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from campaigns.choices import RunState
from campaigns.models import Transfer
from tests.campaigns.runs.test_real_transfers import adler32, drive
from tests.support.factories import campaign, endpoint

pytestmark = pytest.mark.django_db(transaction=True)


def gsiftp(server, name: str, folder: str, creds):
    return endpoint(name, server.url_for(f"/{folder}/"), backend_name="gridftp",
                    x509_proxy=str(creds.proxy), ca_dir=str(creds.cert_dir))  # fmt: skip


def _hash(cert: Path) -> str:
    return subprocess.run(["openssl", "x509", "-in", str(cert), "-noout", "-subject_hash"], capture_output=True,
                          text=True, check=True).stdout.strip()  # fmt: skip


def on_disk(url: str) -> Path:
    """A gsiftp:// or file:// URL's file: both carry the absolute local path."""
    return Path(urlsplit(url).path)


def transfer_stats(server) -> list[dict[str, str]]:
    """The server's own "Transfer stats" lines (one per file it sent or stored), as key=value."""
    lines = [line for line in server.log_text().splitlines() if "Transfer stats:" in line]
    return [dict(re.findall(r"(\w+)=(\S+)", line.split("Transfer stats:", 1)[1])) for line in lines]


def check_copies(run, expected: int) -> None:
    """Every copy succeeded once, the bytes and adler32 on the destination's disk are the
    source's, and the adler32 gfal2 recorded is the one computed here from the disk."""
    copies = list(Transfer.objects.filter(run=run))
    assert run.state == RunState.SUCCEEDED, [t.error_message for t in copies if t.error_message]
    assert len(copies) == expected and {t.state for t in copies} == {"succeeded"}
    for t in copies:
        source, destination = on_disk(t.source), on_disk(t.destination)
        assert destination.stat().st_size == source.stat().st_size == t.size
        assert adler32(destination) == adler32(source)
        assert int(t.destination_checksum, 16) == adler32(destination), t.destination_checksum


def test_gsiftp_upload_third_party_copy_and_download_with_adler32(gridftp_pair, grid_credentials, tmp_path):
    one, two = gridftp_pair
    local = tmp_path / "worker-disk"
    local.mkdir()
    disk = endpoint("gsi-worker-disk", f"file://{local}/", backend_name="worker-local")
    a, b = gsiftp(one, "gsi-a", "up", grid_credentials), gsiftp(two, "gsi-b", "tpc", grid_credentials)
    common = {"file_size": 4_000_000, "checksum_mode": "both", "checksum_algorithm": "adler32"}
    check_copies(drive(campaign("gsi-upload", [disk], [a], file_count=4, concurrency_steps=[2], create_sources=True,
                                **common)), 4)  # fmt: skip
    # Server to server: the client only steers both doors (GridFTP's one third-party mode), with
    # 4 parallel streams and a 1 MiB TCP buffer, which the storing door must report using.
    tpc = campaign("gsi-tpc", [a], [b], file_count=4, concurrency_steps=[2], create_sources=True, streams=4,
                   tcp_buffer_size=1 << 20, **common)  # fmt: skip
    run = drive(tpc)
    check_copies(run, 4)
    stored = [s for s in transfer_stats(two) if s.get("TYPE") == "STOR" and "/tpc/" in s.get("FILE", "")]
    mine = {on_disk(t.destination).as_posix() for t in Transfer.objects.filter(run=run)}
    assert {s["FILE"] for s in stored} >= mine
    assert {s["STREAMS"] for s in stored if s["FILE"] in mine} == {"4"}
    # Linux doubles a requested socket buffer (socket(7)); the server reports what it got.
    assert {s["BUFFER"] for s in stored if s["FILE"] in mine} == {str(2 << 20)}
    check_copies(drive(campaign("gsi-download", [b], [disk], file_count=2, concurrency_steps=[2], create_sources=True,
                                **common)), 2)  # fmt: skip


def test_gsiftp_without_a_proxy_fails_with_the_doors_words(gridftp_pair, grid_credentials, test_ca):
    one, two = gridftp_pair
    # Making the user's certificate left nothing in the CA's folder, which the https doors read
    # whole as their certificate directory (a ca.srl there once kept them from starting).
    assert {p.name for p in test_ca.ca_dir.iterdir()} == {"ca.pem", f"{_hash(test_ca.ca_cert)}.0"}
    bare = endpoint(
        "gsi-no-proxy", one.url_for("/bare/"), backend_name="gridftp", ca_dir=str(grid_credentials.cert_dir)
    )
    b = gsiftp(two, "gsi-b2", "bare", grid_credentials)
    run = drive(campaign("gsi-no-proxy", [b], [bare], file_count=2, file_size=1000, create_sources=True,
                         concurrency_steps=[1]))  # fmt: skip
    copies = list(Transfer.objects.filter(run=run))
    assert run.files_failed == 2 and {t.state for t in copies} == {"failed"}
    assert all("credential" in t.error_message.lower() for t in copies), [t.error_message for t in copies]
