"""A web process warmed before its first request (storageops.warm): every view module imported
through the URLconf, and what exists then frozen out of the garbage collector's scans."""

from __future__ import annotations

import json
import subprocess

from tests.support.processes import PYTHON, ROOT

_PROBE = """
import gc, json, os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "storageops.settings")
from storageops.wsgi import application
views = ("campaigns.web.report_views", "campaigns.web.run_views", "storageops.api.urls")
before = [name for name in views if name in sys.modules]
from storageops.warm import warm_process
frozen = warm_process()
print(json.dumps({"before": before, "after": [n for n in views if n in sys.modules], "frozen": frozen,
                  "count": gc.get_freeze_count(), "left": len(gc.get_objects())}))
"""


def test_the_views_are_imported_and_the_start_up_heap_frozen():
    probe = subprocess.run([PYTHON, "-c", _PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert probe.returncode == 0, probe.stderr[-3000:]
    got = json.loads(probe.stdout.strip().splitlines()[-1])
    assert got["before"] == [], "loading the app alone imports no view: Django does so at the first request"
    assert len(got["after"]) == 3
    assert got["frozen"] == got["count"] > 50_000
    assert got["left"] < got["frozen"] / 10, "what the collector still scans is what came after"
