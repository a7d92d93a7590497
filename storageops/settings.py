"""StorageOps settings, read from the environment (12-factor).

One stack everywhere: PostgreSQL (DATABASE_URL) and Redis (CELERY_BROKER_URL), in production,
CI, the tests, the benchmarks and `make run` alike. `make run` and `make test` start their own
servers under var/ when these are unset (devsite.launch), before these settings load.
"""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from storageops.env import env_bool, env_fernet_keys, env_int, env_list, env_secret, env_str
from storageops.oidc import config as oidc_config

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("STORAGEOPS_VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env_bool("DEBUG", False)
_INSECURE_KEY = "insecure-development-key-change-me"
SECRET_KEY = env_secret("SECRET_KEY", _INSECURE_KEY)
if SECRET_KEY == _INSECURE_KEY and env_bool("STORAGEOPS_REQUIRE_SECRET_KEY", False):
    raise ImproperlyConfigured("SECRET_KEY must be set (STORAGEOPS_REQUIRE_SECRET_KEY is on)")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    # Swagger UI and ReDoc served from our own static files: a site network without outside
    # access still shows /api/docs/.
    "drf_spectacular_sidecar",
    "csp",
    "django_celery_beat",
    "campaigns",
    # The engines, each an app of its own that registers itself when ready, in the order the
    # forms offer them (gfal2, the default, first). A new engine is its package and a line here.
    "campaigns.runs.engines.gfal2",
    "campaigns.runs.engines.fts",
    "campaigns.runs.engines.xrootd",
    "collectors",
    "alerts",
    # Development tooling (XRootD test servers, `manage.py runsite`, the demo site); a
    # production deployment sets STORAGEOPS_DEVSITE=false and runs without it.
    *(["devsite"] if env_bool("STORAGEOPS_DEVSITE", True) else []),
    # Last: its post-migrate hook builds the role groups from the other apps' permissions.
    "storageops",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Before anything reads a body: an oversized request is refused by its Content-Length.
    "storageops.limits.RequestSizeLimitMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "storageops.context.ChangeContextMiddleware",
    # Everything needs a login and a role except views marked @login_not_required (login,
    # /healthz, the API, whose own authentication answers 401/403 instead of redirecting).
    "storageops.access.RoleRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    *(["storageops.csp_header.SitePolicyCSPMiddleware"] if env_str("STORAGEOPS_CSP", "on") != "off" else []),
]

ROOT_URLCONF = "storageops.urls"
WSGI_APPLICATION = "storageops.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

_UNSET_HELP = (
    "is not set. StorageOps runs on PostgreSQL and Redis only: set DATABASE_URL=postgres://… and "
    "CELERY_BROKER_URL=redis://…, or start through `make run` / `make test` (python -m devsite.launch -- …), "
    "which start their own servers under var/."
)
if "DATABASE_URL" not in os.environ:
    raise ImproperlyConfigured(f"DATABASE_URL {_UNSET_HELP}")
try:
    DATABASES = {"default": dj_database_url.parse(env_str("DATABASE_URL", ""), conn_max_age=60)}
except ValueError as exc:
    raise ImproperlyConfigured(f"DATABASE_URL is not a usable database URL: {exc}") from None
if DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
    raise ImproperlyConfigured("DATABASE_URL must name a PostgreSQL database (postgres://user@host:port/name)")
# Two test sessions on one machine (a developer's and CI's) must not share a test database.
DATABASES["default"]["TEST"] = {"NAME": f"test_{DATABASES['default']['NAME']}_{os.getpid()}"}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"

# Single sign-on through the site's OpenID provider (docs/security.md): None unless
# STORAGEOPS_OIDC_ISSUER is set, and then nothing of it runs on a request.
STORAGEOPS_OIDC = oidc_config.from_env()
# Permissions read through storageops.grants (kept a few seconds per process); ModelBackend
# stays for the sessions it signed in before.
AUTHENTICATION_BACKENDS = [
    "storageops.grants.CachedModelBackend",
    "django.contrib.auth.backends.ModelBackend",
    *(["storageops.oidc.backend.ProviderBackend"] if STORAGEOPS_OIDC else []),
]
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-gb"
TIME_ZONE = env_str("STORAGEOPS_TIME_ZONE", "UTC")
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)  # whitenoise warns on every request while it is missing
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
if DEBUG:
    STORAGES["staticfiles"] = {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}

SESSION_COOKIE_HTTPONLY = True
# Django's database sessions, each page's lookup by a statement made once (storageops.row_lookups).
SESSION_ENGINE = "storageops.row_lookups"
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"

