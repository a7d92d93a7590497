# The two set-up commands of the README, and the short helpers around them.
PY := .venv/bin/python
export GFAL_PYTHONBIN := /usr/bin/python3
STRESS_SECONDS ?= 3600
# Test processes: the suite mostly waits on real daemons (root:// TPC polls every 2.5 s, beat on
# minute boundaries), so three share two cores well; TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= 3

.PHONY: run test test-stress lint check bench

# devsite.launch starts the site's own PostgreSQL and Redis under var/ (only those of
# DATABASE_URL / CELERY_BROKER_URL that are unset), then runs the command beside them.
# runsite stops everything it started on Ctrl-C, SIGTERM, SIGHUP and when make itself is killed,
# then the launcher stops PostgreSQL and Redis; all die with it even when it is SIGKILLed.
LAUNCH := $(PY) -m devsite.launch --exit-with-parent

run:  ## the dashboard, a worker, beat, a demo site of two real XRootD servers with collectors, two pool clients
	bash scripts/bootstrap.sh run
	$(LAUNCH) -- $(PY) manage.py runsite --exit-with-parent

test:  ## the whole test suite (on DATABASE_URL / CELERY_BROKER_URL when set, else on servers of its own)
	bash scripts/bootstrap.sh test
	$(LAUNCH) --set test -- $(PY) -m pytest -n $(TEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

test-stress:  ## make test beside one busy process per core, which stop with it (or after STRESS_SECONDS)
	python3 scripts/stress.py --seconds $(STRESS_SECONDS) -- $(MAKE) test

lint:
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .

check: lint
	$(LAUNCH) --set test -- sh -c '$(PY) manage.py check && $(PY) manage.py makemigrations --check --dry-run'

bench:
	$(PY) benchmarks/engine_scale.py
