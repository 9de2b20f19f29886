"""Settings shared by every environment. All environment variables are read here and in the two modules
it imports whole: security.py (#29, #41) and files.py (/v1/files) (docs/contract.md §2)."""

from __future__ import annotations

from pathlib import Path

import django_stubs_ext
import environ
from django.core.exceptions import ImproperlyConfigured

from gateway_engine.redis_target import celery_broker
from gateway_site.env import env_bool, env_float, env_int, env_list, env_str, env_url, refuse_removed
from observability.logs import default_format as default_log_format
from observability.logs import logging_config

# Django's generic classes (ModelAdmin[Team], QuerySet[ApiKey]) subscriptable at run time, as the typed
# modules (teams/, batches/submission/, mypy strict) write them
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent.parent

# variables that once did something: set, they refuse to start rather than being ignored
refuse_removed({"GATEWAY_PROVIDER_TRANSPORT": "aiohttp is the only provider transport; unset the variable"})

DEV_SECRET_KEY = "dev-insecure-secret-key-do-not-use-in-production"
SECRET_KEY = env_str("DJANGO_SECRET_KEY", DEV_SECRET_KEY)
DEBUG = env_bool("DJANGO_DEBUG", False)
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", False)
if SECURE_SSL_REDIRECT:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    # HSTS on whenever TLS is (a year by default; 0 turns it off)
    SECURE_HSTS_SECONDS = env_int("DJANGO_SECURE_HSTS_SECONDS", 31_536_000, minimum=0)
    SECURE_CONTENT_TYPE_NOSNIFF = True

# --- database -------------------------------------------------------------------------------------
_database_url = env_str("DATABASE_URL", "sqlite:///db.sqlite3")
try:
    _db = environ.Env.db_url_config(_database_url)
except Exception as exc:  # noqa: BLE001 - re-raised with the variable name
    raise ImproperlyConfigured(f"DATABASE_URL={_database_url!r} is not a valid database URL: {exc}") from exc
if not _db.get("ENGINE"):
    raise ImproperlyConfigured(f"DATABASE_URL={_database_url!r}: unsupported scheme")
if (
    _db["ENGINE"] == "django.db.backends.sqlite3"
    and _db["NAME"] not in (":memory:", "")
    and not str(_db["NAME"]).startswith("/")
):
    _db["NAME"] = str(BASE_DIR / _db["NAME"])
_db.setdefault("CONN_MAX_AGE", env_int("DATABASE_CONN_MAX_AGE", 60, minimum=0))
_db["CONN_HEALTH_CHECKS"] = True
if _db["ENGINE"] == "django.db.backends.sqlite3":
    # the single-process demo runs a web server and a background engine thread on one file: WAL lets
    # readers proceed while results are written; IMMEDIATE avoids lock-upgrade deadlocks
    _db.setdefault("OPTIONS", {}).update(
        {"timeout": 30, "init_command": "PRAGMA journal_mode=WAL;", "transaction_mode": "IMMEDIATE"}
    )
# Under ASGI (gateway_site.asgi sets GATEWAY_ASGI=1 before loading the settings) every request's ORM work
# runs in a thread of its own: persistent per-thread connections would pile up, so connections come from
# psycopg's pool instead and are handed back after each use (CONN_MAX_AGE 0, as Django requires there).
GATEWAY_ASGI = env_bool("GATEWAY_ASGI", False)
# the ASGI application's threads for the WSGI side of the site (gateway_site.asgi), and, for measuring
# only, "django": Django's own ASGI handler for every path (docs/benchmarks.md)
GATEWAY_ASGI_THREADS = env_int("GATEWAY_ASGI_THREADS", 4, minimum=1, maximum=256)
GATEWAY_ASGI_SYNC_PATHS = env_str("GATEWAY_ASGI_SYNC_PATHS", "wsgi")
if GATEWAY_ASGI_SYNC_PATHS not in ("wsgi", "django"):
    raise ImproperlyConfigured(
        f"GATEWAY_ASGI_SYNC_PATHS={GATEWAY_ASGI_SYNC_PATHS!r}: must be 'wsgi' or 'django'"
    )
if GATEWAY_ASGI and _db["ENGINE"] == "django.db.backends.postgresql":
    _db["CONN_MAX_AGE"] = 0
    _db.setdefault("OPTIONS", {})["pool"] = {
        "min_size": 1,
        "max_size": env_int("DATABASE_POOL_MAX_SIZE", GATEWAY_ASGI_THREADS + 4, minimum=1, maximum=1000),
        "timeout": 10,
    }
