"""PostgreSQL statements per batch item (issue #36 "Performance": claims, result writes, progress and
finalize must cost a fraction of a statement per item). A 1,000-item batch is submitted and run to the
end in this process — the submission service, the production dispatcher (eager), finalize — and every
statement any thread of the process sends is counted at Django's cursor."""

from __future__ import annotations

import collections
import re
import subprocess
import threading
import time

import pytest
from django.conf import settings
from django.db.backends import utils as db_utils

from batches.models import Batch, BatchStatus
from batches.submission import submit_batch
from gateway_engine.breaker_redis import _LUA as breaker_lua
from gateway_engine.breaker_redis import BREAKER_FUNCTION
from gateway_engine.quota.lua import settle_script
from gateway_engine.quota.redis_conn import RedisConnection
from gateway_engine.quota.resp import Script

from .provider_server import ok_reply

pytestmark = pytest.mark.django_db(transaction=True)

ITEMS = 1_000


class StatementCounter:
    """Counts what every cursor of the process executes (all threads), by its first word."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.kinds: collections.Counter[str] = collections.Counter()

    def note(self, sql: str) -> None:
        word = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else "?"
        with self.lock:
            self.kinds[word] += 1

    @property
    def total(self) -> int:
        return sum(self.kinds.values())


@pytest.fixture
def statements(monkeypatch):
    counter = StatementCounter()
    execute, executemany = db_utils.CursorWrapper.execute, db_utils.CursorWrapper.executemany

    def counted_execute(self, sql, params=None):
        counter.note(str(sql))
        return execute(self, sql, params)

    def counted_executemany(self, sql, param_list):
        counter.note(str(sql))
        return executemany(self, sql, param_list)

    def counted_copy(self, statement, *args, **kwargs):  # the submission's COPY … FROM STDIN: one statement
        counter.note(str(statement))
        return self.cursor.copy(statement, *args, **kwargs)

    monkeypatch.setattr(db_utils.CursorWrapper, "execute", counted_execute)
    monkeypatch.setattr(db_utils.CursorWrapper, "executemany", counted_executemany)
    monkeypatch.setattr(db_utils.CursorWrapper, "copy", counted_copy, raising=False)
    return counter


def test_a_1000_item_batch_costs_a_fraction_of_a_statement_per_item(
    provider_server, make_provider, team, redis_sync, statements, django_capture_on_commit_callbacks
):
    provider_server.behaviours["st"] = lambda n, r, a, b: ok_reply(0.0)
    make_provider("st", base_url=provider_server.url("st"), rpm=10**6, tpm=10**9, max_concurrency=64)
    items = [
        {"custom_id": f"s{i}", "query": f"question {i}", "provider": "st", "params": {"max_tokens": 4}}
        for i in range(ITEMS)
    ]
    start = statements.total
    with django_capture_on_commit_callbacks(execute=True):
        batch = submit_batch(team=team, items=items)
    spent = statements.total - start
    batch = Batch.objects.get(pk=batch.pk)
    assert batch.status == BatchStatus.COMPLETED and batch.completed_count == ITEMS
    assert provider_server.count("st") == ITEMS  # every item sent once
    print(f"statements for {ITEMS} items: {spent} ({spent / ITEMS:.3f}/item) {dict(statements.kinds)}")
    assert statements.kinds["COPY"] == 1  # the items go in with one COPY (the counter sees it)
    assert spent / ITEMS <= BOUND, dict(statements.kinds)


# measured 2026-12-03 at e07ee89: 102 statements for 1,000 items (0.10/item: 62 SELECT, 28 WITH … (the
# claims), 10 UPDATE, 1 COPY, 4 INSERT). A change that writes, claims or counts per item (≥ 1 statement
# per item) fails; the bound leaves room for a few more per slice, not per item.
BOUND = 0.2


def test_redis_commands_per_item_of_a_1000_item_batch(
    provider_server, make_provider, team, redis_sync, tmp_path, django_capture_on_commit_callbacks
):
    """Every Redis command this run's key space receives while a 1,000-item batch runs (MONITOR on the
    shared server, filtered to this run's database and key prefix; a Lua script counts once). In this
    process Celery is eager, so its broker traffic is not in the count (bench/batch_path.py
    --redis-monitor counts it with real workers)."""
    provider_server.behaviours["rc"] = lambda n, r, a, b: ok_reply(0.0)
    make_provider("rc", base_url=provider_server.url("rc"), rpm=10**6, tpm=10**9, max_concurrency=64)
    items = [
        {"custom_id": f"c{i}", "query": f"question {i}", "provider": "rc", "params": {"max_tokens": 4}}
        for i in range(ITEMS)
    ]
    kwargs = redis_sync.connection_pool.connection_kwargs
    log = tmp_path / "monitor.log"
    with log.open("wb") as sink:  # into a file: a pipe nobody reads fills and Redis drops the client
        monitor = subprocess.Popen(
            [
                "redis-cli",
                "-h",
                str(kwargs.get("host", "127.0.0.1")),
                "-p",
                str(kwargs.get("port", 6379)),
                "MONITOR",
            ],
            stdout=sink,
        )
        try:
            time.sleep(0.3)  # the MONITOR client is attached before the batch starts
            with django_capture_on_commit_callbacks(execute=True):
                batch = submit_batch(team=team, items=items)
            time.sleep(0.3)
        finally:
            monitor.terminate()
            monitor.wait(10)
    assert Batch.objects.get(pk=batch.pk).completed_count == ITEMS
    assert provider_server.count("rc") == ITEMS
    db, prefix = kwargs.get("db", 0), settings.GATEWAY_REDIS_PREFIX
    ours = [
        line
        for line in log.read_text(errors="replace").splitlines()
        if f"[{db} " in line and " lua]" not in line and prefix in line
    ]
    names = collections.Counter(line.split('"', 2)[1].upper() for line in ours)
    print(f"redis commands for {ITEMS} items: {len(ours)} ({len(ours) / ITEMS:.2f}/item) {dict(names)}")
    scripts = script_names(ours)
    print("scripts:", dict(scripts))
    assert names["EVALSHA"] + names["EVAL"] >= ITEMS  # the counter sees the admission scripts
    assert len(ours) / ITEMS <= REDIS_BOUND, dict(names)
    # one ADMIT per item (token, lease and this process's slot together) and never a give-back: the
    # lease and the in-flight slot (64 each here) are never found busy after a grant
    assert scripts["ADMIT"] == ITEMS and scripts["RELEASE"] == 0, dict(scripts)
    # no breaker script of its own per successful item: while the breaker is known closed, allow is
    # answered in this process (breaker_redis.KNOWN_CLOSED_SECONDS; only the first wave of allows asks),
    # and the success is recorded inside the settle (SETTLE: RECONCILE + the breaker's record)
    assert scripts["breaker"] <= 0.3 * ITEMS and scripts["SETTLE"] == ITEMS, dict(scripts)
    # Redis Cluster readiness (issue "Several hosts"): every script's keys lie in one hash slot (the
    # per-provider {name} and per-owner {owner} hash tags), so each atomic step stays on one node
    crossing = [line for line in ours if '"EVALSHA"' in line and len(set(map(slot, script_keys(line)))) > 1]
    assert crossing == [], crossing[:3]


_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')


def script_names(monitor_lines: list[str]) -> collections.Counter[str]:
    """How often each of the gateway's Lua scripts ran (EVALSHA by its SHA; "breaker": the breaker's)."""
    by_sha = {script.sha: name for name, script in RedisConnection("redis://x", "", 1, 1).scripts.items()}
    by_sha[Script(breaker_lua).sha] = "breaker"
    by_sha[Script(settle_script(BREAKER_FUNCTION)).sha] = "SETTLE"  # RECONCILE + the breaker's success
    shas = (_QUOTED.findall(line)[1] for line in monitor_lines if '"EVALSHA"' in line)
    return collections.Counter(by_sha.get(sha, sha[:8]) for sha in shas)


def script_keys(monitor_line: str) -> list[str]:
    """The KEYS of one MONITOR line of EVALSHA sha numkeys key… arg…."""
    parts = _QUOTED.findall(monitor_line)
    return parts[3 : 3 + int(parts[2])]


def crc16(data: bytes) -> int:
    """CRC16-CCITT (XMODEM), the checksum of Redis Cluster's key slots."""
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def slot(key: str) -> int:
    """The cluster slot of a key: the CRC16 of its hash tag (the first non-empty {…}), else of the key."""
    start = key.find("{")
    if start != -1:
        end = key.find("}", start + 1)
        if end > start + 1:
            key = key[start + 1 : end]
    return crc16(key.encode()) % 16384


