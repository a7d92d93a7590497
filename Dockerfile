# StorageOps image: one image for every role (web, worker, beat, collector) and for the two
# demo XRootD doors of docker-compose.yml.
#
# Debian rather than a python:* image because gfal2 and its Python binding come from
# Debian's packages, built against Debian's /usr/bin/python3. The virtualenv is therefore
# made from that interpreter with --system-site-packages, so that `import gfal2` works next
# to the pinned pip requirements.
FROM debian:bookworm-slim

# STORAGEOPS_DEVSITE=false: the image is a production image. The development tooling
# (devsite: XRootD test servers, `manage.py runsite`, the demo site) stays out of
# INSTALLED_APPS; web, worker, beat and collector never import it, and the demo doors of
# docker-compose.yml run the xrootd binary itself, not devsite.
ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    STORAGEOPS_VAR_DIR=/app/var \
    STORAGEOPS_DEVSITE=false

# gfal2 plugins: file:// for local tests, http(s)/davs for WebDAV doors, root:// for XRootD,
# mock:// for runs that simulate a backend. gfal2-util-scripts adds gfal-copy, gfal-ls...
# for an operator debugging a door from inside the container. xrootd-client gives xrdcp and
# xrdfs (the doors' TPC and health checks use them); xrootd-server runs the demo doors.
# Versions are not pinned: bookworm point releases replace them with security fixes, and a
# pin would then fail the build; the base image tag fixes the Debian release instead.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        ca-certificates \
        python3 \
        python3-venv \
        python3-gfal2 \
        python3-xrootd \
        gfal2-plugin-file \
        gfal2-plugin-http \
        gfal2-plugin-xrootd \
        gfal2-plugin-gridftp \
        gfal2-plugin-mock \
        gfal2-util-scripts \
        xrootd-client \
        xrootd-server \
    && rm -rf /var/lib/apt/lists/*

# The application runs as an unprivileged user. The xrootd package made its own "xrootd"
# user; XRootD refuses to run as root, and systemd-tmpfiles (which would create /run/xrootd)
# does not run in a container, so the runtime and data directories are made here. /data
# belongs to xrootd so that a fresh named volume mounted there inherits that owner.
RUN useradd --system --create-home --home-dir /home/storageops --shell /usr/sbin/nologin storageops \
    && install -d -o xrootd -g xrootd /run/xrootd /var/spool/xrootd /data

RUN /usr/bin/python3 -m venv --system-site-packages "$VIRTUAL_ENV"

WORKDIR /app

# Requirements first: the dependency layer is rebuilt only when requirements.txt changes.
COPY requirements.txt /app/requirements.txt
RUN pip install --no-cache-dir -r /app/requirements.txt \
    && python -c "import gfal2; print('gfal2', gfal2.get_version())"

COPY . /app

# Static files are collected at build time into $STORAGEOPS_VAR_DIR/static (settings'
# STATIC_ROOT), where WhiteNoise serves them from. No database, broker or secret is needed for
# that, but the settings insist on being told where they are: the two URLs below are placeholders
# for the build only (nothing connects to them), and the image's containers get the real ones.
RUN DATABASE_URL=postgres://build@127.0.0.1:1/unused CELERY_BROKER_URL=redis://127.0.0.1:1/0 \
    python manage.py collectstatic --noinput \
    && chown -R storageops:storageops /app/var

USER storageops

EXPOSE 8000

# Secrets stored in the database (endpoint and FTS tokens, webhook URLs) are sealed with the key in
# STORAGEOPS_SECRETS_KEY, or in the file STORAGEOPS_SECRETS_KEY_FILE names (a mounted secret); give
# every container the same one (docs/security.md, Secrets at rest). The image holds no key.
# The compose file sets a command per service; alone, the image serves the web UI.
CMD ["gunicorn", "storageops.wsgi:application", "-c", "python:storageops.gunicorn_conf"]