DATABASES = {"default": _db}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- redis, celery, quota store -------------------------------------------------------------------
REDIS_URL = env_url("REDIS_URL", None, schemes=("redis", "rediss", "unix"))
# "redis": shared token buckets, leases and breakers live in Redis (multi-worker).
# "local": single process, in-memory quota store; Celery runs eagerly.
GATEWAY_QUOTA_BACKEND = "redis" if REDIS_URL else "local"
GATEWAY_REDIS_PREFIX = env_str("GATEWAY_REDIS_PREFIX", "bgw:")
# Single-process mode (REDIS_URL unset: this process runs batches itself with in-process quotas, leases and
# breakers) is safe only where one process is the whole system: on SQLite by default; on any other
# database only with GATEWAY_SINGLE_PROCESS=1, since a forgotten REDIS_URL there would let every web and
# command process run batches under its own limits while the workers sit idle (#28).
_single_process_default = _db["ENGINE"] == "django.db.backends.sqlite3"
GATEWAY_SINGLE_PROCESS = env_bool("GATEWAY_SINGLE_PROCESS", REDIS_URL is None and _single_process_default)
if REDIS_URL is not None and GATEWAY_SINGLE_PROCESS:
    raise ImproperlyConfigured(
        "GATEWAY_SINGLE_PROCESS is on but REDIS_URL is set: unset one of them (with REDIS_URL, "
        "workers run batches under shared quotas)"
    )
if REDIS_URL is None and not GATEWAY_SINGLE_PROCESS:
    _why = (
        "GATEWAY_SINGLE_PROCESS is off"
        if _single_process_default
        else f"DATABASE_URL is {_db['ENGINE'].rsplit('.', 1)[-1]}, not SQLite"
    )
    raise ImproperlyConfigured(
        f"REDIS_URL is not set and {_why}: set REDIS_URL (shared quotas, workers), or "
        "GATEWAY_SINGLE_PROCESS=1 to run batches inside this process with its own in-process limits"
    )

try:  # REDIS_URL=redis://[:pw@]MASTER/DB?sentinels=h:p,h:p follows a Sentinel failover (redis_target.py)
    _broker_default, _broker_sentinel_options = celery_broker(REDIS_URL) if REDIS_URL else ("", {})
except ValueError as exc:
    raise ImproperlyConfigured(str(exc)) from exc