# --- Behind TLS ------------------------------------------------------------------------------
# Off by default so `make run` works on plain http://127.0.0.1; a deployment behind a TLS proxy
# turns them on (README, configuration). The proxy must set X-Forwarded-Proto itself and strip
# a client's: trusting the header from anyone else would let a client claim https.
if env_bool("STORAGEOPS_BEHIND_TLS_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env_bool("STORAGEOPS_SSL_REDIRECT", False)
# Healthz and metrics are scraped over plain http from inside the site network.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$"]
SECURE_HSTS_SECONDS = env_int("STORAGEOPS_HSTS_SECONDS", 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("STORAGEOPS_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("STORAGEOPS_HSTS_PRELOAD", False)
SESSION_COOKIE_SECURE = env_bool("STORAGEOPS_SECURE_COOKIES", False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_REFERRER_POLICY = "same-origin"

# Content-Security-Policy: scripts and styles from our own static files only, no inline script
# (templates keep their scripts in static/js). "report-only" reports violations without
# blocking, to try a change of policy on a live site; "off" sends no header.
STORAGEOPS_CSP = env_str("STORAGEOPS_CSP", "on")
if STORAGEOPS_CSP not in ("on", "report-only", "off"):
    raise ImproperlyConfigured(f"STORAGEOPS_CSP={STORAGEOPS_CSP!r}: use on, report-only or off")
_CSP_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        # Chart.js draws on canvases; Swagger UI shows its logo as a data: image.
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "font-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}
if STORAGEOPS_CSP == "on":
    CONTENT_SECURITY_POLICY = _CSP_POLICY
elif STORAGEOPS_CSP == "report-only":
    CONTENT_SECURITY_POLICY_REPORT_ONLY = _CSP_POLICY

# Requests: a body larger than this is refused with 413 before it is read (JSON bodies and
# forms alike), and JSON nested deeper than STORAGEOPS_MAX_JSON_DEPTH with 400.
# How long a web process keeps a user's groups and permissions, and a role's (storageops.grants).
STORAGEOPS_GRANTS_SECONDS = env_int("STORAGEOPS_GRANTS_SECONDS", 5, minimum=0, maximum=300)
STORAGEOPS_MAX_REQUEST_BYTES = env_int("STORAGEOPS_MAX_REQUEST_BYTES", 2_621_440, minimum=65_536)
DATA_UPLOAD_MAX_MEMORY_SIZE = STORAGEOPS_MAX_REQUEST_BYTES
STORAGEOPS_MAX_JSON_DEPTH = 32

# --- Celery -------------------------------------------------------------------------------
if "CELERY_BROKER_URL" not in os.environ:
    raise ImproperlyConfigured(f"CELERY_BROKER_URL {_UNSET_HELP}")
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "")
if not CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    raise ImproperlyConfigured(f"CELERY_BROKER_URL={CELERY_BROKER_URL!r}: use redis://host:port/db")
# A task that waits for results (a run driver) must outlive Redis' default one-hour
# visibility timeout; run recovery is done from the database, not by redelivery.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 12 * 3600}
CELERY_RESULT_BACKEND = env_str("CELERY_RESULT_BACKEND", CELERY_BROKER_URL)

# --- Caches ---------------------------------------------------------------------------------
# "default" is each process's own memory (short-lived shares inside one process). "shared" is
# Redis, seen by every web process: a live run's views are computed once a second for all of its
# viewers, whichever process answers them (campaigns.web.live_snapshot). Its keys carry the
# database's name (storageops.shared_cache), so sites or test workers on one Redis never mix.
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "shared": {
        "BACKEND": "storageops.redis_cache.SharedRedisCache",
        "LOCATION": env_str("STORAGEOPS_SHARED_CACHE_URL", CELERY_BROKER_URL),
        "KEY_FUNCTION": "storageops.shared_cache.key",
        "TIMEOUT": 60,
    },
}
CELERY_RESULT_EXPIRES = 24 * 3600
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = TIME_ZONE
# Alerts (alerts app): mail through this SMTP server; links in alerts start with the base URL.
EMAIL_HOST = env_str("STORAGEOPS_EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("STORAGEOPS_EMAIL_PORT", 25, minimum=1, maximum=65535)
EMAIL_TIMEOUT = 10
DEFAULT_FROM_EMAIL = env_str("STORAGEOPS_EMAIL_FROM", "storageops@localhost")
STORAGEOPS_BASE_URL = env_str("STORAGEOPS_BASE_URL", "").rstrip("/")

# A prefix keeps deployments (or test sessions) that share one broker out of each other's queues.
STORAGEOPS_QUEUE_PREFIX = env_str("STORAGEOPS_QUEUE_PREFIX", "")
STORAGEOPS_CONTROL_QUEUE = f"{STORAGEOPS_QUEUE_PREFIX}control"
STORAGEOPS_TRANSFERS_QUEUE = f"{STORAGEOPS_QUEUE_PREFIX}transfers"
CELERY_TASK_DEFAULT_QUEUE = STORAGEOPS_CONTROL_QUEUE
# "transfers" holds every run's driver, whatever its engine (gfal2's copies, FTS's polling, a
# pool's hand-out): each holds its worker slot for the whole run. "control" keeps beat's short
# tasks (silent collectors, stalls, retention) answered meanwhile: a site runs a worker on each
# (runsite, docker-compose.yml), so no number of long runs can starve an alert.
CELERY_TASK_ROUTES = {
    "campaigns.drive_run": {"queue": STORAGEOPS_TRANSFERS_QUEUE},
    "campaigns.drive_fts_run": {"queue": STORAGEOPS_TRANSFERS_QUEUE},
    "campaigns.readiness_check": {"queue": STORAGEOPS_TRANSFERS_QUEUE},
    "campaigns.readiness_remove_probes": {"queue": STORAGEOPS_TRANSFERS_QUEUE},
}
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# How long a run's driver waits for the clients of its pool to answer before it goes on without them.
STORAGEOPS_CLIENT_JOIN_SECONDS = env_int("STORAGEOPS_CLIENT_JOIN_SECONDS", 20, minimum=1, maximum=600)
CELERY_TASK_ACKS_LATE = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULER = "storageops.beat:Scheduler"

# --- StorageOps ----------------------------------------------------------------------------
# How long a run driver may be silent before another worker takes the run over.
STORAGEOPS_RUN_LEASE_SECONDS = env_int("STORAGEOPS_RUN_LEASE_SECONDS", 30, minimum=5)
STORAGEOPS_PROGRESS_SECONDS = env_int("STORAGEOPS_PROGRESS_SECONDS", 2, minimum=1, maximum=60)
# The largest file a campaign may plan (default 1 TB): a typo of a few zeros must not fill a
# door's disk, or the temporary space generated sources pass through.
STORAGEOPS_MAX_FILE_SIZE = env_int("STORAGEOPS_MAX_FILE_SIZE", 10**12, minimum=1, maximum=2**62)
# Existing data as sources: at most this many files a listed folder or URL list may give a run.
STORAGEOPS_MAX_LISTED_SOURCES = env_int("STORAGEOPS_MAX_LISTED_SOURCES", 10_000, minimum=1, maximum=10_000_000)
# The folders file:// endpoints may lie in, colon-separated (docs/security.md): file:// reaches
# the worker's own disks, so none unless the deployment names them. The demo site names its
# var folder's "files"; the tests their temporary folder.
STORAGEOPS_FILE_ROOTS = [os.path.normpath(root) for root in env_str("STORAGEOPS_FILE_ROOTS", "").split(":") if root]
if any(not root.startswith("/") or ".." in root.split("/") for root in STORAGEOPS_FILE_ROOTS):
    raise ImproperlyConfigured(f"STORAGEOPS_FILE_ROOTS={STORAGEOPS_FILE_ROOTS!r}: each root must be an absolute path")
# Host-test series: the most one series may write (FZU wrote 50,000 x 1 GB).
STORAGEOPS_HOST_TEST_MAX_BYTES = env_int("STORAGEOPS_HOST_TEST_MAX_BYTES", 100 * 10**12, minimum=1, maximum=2**62)
# Copies in flight and none finished for this long: the run is stalled (an event and a banner).
STORAGEOPS_STALL_SECONDS = env_int("STORAGEOPS_STALL_SECONDS", 60, minimum=5, maximum=86400)
# A host whose collector sent nothing for this long is silent: one alert, until it is heard again.
STORAGEOPS_COLLECTOR_SILENT_SECONDS = env_int("STORAGEOPS_COLLECTOR_SILENT_SECONDS", 300, minimum=30, maximum=7 * 86400)
STORAGEOPS_MAX_CONCURRENCY = env_int("STORAGEOPS_MAX_CONCURRENCY", 2000, minimum=1)
# The rate (bit/s) a capacity projection sizes doors for when a campaign names none, e.g. the
# site's WAN link; 0 leaves projections without a target.
STORAGEOPS_TARGET_RATE_BPS = env_int("STORAGEOPS_TARGET_RATE_BPS", 0, minimum=0)
STORAGEOPS_SITE_NAME = env_str("STORAGEOPS_SITE_NAME", "site")
# The Chromium that prints reports to PDF; empty: the first chromium on PATH.
STORAGEOPS_CHROMIUM = env_str("STORAGEOPS_CHROMIUM", "")
# Optional bearer token that Prometheus must send to scrape /metrics.
STORAGEOPS_METRICS_TOKEN = env_secret("STORAGEOPS_METRICS_TOKEN", "")
# Optional: push every event to Grafana as an annotation. The token is a secret (or *_FILE).
STORAGEOPS_GRAFANA_URL = env_str("STORAGEOPS_GRAFANA_URL", "")
STORAGEOPS_GRAFANA_TOKEN = env_secret("STORAGEOPS_GRAFANA_TOKEN", "")
if STORAGEOPS_GRAFANA_URL and not STORAGEOPS_GRAFANA_URL.startswith(("http://", "https://")):
    raise ImproperlyConfigured(f"STORAGEOPS_GRAFANA_URL={STORAGEOPS_GRAFANA_URL!r} must be an http(s) URL")
# The keys that seal the secrets kept in the database (endpoint and FTS tokens, webhook URLs:
# storageops.sealed, docs/security.md): Fernet keys, comma-separated, or one a line in the file
# STORAGEOPS_SECRETS_KEY_FILE. The first seals; every one opens (rotate_secrets_key). None is
# needed until a secret is stored; make one with `manage.py make_secrets_key`.
STORAGEOPS_SECRETS_KEYS = env_fernet_keys("STORAGEOPS_SECRETS_KEY")
# Minutes around a restart or config change that a trimmed analysis leaves out (each side).
STORAGEOPS_DISTURBANCE_MARGIN_SECONDS = env_int("STORAGEOPS_DISTURBANCE_MARGIN_SECONDS", 120, minimum=0)

# Retention: finished runs' transfers and hosts' raw samples older than these ages are
# aggregated (run summaries, sample roll-ups) and deleted in batches by an hourly beat task.
# 0 keeps them for ever. Events, runs, their summaries and steps are always kept.
STORAGEOPS_TRANSFER_RETENTION_DAYS = env_int("STORAGEOPS_TRANSFER_RETENTION_DAYS", 365, minimum=0)
STORAGEOPS_SAMPLE_RETENTION_DAYS = env_int("STORAGEOPS_SAMPLE_RETENTION_DAYS", 30, minimum=0)
STORAGEOPS_RETENTION_BATCH = env_int("STORAGEOPS_RETENTION_BATCH", 5000, minimum=100, maximum=1_000_000)
STORAGEOPS_SAMPLE_ROLLUP_SECONDS = env_int("STORAGEOPS_SAMPLE_ROLLUP_SECONDS", 300, minimum=10, maximum=3600)
if 3600 % STORAGEOPS_SAMPLE_ROLLUP_SECONDS:
    raise ImproperlyConfigured(
        f"STORAGEOPS_SAMPLE_ROLLUP_SECONDS={STORAGEOPS_SAMPLE_ROLLUP_SECONDS} must divide an hour (e.g. 60, 300, 900)"
    )

# --- REST framework ------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "storageops.api.auth.TokenAuthentication",
        # Answers only when single sign-on is set up and the header carries a JWT.
        "storageops.oidc.bearer.ProviderTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["storageops.api.auth.RolePermission"],
    "EXCEPTION_HANDLER": "storageops.api.base.error_handler",
    "DEFAULT_PARSER_CLASSES": [
        "storageops.api.parsers.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "storageops.api.schema.StorageOpsAutoSchema",
    "DEFAULT_PAGINATION_CLASS": "storageops.api.pagination.BoundedLimitOffsetPagination",
    "PAGE_SIZE": 100,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "StorageOps API",
    "DESCRIPTION": "Control plane for storage test campaigns, host collectors and the change log.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Choice sets named by us, not by the field that first meets them: a run's state would
    # otherwise be "StateC98Enum" (five models have a field "state"), and the baseline choice
    # appear twice (a run's field and the POST's "choice"). Generated clients inherit the names.
    # Dotted strings, as INSTALLED_APPS: storageops imports no app.
    "ENUM_NAME_OVERRIDES": {
        "RunStateEnum": "campaigns.choices.RunState",
        "BaselineChoiceEnum": "campaigns.choices.BaselineChoice",
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("STORAGEOPS_LOG_LEVEL", "INFO")},
    # gfal2 logs every plugin load and credential look-up at INFO: keep its warnings only.
    "loggers": {"gfal2": {"level": env_str("STORAGEOPS_GFAL2_LOG_LEVEL", "WARNING")}},
}
