#!/bin/sh
# The suite in two phases: everything but the `serial` tests in TEST_WORKERS processes, then the
# serial ones alone. Those measure this machine's CPU (a door's quota, a core another process
# fills, a free door still rising) and read the verdict it gives: beside three other test
# processes they measured the other tests. Both phases always run; the first failure's code is
# returned. pytest's 5 (nothing collected, e.g. PYTEST_ARGS naming one file) is not a failure.
set -u
py=.venv/bin/python
"$py" -m pytest -n "${TEST_WORKERS:-6}" --dist worksteal -m "not serial" "$@"
parallel=$?
"$py" -m pytest -m serial "$@"
serial=$?
[ "$parallel" -eq 5 ] && parallel=0
[ "$serial" -eq 5 ] && serial=0
[ "$parallel" -ne 0 ] && exit "$parallel"
exit "$serial"