CELERY_BROKER_URL = env_url(
    # memory://localhost/: no broker is used (eager); a bare memory:// makes kombu warn "No hostname"
    "CELERY_BROKER_URL",
    _broker_default or "memory://localhost/",
    schemes=("redis", "rediss", "unix", "memory", "amqp", "sentinel"),
)
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", REDIS_URL is None)
CELERY_TASK_EAGER_PROPAGATES = True
# Single-process mode: run a submitted batch on a background thread of the web process, so that
# POST /api/v1/batches answers 201 at once and progress can be polled (as with real workers).
GATEWAY_BACKGROUND_EAGER = env_bool(
    "GATEWAY_BACKGROUND_EAGER", CELERY_TASK_ALWAYS_EAGER and REDIS_URL is None
)
CELERY_TASK_IGNORE_RESULT = True
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = "UTC"
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# A task that is not acked within this many seconds is redelivered by the Redis transport. Chunks are
# short (a few hundred items), and claims are re-checked, so an hour is a safe upper bound.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 3600, minimum=60),
    # the broker derived from a REDIS_URL with sentinels: kombu asks them for this master
    **(_broker_sentinel_options if CELERY_BROKER_URL == _broker_default else {}),
}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Queue for gateway tasks (tests give each run its own, so stray workers can't take its tasks).
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_TASK_DEFAULT_QUEUE", "celery")

# --- gateway knobs --------------------------------------------------------------------------------
GATEWAY_MAX_ITEMS_PER_BATCH = env_int("GATEWAY_MAX_ITEMS_PER_BATCH", 50_000, minimum=1)
GATEWAY_MAX_BODY_BYTES = env_int("GATEWAY_MAX_BODY_BYTES", 100 * 1024 * 1024, minimum=1024)
GATEWAY_MAX_ITEM_BYTES = env_int("GATEWAY_MAX_ITEM_BYTES", 1024 * 1024, minimum=256)
GATEWAY_CHUNK_SIZE = env_int("GATEWAY_CHUNK_SIZE", 250, minimum=1, maximum=10_000)
GATEWAY_GLOBAL_MAX_IN_FLIGHT = env_int("GATEWAY_GLOBAL_MAX_IN_FLIGHT", 64, minimum=1, maximum=10_000)
# Optional cluster-wide cap on provider calls in flight across all workers (Redis mode); 0 = off.
GATEWAY_CLUSTER_MAX_IN_FLIGHT = env_int("GATEWAY_CLUSTER_MAX_IN_FLIGHT", 0, minimum=0, maximum=1_000_000)
# max_tokens assumed (TPM/OTPM reservation) and sent where a provider kind requires it (anthropic) when
# an item sets none (issue #21: 1024, so a required max_tokens does not cut ordinary answers short)
GATEWAY_DEFAULT_MAX_TOKENS = env_int("GATEWAY_DEFAULT_MAX_TOKENS", 1024, minimum=1)
# Execution engine: a worker owns claimed items for this long (renewed while alive); a dead worker's
# items are claimed again after it. Retry backoff: full jitter, base × 2^n capped.
GATEWAY_CLAIM_LEASE_SECONDS = env_float("GATEWAY_CLAIM_LEASE_SECONDS", 60.0, minimum=2.0, maximum=3600.0)
# Provider batches (docs/provider_batches.md): polls of a provider batch start this far apart and grow by
# half each time up to the maximum; the deadline guard keeps this margin beyond what real time needs
GATEWAY_PROVIDER_BATCH_POLL_MIN_SECONDS = env_float(
    "GATEWAY_PROVIDER_BATCH_POLL_MIN_SECONDS", 30.0, minimum=0.05, maximum=3600.0
)
GATEWAY_PROVIDER_BATCH_POLL_MAX_SECONDS = env_float(
    "GATEWAY_PROVIDER_BATCH_POLL_MAX_SECONDS", 600.0, minimum=0.05, maximum=3600.0
)
GATEWAY_PROVIDER_BATCH_GUARD_MARGIN_SECONDS = env_float(
    "GATEWAY_PROVIDER_BATCH_GUARD_MARGIN_SECONDS", 300.0, minimum=0.0, maximum=86400.0
)
# Scheduling (docs/engine.md): dispatcher slices, fair share, priority aging, outage ride-through
GATEWAY_DISPATCHERS = env_int("GATEWAY_DISPATCHERS", 4, minimum=1, maximum=1000)
GATEWAY_DISPATCH_SLICE_SECONDS = env_float("GATEWAY_DISPATCH_SLICE_SECONDS", 20.0, minimum=1.0, maximum=600.0)
GATEWAY_DISPATCH_LOOKAHEAD_SECONDS = env_float(
    "GATEWAY_DISPATCH_LOOKAHEAD_SECONDS", 1.0, minimum=0.1, maximum=60.0
)
GATEWAY_PRIORITY_AGING_SECONDS = env_float(
    "GATEWAY_PRIORITY_AGING_SECONDS", 300.0, minimum=0.0, maximum=86400.0
)
# Routing by capacity (batches/execution/capacity.py): how long an item waits for a saturated provider
# before a same-priority peer of its route with room takes it (a paused or open-breaker one: at once)
GATEWAY_CAPACITY_MOVE_WAIT_SECONDS = env_float(
    "GATEWAY_CAPACITY_MOVE_WAIT_SECONDS", 5.0, minimum=0.0, maximum=86400.0
)
# Prefix grouping (issue #25, batches/scheduling/prefix.py): a team's items sharing a prompt prefix are
# claimed and sent back to back, for the providers' prompt caches. Off: claims in submission order.
GATEWAY_PREFIX_GROUPING = env_bool("GATEWAY_PREFIX_GROUPING", True)
# Per-team limits' defaults (queued work, RPM / TPM burst): gateway_site/settings/teams.py
from .teams import *  # noqa: E402, F403 - read through teams/limits.py; a team's own value overrides each

# Warm shutdown (docs/operations.md): on SIGTERM a worker's slices stop claiming, wait this long at most
# for the calls in flight, store their answers and release the rest; `make down` and compose wait longer.
GATEWAY_SHUTDOWN_SECONDS = env_float("GATEWAY_SHUTDOWN_SECONDS", 30.0, minimum=1.0, maximum=600.0)
GATEWAY_OUTAGE_RIDE_SECONDS = env_float("GATEWAY_OUTAGE_RIDE_SECONDS", 30.0, minimum=1.0, maximum=600.0)
GATEWAY_RETRY_BASE_SECONDS = env_float("GATEWAY_RETRY_BASE_SECONDS", 0.5, minimum=0.001, maximum=60.0)
GATEWAY_RETRY_CAP_SECONDS = env_float("GATEWAY_RETRY_CAP_SECONDS", 30.0, minimum=0.01, maximum=600.0)
GATEWAY_CONFIG_REFRESH_SECONDS = env_float("GATEWAY_CONFIG_REFRESH_SECONDS", 2.0, minimum=0.1, maximum=600.0)
GATEWAY_API_THROTTLE_RATE = env_str("GATEWAY_API_THROTTLE_RATE", "600/min")
# The interactive lane (issue #22, docs/interactive.md): how long a call may wait for quota (a caller may
# lower it with the X-Gateway-Max-Wait header), how many calls one web process holds at once (more:
# 429 gateway_busy), and how long the request log keeps its rows.
GATEWAY_INTERACTIVE_MAX_WAIT_SECONDS = env_float(
    "GATEWAY_INTERACTIVE_MAX_WAIT_SECONDS", 30.0, minimum=0.0, maximum=3600.0
)
GATEWAY_INTERACTIVE_MAX_CALLS = env_int("GATEWAY_INTERACTIVE_MAX_CALLS", 4000, minimum=1, maximum=1_000_000)
GATEWAY_INTERACTIVE_LOG_RETENTION_DAYS = env_int("GATEWAY_INTERACTIVE_LOG_RETENTION_DAYS", 30, minimum=0)
# Hardening (issue #13): a provider answer larger than this (decompressed) is invalid_response; a
# Retry-After / x-ratelimit-reset-* longer than this is ignored as malformed; an item waits at most
# this long in total for an open circuit breaker.
GATEWAY_MAX_ANSWER_BYTES = env_int("GATEWAY_MAX_ANSWER_BYTES", 4 * 1024 * 1024, minimum=1024)
GATEWAY_MAX_RATE_LIMIT_WAIT_SECONDS = env_float(
    "GATEWAY_MAX_RATE_LIMIT_WAIT_SECONDS", 600.0, minimum=1.0, maximum=86_400.0
)
GATEWAY_MAX_BREAKER_WAIT_SECONDS = env_float(
    "GATEWAY_MAX_BREAKER_WAIT_SECONDS", 120.0, minimum=0.0, maximum=86_400.0
)
# Webhooks when a batch ends (issue #26, docs/webhooks.md): a webhook_url must be https:// and may not
# name a loopback/private/link-local/metadata address unless GATEWAY_WEBHOOK_ALLOW_PRIVATE is on (local
# receivers, tests). Delivery: a timeout per attempt, exponential backoff from the base (doubling, capped)
# for at most GATEWAY_WEBHOOK_MAX_AGE_SECONDS after the batch ended.
GATEWAY_WEBHOOK_ALLOW_PRIVATE = env_bool("GATEWAY_WEBHOOK_ALLOW_PRIVATE", False)
GATEWAY_WEBHOOK_TIMEOUT_SECONDS = env_float(
    "GATEWAY_WEBHOOK_TIMEOUT_SECONDS", 10.0, minimum=0.5, maximum=60.0
)
GATEWAY_WEBHOOK_RETRY_BASE_SECONDS = env_float(
    "GATEWAY_WEBHOOK_RETRY_BASE_SECONDS", 5.0, minimum=0.01, maximum=3600.0
)
GATEWAY_WEBHOOK_RETRY_CAP_SECONDS = env_float(
    "GATEWAY_WEBHOOK_RETRY_CAP_SECONDS", 3600.0, minimum=0.1, maximum=86_400.0
)
GATEWAY_WEBHOOK_MAX_AGE_SECONDS = env_float(
    "GATEWAY_WEBHOOK_MAX_AGE_SECONDS", 86_400.0, minimum=1.0, maximum=7 * 86_400.0
)
# DATA_UPLOAD_MAX_MEMORY_SIZE stays Django's default (2.5 MB) for every form and login POST; only
# POST /api/v1/batches reads a larger body, itself (request.stream), capped by GATEWAY_MAX_BODY_BYTES.

# --- OpenAI-compatible files (/v1/files): gateway_site/settings/files.py --------------------------
from .files import *  # noqa: E402, F403 - size, storage (STORAGES), per-team quotas, expiry
from .files import refuse_local_disk_across_hosts  # noqa: E402

refuse_local_disk_across_hosts(_db)

# --- django ---------------------------------------------------------------------------------------
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "teams",
    "providers",
    "batches",
    "dashboard",
    "openai_api",
    "sim",
    "observability",
    "audit",
    "interactive",  # /v1/chat/completions and /v1/models (issue #22)
    "webhooks",  # signed events when a batch ends (issue #26)
    "response_cache",  # the response cache and in-flight dedup (issue #25)
    "provider_batches",  # the providers' own batch APIs (issue #23, docs/provider_batches.md)
    "axes",  # admin login lockout (#29)
    "csp",
]

