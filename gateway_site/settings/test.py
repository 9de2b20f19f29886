"""Test settings: real PostgreSQL and Redis, per-run isolation so parallel runs don't collide."""

import os
import uuid

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/gateway")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/0")
# Tests drive Celery eagerly unless a test starts real workers itself.
os.environ.setdefault("CELERY_TASK_ALWAYS_EAGER", "1")
# Each run gets its own key space in the shared Redis; subprocesses (workers) inherit it.
os.environ.setdefault("GATEWAY_REDIS_PREFIX", f"bgwtest:{uuid.uuid4().hex[:10]}:")
# Under pytest-xdist (`make test` runs the suite on several processes) each worker process has a key
# space of its own: the controller's prefix plus the worker's id (inherited by its subprocesses).
_XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
if _XDIST_WORKER and not os.environ["GATEWAY_REDIS_PREFIX"].endswith(f":{_XDIST_WORKER}:"):
    os.environ["GATEWAY_REDIS_PREFIX"] += f"{_XDIST_WORKER}:"

from gateway_site.env import derived_fernet_key  # noqa: E402

from .base import *  # noqa: E402,F403
from .base import DATABASES  # noqa: E402

DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# Each run gets its own test database (default suffix: this process id, so two runs on one machine
# never share one); TEST_DB_SUFFIX overrides it (e.g. TEST_DB_SUFFIX=_quota to reuse a database).
os.environ.setdefault("TEST_DB_SUFFIX", f"_run{os.getpid()}")
DATABASES["default"]["TEST"] = {"NAME": "test_gateway" + os.environ["TEST_DB_SUFFIX"]}
DATABASES["default"]["CONN_MAX_AGE"] = 0
REST_FRAMEWORK = {**REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"api_key": "100000/min"}}  # noqa: F405
# many tests send bad keys from 127.0.0.1; tests/hardening/test_auth_throttle.py sets its own limit
GATEWAY_AUTH_FAILURE_LIMIT = 100_000
# provider keys at rest: a key derived from SECRET_KEY unless GATEWAY_SECRET_KEYS is set (never in production)
if not GATEWAY_SECRET_KEYS:  # noqa: F405
    GATEWAY_SECRET_KEYS = [derived_fernet_key(SECRET_KEY)]  # noqa: F405
