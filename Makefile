# The two set-up commands of the README, and the short helpers around them.
PY := .venv/bin/python
export GFAL_PYTHONBIN := /usr/bin/python3
STRESS_SECONDS ?= 3600
# The soak (benchmarks/soak.py): minutes of faults, and the seed its fault plan follows.
SOAK_MINUTES ?= 60
SOAK_SEED ?= 48
# Test processes: the suite mostly waits on real daemons (root:// TPC polls every 2.5 s, beat on
# minute boundaries): a run of four used 1.0 of the two cores on average and took 19 min 11 s for
# the parallel phase; six took 15 min 40 s (2026-11-28, same machine, green both). The tests that
# measure this machine's CPU run alone after them (scripts/test.sh). TEST_WORKERS=0: one process.
export TEST_WORKERS ?= 6

.PHONY: run sso-provider test test-stress lint check bench soak

# devsite.launch starts the site's own PostgreSQL and Redis under var/ (only those of
# DATABASE_URL / CELERY_BROKER_URL that are unset), then runs the command beside them.
# runsite stops everything it started on Ctrl-C, SIGTERM, SIGHUP and when make itself is killed,
# then the launcher stops PostgreSQL and Redis; all die with it even when it is SIGKILLed.
LAUNCH := $(PY) -m devsite.launch --exit-with-parent

run:  ## the dashboard, a worker, beat, a demo site of two real XRootD servers with collectors, two pool clients
	bash scripts/bootstrap.sh run
	$(LAUNCH) -- $(PY) manage.py runsite --exit-with-parent

sso-provider:  ## a test OpenID provider on a free loopback port, to try sign-on on make run: prints what to export (docs/security.md)
	bash scripts/bootstrap.sh sso
	$(PY) -m devsite.sso_provider --exit-with-parent $(SSO_ARGS)

test:  ## the whole test suite (on DATABASE_URL / CELERY_BROKER_URL when set, else on servers of its own)
	bash scripts/bootstrap.sh test
	$(LAUNCH) --set test -- sh scripts/test.sh $(PYTEST_ARGS)

test-stress:  ## make test beside one busy process per core, which stop with it (or after STRESS_SECONDS)
	python3 scripts/stress.py --seconds $(STRESS_SECONDS) -- $(MAKE) test

lint:
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .

check: lint
	$(LAUNCH) --set test -- sh -c '$(PY) manage.py check && $(PY) manage.py makemigrations --check --dry-run'

bench:
	$(PY) benchmarks/engine_scale.py

soak:  ## SOAK_MINUTES of faults injected into a site of its own (var/soak/) while campaigns run; as root (tmpfs, cgroups)
	bash scripts/bootstrap.sh run
	$(PY) -m benchmarks.soak --minutes $(SOAK_MINUTES) --seed $(SOAK_SEED)
