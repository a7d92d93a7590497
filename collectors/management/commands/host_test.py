"""``manage.py host_test HOST [options]``: a host-test series, queued on the host's collector or
run here (``--here``, on the host itself), with its results printed."""

from __future__ import annotations

import time

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from collectors import hosttest_series
from collectors.models import Host
from collectors.tasks import start_host_test_series
from storageops.units import human_rate


class Command(BaseCommand):
    help = "Start a host-test series (fio or dd, repeated) on a host, and print its results."

    def add_arguments(self, parser) -> None:
        parser.add_argument("host", help="the Host's name")
        parser.add_argument("--tool", choices=["dd", "fio"], default="dd")
        parser.add_argument("--name", default="series")
        parser.add_argument("--rw", default="read", help="dd: write or read; fio: any of its sequential/random modes")
        parser.add_argument("--size", default="1G", help="per file: 64M, 1G, ...")
        parser.add_argument("--block-size", default="1M", help="4k, 1M, 10M, ...")
        parser.add_argument("--repeats", type=int, default=1)
        parser.add_argument("--byte-budget", default=None, help="the most the series may write, e.g. 50T")
        parser.add_argument("--warm", action="store_true", help="read back without dropping the file's pages")
        parser.add_argument("--reference", action="store_true", help="dd: also an O_DIRECT read each repeat")
        parser.add_argument("--direct", action="store_true", help="direct I/O for the test itself")
        parser.add_argument("--rolling", type=int, default=50)
        parser.add_argument("--here", action="store_true", help="run in this process (on the host), not its queue")
        parser.add_argument("--no-wait", action="store_true", help="queue it and return")

    def handle(self, *args, host: str, **o) -> None:
        target = Host.objects.filter(name=host).first()
        if target is None:
            raise CommandError(f"Unknown host {host!r}.")
        params = {
            "tool": o["tool"], "name": o["name"], "rw": o["rw"], "size": o["size"], "block_size": o["block_size"],
            "repeats": o["repeats"], "cold": not o["warm"], "reference": o["reference"], "direct": o["direct"],
            "rolling": o["rolling"],
        }  # fmt: skip
        if o["byte_budget"]:
            params["byte_budget"] = o["byte_budget"]
        try:
            if o["here"]:
                series = hosttest_series.run(hosttest_series.create(target, params).pk)
            else:
                series = start_host_test_series(target, params)
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from None
        self.stdout.write(f"host test series #{series.pk} on {target.name}: {series.state}")
        if o["no_wait"]:
            return
        while series.is_live:
            time.sleep(1)
            series.refresh_from_db()
        for r in series.results.order_by("index"):
            pairs = (("write", r.write_bps), ("read", r.read_bps), ("direct read", r.direct_read_bps))
            figures = [f"{k} {human_rate(v)}" for k, v in pairs if v is not None]
            if r.resident_fraction is not None:
                figures.append(f"{r.resident_fraction:.0%} resident before the read")
            flag = f"  CACHED: {r.cached_reason}" if r.cached else ""
            flag += f"  FASTER THAN DIRECT I/O: {r.faster_reason}" if r.faster_than_direct else ""
            self.stdout.write(f"{r.index + 1:>6}  " + ", ".join(figures) + flag)
        self.stdout.write(f"{series.state}{': ' + series.error if series.error else ''}")
        if series.state != "succeeded":
            raise CommandError(f"series #{series.pk} {series.state}: {series.error}")
