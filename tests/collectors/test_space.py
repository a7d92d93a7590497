"""A real door's data filesystem filling up is one event, with its end and length, whether or
not a copy meets it; the door itself agrees (a copy to it fails while it is full)."""

from __future__ import annotations

import os
import re
import subprocess
import time

import pytest

from collectors.models import Event, MetricSample
from collectors.sampling import HostCollector
from collectors.space import FULL_FRACTION, ROOM_FACTOR, ROOM_SECONDS
from devsite.xrootd_server import XRootDServer

SIZE = 8 << 20  # the tmpfs: 1 % of it is the full mark


@pytest.fixture
def small_disk(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SIZE},mode=0755", "storageops-test", str(folder)], check=True)
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


@pytest.fixture
def door(tmp_path, small_disk):
    server = XRootDServer("full", small_disk, workdir=tmp_path / "run").start()
    try:
        yield server
    finally:
        server.stop()


def _fill(folder, leave: int = 0) -> os.PathLike:
    """Write a file until the filesystem has ``leave`` bytes (about) or nothing left."""
    path = folder / "filler"
    free = os.statvfs(folder).f_bavail * os.statvfs(folder).f_frsize
    with open(path, "ab", buffering=0) as out:
        try:
            out.write(b"\0" * max(free - leave, 0))
            while not leave:
                out.write(b"\0" * (1 << 20))
        except OSError:
            pass
    return path


def _copy_to_door(door: XRootDServer, tmp_path, name: str) -> subprocess.CompletedProcess:
    source = tmp_path / "one-mb"
    source.write_bytes(os.urandom(1 << 20))
    return subprocess.run(
        ["xrdcp", "--nopbar", "-f", str(source), door.root_url_for(f"/data/{name}")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def _room_lasts(collector) -> None:
    """Room seen, then seen again once it has lasted: the episode's end."""
    collector.tick()
    time.sleep(ROOM_SECONDS + 0.1)
    collector.tick()


def _events(host):
    return list(Event.objects.filter(host=host, kind="disk_full"))


def test_a_door_disk_that_fills_up_is_one_event_with_its_end(make_host, door, small_disk, tmp_path):
    host = make_host(watched_filesystems=[str(small_disk)])
    collector = HostCollector(host)
    collector.tick()
    assert not _events(host)  # room: nothing logged
    free = MetricSample.objects.get(host=host, metric="fs.free_bytes")
    assert free.label == str(small_disk)[:64] and 0.9 * SIZE < free.value <= SIZE
    assert MetricSample.objects.get(host=host, metric="fs.size_bytes").value == SIZE

    filler = _fill(small_disk)
    collector.tick()
    [full] = _events(host)
    assert full.source == "collector" and full.summary.startswith(f"No space left on {host.name}:{small_disk}: ")
    refused = _copy_to_door(door, tmp_path, "while-full")
    assert refused.returncode != 0, "the door took a copy onto a full disk"  # the world agrees

    # Freed a little, not to twice the mark: still the same episode (no flapping at the mark).
    os.truncate(filler, filler.stat().st_size - int(SIZE * FULL_FRACTION * ROOM_FACTOR * 0.6))
    time.sleep(1.1)
    collector.tick()
    assert _events(host) == [full]
    assert "ended" not in Event.objects.get(pk=full.pk).detail

    # Room for a moment (a run's files deleted) and full again at the next look: the same episode.
    filler.unlink()
    collector.tick()
    filler = _fill(small_disk)
    collector.tick()
    assert _events(host) == [full] and "ended" not in Event.objects.get(pk=full.pk).detail

    filler.unlink()
    _room_lasts(collector)
    full.refresh_from_db()
    length = float(re.search(r"after ([\d.]+) s", full.detail).group(1))
    assert 1 <= length < 60, full.detail
    assert re.fullmatch(
        rf"No space left on {re.escape(host.name)}:{re.escape(str(small_disk))} for \d+ s: "
        r"[\d.]+ (k|)B free at the least, [\d.]+ MB free again",
        full.summary,
    ), full.summary
    assert _copy_to_door(door, tmp_path, "after").returncode == 0
    collector.tick()
    assert len(_events(host)) == 1


def test_a_collector_started_while_the_disk_is_full_carries_the_event_on(make_host, small_disk):
    """A collector stopped or restarted during the fill: the event its predecessor opened is
    ended by the next one, not logged a second time."""
    host = make_host(watched_filesystems=[str(small_disk)])
    first = HostCollector(host)
    filler = _fill(small_disk)
    first.tick()
    [full] = _events(host)
    second = HostCollector(host)  # the first died with the disk full
    second.tick()
    assert _events(host) == [full]
    filler.unlink()
    _room_lasts(second)
    full.refresh_from_db()
    assert "ended" in full.detail and " for " in full.summary, full.summary
    HostCollector(host).tick()  # a third, with room: nothing new
    assert _events(host) == [full]


def test_a_missing_filesystem_is_left_unsampled(make_host, tmp_path):
    host = make_host(watched_filesystems=[str(tmp_path / "not-there")])
    HostCollector(host).tick()
    assert not MetricSample.objects.filter(host=host, metric__startswith="fs.").exists()
    assert not _events(host)


def test_a_full_disk_is_told_once_to_the_site_and_mailed_with_its_host_page(
    make_host, small_disk, mailbox, monkeypatch
):
    """The collector tells the moment once per fill (not every tick while full); the alerts app
    hears it and mails the site-wide subscriptions, as it does a silent collector."""
    from alerts.models import Delivery, Subscription
    from alerts.tasks import disk_full
    from storageops import alerting
    from tests.support.factories import mock_campaign

    told = []
    monkeypatch.setattr(alerting, "tell", lambda moment, *args: told.append((moment, *args)))
    Subscription.objects.create(name="site", email="site@example.org", min_interval_minutes=0)
    Subscription.objects.create(name="one", email="one@example.org", campaign=mock_campaign("c1"))
    assert alerting.listeners("disk_full") == ["alerts.disk_full"]
    host = make_host(watched_filesystems=[str(small_disk)])
    collector = HostCollector(host)
    filler = _fill(small_disk)
    collector.tick()
    time.sleep(1.1)
    collector.tick()
    [full] = _events(host)
    assert told == [("disk_full", full.pk)]
    assert disk_full.name == "alerts.disk_full"
    disk_full(full.pk)  # what the control worker runs when told
    [sent] = Delivery.objects.all()
    assert (sent.kind, sent.host_id, sent.subscription.name, sent.state) == ("disk_full", host.pk, "site", "sent")
    [(_, to, mail)] = mailbox.messages
    assert "site@example.org" in str(to) and "one@example.org" not in str(to)
    assert f"Subject: [StorageOps] Disk full on {host.name}" in mail and full.summary in mail
    assert f"https://storageops.example.org{host.get_absolute_url()}" in mail
    filler.unlink()
    collector.tick()
    assert told == [("disk_full", full.pk)], "room again is not a second alert"