MIDDLEWARE = [
    "observability.logs.RequestIdMiddleware",
    # before anything that reads the Host: probes answer behind any Host, /api/ and /v1/ refuse one in JSON
    "gateway_site.hosts.HostMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "gateway_site.static.StaticFilesMiddleware",  # WhiteNoise, also async (ASGI)
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "audit.context.AuditActorMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",  # last, as django-axes requires
]

ROOT_URLCONF = "gateway_site.urls"
WSGI_APPLICATION = "gateway_site.wsgi.application"

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

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "var" / "static"
# gunicorn serves the admin's and dashboard's static files itself (no separate web server needed);
# finders let it work without a collectstatic step.
WHITENOISE_USE_FINDERS = True
LOGIN_URL = "/admin/login/"

# --- security (#29, #41): gateway_site/settings/security.py ----------------------------------------
from .security import *  # noqa: E402, F403 - provider keys, proxies, body bounds, admin lockout, CSP

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": [],
    "DEFAULT_THROTTLE_RATES": {"api_key": GATEWAY_API_THROTTLE_RATE},
    "UNAUTHENTICATED_USER": None,
    # a dependency that is down (Redis, database) answers JSON 503 + Retry-After, never an HTML 500
    "EXCEPTION_HANDLER": "batches.api.exceptions.exception_handler",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Batch Gateway API",
    "DESCRIPTION": "Submit batches of LLM requests; the gateway routes, rate-shapes and executes them.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # the interactive lane is served outside DRF (gateway_site.asgi_interactive): documented by a hook
    "PREPROCESSING_HOOKS": [
        "openai_api.interactive_schema.add_interactive_endpoints",
        "interactive.embeddings_schema.add_embeddings_endpoint",
    ],
}

