"""Shared fixtures. Tests run against real PostgreSQL and Redis (see gateway_site/settings/test.py)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest
from django.conf import settings

from providers.models import Provider, RoutingRule
from teams.services import create_api_key, create_team
from tests import fast_flush, ordering
from tests.servers import start_redis

ROOT = Path(__file__).resolve().parents[1]


def pytest_configure(config):
    ordering.configure(config)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Longest test files first for `make test`'s xdist processes (tests/ordering.py)."""
    ordering.longest_files_first(config, items)


@pytest.fixture(scope="session", autouse=True)
def _remove_this_runs_redis_keys():
    """At the end of the session delete every key of this run from the shared Redis: the run's key
    prefix (quota, breaker, config, budgets) and the broker queues and kombu bindings of test queues,
    whose names start with the same prefix (see tests.workers.test_queue). Touches nothing else."""
    # read now, not at teardown: a test that points settings at a Redis of its own (an outage test's
    # private server) must not turn the clean-up towards a server that is gone
    url = getattr(settings, "CELERY_BROKER_URL", "") or ""
    urls = {u for u in (settings.REDIS_URL, url) if u and u.startswith(("redis://", "rediss://", "unix://"))}
    prefix = settings.GATEWAY_REDIS_PREFIX
    yield
    import redis

    for u in urls:
        client = redis.Redis.from_url(u)
        try:
            keys = list(client.scan_iter(match=f"*{prefix}*", count=1000))
            for start in range(0, len(keys), 500):
                client.delete(*keys[start : start + 500])
        except redis.RedisError:
            pass  # Redis not there: there is nothing of ours to remove
        finally:
            client.close()


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """pytest-django's test database, with ``synchronous_commit = off`` for every session on it: this
    process's and every subprocess's (workers, servers, manage.py — they connect by URL). A commit then
    does not wait for its WAL flush to reach the disk (~5 ms on this machine's shared disk, ~0.3 ms
    without). Visibility, locking and isolation are unchanged; only a crash of the shared PostgreSQL could
    lose the last commits, and no test crashes that server (the outage tests start PostgreSQL servers of
    their own)."""
    from django.db import connection

    if connection.vendor == "postgresql":
        with django_db_blocker.unblock(), connection.cursor() as cursor:
            name = connection.ops.quote_name(connection.settings_dict["NAME"])
            cursor.execute(f"ALTER DATABASE {name} SET synchronous_commit = off")
            cursor.execute("SET synchronous_commit = off")  # this session began before the ALTER
    yield


@pytest.fixture(scope="session", autouse=True)
def _flush_with_delete():
    """Transactional tests end with DELETE of every table, not TRUNCATE (tests/fast_flush.py)."""
    with fast_flush.delete_instead_of_truncate():
        yield


@pytest.fixture
def team(db):
    return create_team("acme")[0]


@pytest.fixture
def other_team(db):
    return create_team("globex")[0]


@pytest.fixture
def api_key(team):
    """(ApiKey row, raw key) for `team`."""
    return create_api_key(team, "tests")


@pytest.fixture
def make_provider(db):
    def make(name: str = "alpha", **overrides) -> Provider:
        values = dict(
            base_url=f"http://127.0.0.1:9/{name}/v1",  # port 9 (discard): never a running simulator
            model=f"{name}-chat",
            rpm=60,
            tpm=100_000,
            max_concurrency=6,
            burst_seconds=5.0,
            timeout_seconds=30.0,
            max_retries=3,
        )
        values.update(overrides)
        return Provider.objects.create(name=name, **values)

    return make


@pytest.fixture
def make_route(db):
    def make(route: str, provider: Provider, priority: int = 0, weight: int = 1, **kw) -> RoutingRule:
        return RoutingRule.objects.create(
            route=route, provider=provider, priority=priority, weight=weight, **kw
        )

    return make


