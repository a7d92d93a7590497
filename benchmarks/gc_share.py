#!/usr/bin/env python3
"""The garbage collector's share of each web process's CPU, from what benchmarks/gc_hook wrote.

    .venv/bin/python benchmarks/gc_share.py [var/bench/gc]

One line per process (its tree, its parent: a site's workers share one), then per tree: CPU
seconds, seconds in collections, their share, and the collections by generation.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path


def main() -> None:
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "var/bench/gc")
    by_tree: dict[str, list[dict]] = defaultdict(list)
    for path in sorted(folder.glob("*.json")):
        record = json.loads(path.read_text())
        by_tree[record["cwd"]].append(record)
    for tree, records in sorted(by_tree.items()):
        print(tree)
        cpu = seconds = 0.0
        for r in sorted(records, key=lambda r: r["pid"]):
            in_gc = sum(g["seconds"] for g in r["gc"].values())
            cpu, seconds = cpu + r["cpu"], seconds + in_gc
            by_generation = ", ".join(
                f"gen{g}: {v['collections']} in {v['seconds']:.2f} s" for g, v in sorted(r["gc"].items())
            )
            share = in_gc / r["cpu"] if r["cpu"] else 0.0
            print(f"  pid {r['pid']} (parent {r['parent']}): CPU {r['cpu']:.1f} s, collections {in_gc:.2f} s "
                  f"({share:.1%}); {by_generation}")  # fmt: skip
        print(f"  all: CPU {cpu:.1f} s, collections {seconds:.2f} s ({seconds / cpu if cpu else 0.0:.1%})")


if __name__ == "__main__":
    main()
