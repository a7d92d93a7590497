"""What the test suite's files cost, from a run with `-p tests.support.cpu_log`:

    STORAGEOPS_TEST_CPU_LOG=/tmp/costs make test PYTEST_ARGS="-p tests.support.cpu_log"
    python -m benchmarks.test_costs /tmp/costs

prints each file's CPU seconds (the test process and the children it reaped), wall seconds and
tests, most CPU first, and the totals. Written up in docs/benchmarks.md ("The test suite's cost").
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path


def read(prefix: Path) -> list[dict]:
    lines = []
    for path in sorted(prefix.parent.glob(prefix.name + ".*")):
        lines += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return lines


def by_file(lines: list[dict]) -> list[tuple[str, float, float, int]]:
    cpu: dict[str, float] = defaultdict(float)
    wall: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for line in lines:
        name = line["test"].split("::")[0]
        cpu[name] += line["cpu_self"] + line["cpu_children"]
        wall[name] += line["wall"]
        count[name] += 1
    return sorted(((name, cpu[name], wall[name], count[name]) for name in cpu), key=lambda row: -row[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("prefix", type=Path, help="STORAGEOPS_TEST_CPU_LOG of the run")
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    rows = by_file(read(args.prefix))
    total_cpu = sum(row[1] for row in rows)
    print(f"{'CPU s':>8} {'share':>6} {'wall s':>8} {'tests':>5}  file")
    for name, cpu, wall, count in rows[: args.top]:
        print(f"{cpu:8.1f} {cpu / total_cpu:6.1%} {wall:8.1f} {count:5d}  {name}")
    print(f"{total_cpu:8.1f} {'':6} {sum(r[2] for r in rows):8.1f} {sum(r[3] for r in rows):5d}  all {len(rows)} files")


if __name__ == "__main__":
    main()