def test_the_slot_function_matches_redis_cluster():
    # values from Redis Cluster's specification: CRC16("123456789") = 0x31C3; a hash tag decides alone
    assert crc16(b"123456789") == 0x31C3
    assert slot("{user1000}.following") == slot("{user1000}.followers") == slot("user1000")
    assert slot("foo{}{bar}") == crc16(b"foo{}{bar}") % 16384


# Issue #36 asks for at most 4 (Celery's included) and at most two round trips per attempt: NOT MET yet.
# Measured 2026-12-03 at e07ee89 in this process (one eager dispatcher, 64 lease slots): 12.4–13.2 per
# item — per item 2.1 ACQUIRE + 2.1 LEASE_ACQUIRE + 1.1 RELEASE (admissions taken and given back when
# the lease is busy), 2 breaker scripts, 0.9 RECONCILE/ADAPT, journal RPUSH ×2 + EXPIRE, queue ZREM ×2.
# With real workers bench/batch_path.py --redis-monitor counts 8.4 (docs/benchmarks.md "batch-path").
# 2026-12-04 (after the team-limit and error-table merges): 12.7 and 13.6 quiet, 14.2 in a CI run under
# load — the give-backs (RELEASE) grow with contention for the lease.
# 2026-12-07, wave7/admit, alternated with main (163b026) in the same minutes: main 12.85 and 12.53
# (1.9 ACQUIRE + 1.9 LEASE_ACQUIRE + 0.9 RELEASE + 2 breaker + 0.9 RECONCILE + 2 RPUSH + EXPIRE + 1.9
# ZREM); with the ADMIT (token, lease and the process's slot in one try) 7.93 and 7.93 (1 ADMIT, 0
# RELEASE, 2 breaker, 0.9 RECONCILE, 2 RPUSH, 1 EXPIRE, 1 ZREM). With the breaker's allow answered
# locally while known closed: main 12.18 and 12.61, this branch 7.07 and 7.06 (1.13 breaker scripts per
# item: the outcomes, and the first wave's allows). With the success folded into the settle (SETTLE):
# 6.17 and 6.17 (1 ADMIT, 1 ZREM lease release, 1 SETTLE, 0.13 breaker allows of the first wave, and
# the journal's 2 RPUSH + 1 EXPIRE). After the merge with the journal's one-script note (RPUSH + EXPIRE
# in one EVALSHA): 5.16 (3.13 EVALSHA: ADMIT, SETTLE, the note, 0.13 breaker allows; 1 RPUSH sent mark;
# 1 ZREM lease release). The bound holds that with a margin for a loaded machine, so that a step back
# fails; lower it with each step. Still above the 4: the lease release and the sent mark.
REDIS_BOUND = 6