# --- observability (docs/operations.md) -------------------------------------------------------------
# Logs: "json" (one object per line) or "console" (human-readable; make demo). Unset: json, except for a
# manage.py command whose stderr is a terminal (console); web and worker processes log JSON.
GATEWAY_LOG_FORMAT = env_str("GATEWAY_LOG_FORMAT", default_log_format())
if GATEWAY_LOG_FORMAT not in ("json", "console"):
    raise ImproperlyConfigured(f"GATEWAY_LOG_FORMAT={GATEWAY_LOG_FORMAT!r}: must be 'json' or 'console'")
LOGGING = logging_config(GATEWAY_LOG_FORMAT, env_str("DJANGO_LOG_LEVEL", "INFO"))
# Prometheus: the multiprocess directory, the /metrics token, the worker hosts' metrics listener
from .metrics import *  # noqa: E402, F403 - gateway_site/settings/metrics.py

# Retention (manage.py purge_old_data): prompts, responses and uploaded files of batches finished more
# than this many days ago are deleted; batch stats and usage are kept. 0 = keep forever.
GATEWAY_RETENTION_DAYS = env_int("GATEWAY_RETENTION_DAYS", 0, minimum=0)
# The response cache and in-flight dedup (issue #25, docs/cache.md): how long a stored answer is served,
# the most bytes of answers kept (oldest evicted first by the gateway, never by Redis), and whether teams
# share entries (off: a team only ever sees the answers it paid for).
GATEWAY_CACHE_TTL_SECONDS = env_int("GATEWAY_CACHE_TTL_SECONDS", 86_400, minimum=1, maximum=365 * 86_400)
GATEWAY_CACHE_MAX_BYTES = env_int("GATEWAY_CACHE_MAX_BYTES", 1024**3, minimum=1024, maximum=1024**4)
GATEWAY_CACHE_SHARED_ACROSS_TEAMS = env_bool("GATEWAY_CACHE_SHARED_ACROSS_TEAMS", False)

# Team limits and live config (docs/quota.md)
# Seconds of refill taken off every bucket's burst capacity (never off the rate), so requests that reach
# a provider with up to this much jitter still fit a provider bucket configured exactly like ours.
GATEWAY_QUOTA_JITTER_MARGIN_SECONDS = env_float(
    "GATEWAY_QUOTA_JITTER_MARGIN_SECONDS", 0.25, minimum=0.0, maximum=10.0
)
# Workers subscribe to config change events (Redis pub/sub) and reload at once; the poll stays as fallback.
GATEWAY_CONFIG_PUBSUB = env_bool("GATEWAY_CONFIG_PUBSUB", True)
