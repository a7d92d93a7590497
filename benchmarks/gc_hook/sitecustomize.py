"""The garbage collector's share of each web process's CPU, for the load benchmarks.

With this folder on PYTHONPATH, every gunicorn process (a site's master and workers, of any tree)
times its collections by generation and writes, at most once a second, its totals and its own
CPU time to $BENCH_GC_DIR/<pid>.json (default: var/bench/gc of the tree this hook is in, whichever
tree the process runs):

    PYTHONPATH=benchmarks/gc_hook .venv/bin/python benchmarks/reference_compare.py --what load …
    .venv/bin/python benchmarks/gc_share.py var/bench/gc

Other processes are left alone.
"""

import os
import sys

try:
    with open("/proc/self/cmdline", "rb") as _own:
        _IS_WEB = b"gunicorn" in _own.read()
except OSError:
    _IS_WEB = False

if _IS_WEB:
    import gc
    import json
    import time

    _here = os.path.dirname(os.path.abspath(__file__))
    _folder = os.environ.get("BENCH_GC_DIR") or os.path.join(_here, "..", "..", "var", "bench", "gc")
    _started: dict[int, float] = {}
    _totals = {generation: {"collections": 0, "seconds": 0.0} for generation in (0, 1, 2)}
    _written = [0.0]

    def _timed(phase: str, info: dict) -> None:
        generation = info["generation"]
        if phase == "start":
            _started[generation] = time.thread_time()
            return
        total = _totals[generation]
        total["collections"] += 1
        total["seconds"] += time.thread_time() - _started.get(generation, time.thread_time())
        now = time.monotonic()
        if now - _written[0] > 1.0:
            _written[0] = now
            os.makedirs(_folder, exist_ok=True)
            record = {"pid": os.getpid(), "parent": os.getppid(), "cwd": os.getcwd(), "cpu": time.process_time(),
                      "gc": _totals, "argv": sys.argv[:3]}  # fmt: skip
            with open(os.path.join(_folder, f"{os.getpid()}.json"), "w") as out:
                json.dump(record, out)

    gc.callbacks.append(_timed)