@pytest.fixture
def redis_sync():
    """A synchronous client on the test Redis; deletes this run's keys afterwards."""
    import redis

    client = redis.Redis.from_url(settings.REDIS_URL)
    yield client
    keys = list(client.scan_iter(match=settings.GATEWAY_REDIS_PREFIX + "*", count=1000))
    if keys:
        client.delete(*keys)
    client.close()


@pytest.fixture(autouse=True)
def _forget_dispatchers():
    """Tests that start real workers kill them at teardown; their dispatcher tokens must not count as
    live dispatchers for the next test (this run's Redis prefix is shared by the whole session)."""
    yield
    if not getattr(settings, "REDIS_URL", None):
        return
    import redis

    client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
    try:
        client.delete(f"{settings.GATEWAY_REDIS_PREFIX}dispatchers")
    except redis.RedisError:
        pass
    finally:
        client.close()


ENGINE_THREADS = ("gateway-reaper", "gateway-dispatcher", "batch-")


@pytest.fixture(autouse=True)
def _no_engine_thread_outlives_its_test():
    """Single-process mode runs the engine on threads of the process: a submission's ``batch-<id>``
    thread, the ``gateway-dispatcher`` thread and the reconciler (``gateway-reaper``, started once per
    process by ``batches.tasks._ensure_local_reaper`` and, in production, never stopped). A test that
    turns that mode on (``GATEWAY_BACKGROUND_EAGER``) must not leave them running in the pytest process:
    once its settings override ends they carry on with the session's settings — multi-worker mode on
    the shared Redis — and act as one more dispatcher on later tests' batches, with a quota store other
    than the one those tests' workers use. (They did: a leaked reconciler started a dispatcher in the
    pytest process that sent at the provider's full rate during test_redis_restart_mid_batch's Redis
    outage.) Stops the reconciler, waits for the other threads to end and fails the test if they don't."""
    yield
    import threading
    import time

    from batches import tasks

    reaper = tasks._reaper
    if reaper is not None:
        reaper.stopped.set()
        reaper.join(30)
        tasks._reaper = None
    deadline = time.monotonic() + 30

    def running() -> list[str]:
        return [t.name for t in threading.enumerate() if t.name.startswith(ENGINE_THREADS) and t.is_alive()]

    while running() and time.monotonic() < deadline:
        time.sleep(0.05)
    left = running()
    assert not left, f"engine threads of single-process mode still running after the test: {left}"


@pytest.fixture(scope="session")
def private_redis(tmp_path_factory):
    """This run's own redis-server (free port, no persistence), shared by the session: for tests that
    SCRIPT FLUSH, CLIENT KILL or otherwise disturb a server. Yields its URL."""
    server = start_redis(tmp_path_factory.mktemp("private-redis"))
    yield server.url
    server.stop()


@pytest.fixture
def private_redis_sync(private_redis):
    """A synchronous client on the private redis-server; empties it afterwards (it is only ours)."""
    import redis

    client = redis.Redis.from_url(private_redis)
    yield client
    keys = list(client.scan_iter(count=1000))
    if keys:
        client.delete(*keys)
    client.close()


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory):
    """``copy(path)``: a new SQLite database at ``path`` with every migration applied, as after a user's
    ``python manage.py migrate``. That migrate runs once per test process, into a template this copies
    (a migrate on SQLite takes 10–20 s on this machine: every migration's commit waits for the disk)."""
    template = tmp_path_factory.mktemp("sqlite-template") / "migrated.sqlite3"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_URL"))}
    env["DATABASE_URL"] = f"sqlite:///{template}"
    migrate = [sys.executable, "manage.py", "migrate", "--noinput"]
    done = subprocess.run(migrate, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr

    def copy(path: Path) -> Path:
        with closing(sqlite3.connect(template)) as source, closing(sqlite3.connect(path)) as target:
            source.backup(target)  # a consistent copy, whatever of it is still in the WAL file
        return path

    return copy
