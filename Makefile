# The two set-up commands of the README, and the short helpers around them.
PY := .venv/bin/python
export GFAL_PYTHONBIN := /usr/bin/python3
STRESS_SECONDS ?= 3600
# Test processes: the suite mostly waits on real daemons (root:// TPC polls every 2.5 s, beat on
# minute boundaries), so three share two cores well; TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= 3

.PHONY: run test test-stress lint check bench

# runsite stops everything it started on Ctrl-C, SIGTERM, SIGHUP and when make itself is killed;
# its children die with it even when it is SIGKILLed.
run:  ## the dashboard, a worker, beat and a demo site with two real XRootD servers and their collectors
	bash scripts/bootstrap.sh run
	$(PY) manage.py runsite --exit-with-parent

test:  ## the whole test suite (DATABASE_URL / CELERY_BROKER_URL are used when set)
	bash scripts/bootstrap.sh test
	$(PY) -m pytest -n $(TEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

test-stress:  ## make test beside one busy process per core, which stop with it (or after STRESS_SECONDS)
	python3 scripts/stress.py --seconds $(STRESS_SECONDS) -- $(MAKE) test

lint:
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .

check: lint
	$(PY) manage.py check
	$(PY) manage.py makemigrations --check --dry-run

bench:
	$(PY) benchmarks/engine_scale.py
