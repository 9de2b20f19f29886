"""The fault suite (issue #13): a real Celery worker process runs batches against the deliberately
broken provider process, with the real PostgreSQL and Redis.

* A batch mixing every poison answer reaches a terminal state; each poison item ends with a clear
  error (or cleaned content), every item exactly once, each item called at most max_retries + 1
  times; a normal batch to the same providers right after completes.
* A provider that always times out (timeout_seconds 1, max_retries 1): sent items end ``timeout``,
  unsent ones ``no_provider`` saying which breaker was open and how long they really waited; the
  batch ends.

Pre-fix (main 58b4ea6) the first batch never ended (the NUL/surrogate/NaN/10^12 answers failed the
result write and the reaper re-ran the chunk forever) and the second waited ~120 s per item.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from batches.models import Batch, BatchItem, ItemStatus
from batches.selectors import result_page
from tests.engine.test_celery_workers import WORKER_ENV as KILL_TEST_WORKER_ENV
from tests.exactly_once import assert_exactly_once, counts_since
from tests.factories import make_batch
from tests.waiting import wait_until
from tests.workers import delete_queue, send_start_batch, start_worker, stop_worker, test_queue

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

MAX_RETRIES = 1
MAX_USAGE_TOKENS = 10_000_000  # gateway_engine.answers.MAX_USAGE_TOKENS
POISON = {
    # mode: (item status, error type) of every item sent there
    "nul": (ItemStatus.SUCCEEDED, ""),
    "surrogate": (ItemStatus.SUCCEEDED, ""),
    "raw_surrogate": (ItemStatus.SUCCEEDED, ""),
    "huge_usage": (ItemStatus.SUCCEEDED, ""),
    "nan": (ItemStatus.FAILED, "invalid_response"),
    "big": (ItemStatus.FAILED, "invalid_response"),
    "gzip_bomb": (ItemStatus.FAILED, "invalid_response"),
    "html": (ItemStatus.FAILED, "invalid_response"),
    "deep": (ItemStatus.FAILED, "invalid_response"),
    "reset_429": (ItemStatus.FAILED, "rate_limited"),
    "odd_headers": (ItemStatus.FAILED, "server_error"),
    "ok": (ItemStatus.SUCCEEDED, ""),
}
PER_MODE = 2


@pytest.fixture
def worker(tmp_path):
    queue = test_queue("faults")
    log_path = tmp_path / "worker.log"
    proc = start_worker(
        "faults",
        queue,
        log_path,
        **KILL_TEST_WORKER_ENV,  # the kill -9 test's worker, with short breaker waits and retries
        GATEWAY_MAX_BREAKER_WAIT_SECONDS="3",
        GATEWAY_RETRY_BASE_SECONDS="0.05",
        GATEWAY_RETRY_CAP_SECONDS="0.2",
    )
    try:
        yield queue, log_path
    finally:
        stop_worker(proc)
        delete_queue(queue)


def items(modes, content: str, prefix: str):
    return [
        {
            "custom_id": f"{prefix}{mode}-{i}",
            "provider": mode,
            "query": content,
            "params": {"max_tokens": 8},
        }
        for mode in modes
        for i in range(PER_MODE)
    ]


def make_batch_with(team, rows):
    batch = make_batch(team, rows)
    for row, item in zip(rows, BatchItem.objects.filter(batch=batch).order_by("seq"), strict=True):
        item.payload = {"messages": [{"role": "user", "content": row["query"]}], "params": row["params"]}
        item.save(update_fields=["payload"])
    return batch


def run_to_end(batch: Batch, queue: str, log_path, limit: float) -> Batch:
    send_start_batch(batch.id, queue)

    def ended() -> bool:
        batch.refresh_from_db()
        return batch.completed_at is not None

    def states() -> str:
        counts = Counter(BatchItem.objects.filter(batch=batch).values_list("status", flat=True))
        return f"{dict(counts)}\n{log_path.read_text()[-3000:]}"

    wait_until(ended, limit, 0.25, what=f"batch {batch.id} to end", on_fail=states)
    return batch


@pytest.mark.timeout(240)
def test_poison_batch_ends_cleanly_and_a_normal_batch_follows(
    broken, make_provider, team, redis_sync, worker
):
    queue, log_path = worker
    for mode in POISON:
        make_provider(
            mode,
            base_url=broken.url(mode),
            rpm=6000,
            tpm=60_000,
            burst_seconds=1,
            max_concurrency=4,
            timeout_seconds=10,
            max_retries=MAX_RETRIES,
        )
    before = Counter(broken.counts()["by_request"])
    seen = counts_since(broken)
    batch = run_to_end(make_batch_with(team, items(POISON, "poison", "p-")), queue, log_path, limit=90)
    assert batch.status == "completed"
    assert_exactly_once([batch], [seen])  # per custom id and per provider, what the provider saw

    rows = list(BatchItem.objects.filter(batch=batch))
    assert len(rows) == len(POISON) * PER_MODE  # every item exactly once, all terminal
    calls = Counter(broken.counts()["by_request"]) - before
    for row in rows:
        mode = row.custom_id[2:].rsplit("-", 1)[0]
        assert (row.status, row.error_type) == POISON[mode], (row.custom_id, row.error_message)
        assert 1 <= calls[row.custom_id] <= MAX_RETRIES + 1, row.custom_id
        assert calls[row.custom_id] == row.attempts, row.custom_id  # every call recorded, none hidden
        assert row.claimed_by == ""
        if mode in ("nul", "surrogate", "raw_surrogate"):
            content = row.response["choices"][0]["message"]["content"]
            assert "\ufffd" in content and "\x00" not in content
        if mode == "huge_usage":
            assert row.total_tokens == MAX_USAGE_TOKENS
        if mode == "odd_headers":
            # teams see class, status and a short sanitised message; staff keep the full body
            assert row.error_message == "upstream [address] failed, see [url]"
            assert "10.0.0.7:8443" in row.attempt_log[-1]["detail"]
        if mode == "html":
            assert row.error_message == "answer is HTML" and "10.1.2.3" in row.attempt_log[-1]["detail"]
        if mode in ("big", "gzip_bomb"):
            assert "larger than" in row.error_message
    # what the team reads through the API: no hosts, no IPs, no bodies, no attempt log
    team_view = json.dumps(result_page(batch, limit=1000)[0])
    for leak in ("10.0.0.7", "internal.example", "10.1.2.3", "<html>", "detail"):
        assert leak not in team_view
    assert (batch.completed_count, batch.failed_count) == (
        sum(PER_MODE for s, _ in POISON.values() if s == ItemStatus.SUCCEEDED),
        sum(PER_MODE for s, _ in POISON.values() if s == ItemStatus.FAILED),
    )

    # right after: a normal batch to the very same providers completes (no provider paused for
    # years, no TPM bucket at -10^12, no breaker stuck open)
    seen = counts_since(broken)
    normal = run_to_end(make_batch_with(team, items(POISON, "normal", "n-")), queue, log_path, limit=60)
    assert normal.status == "completed"
    assert_exactly_once([normal], [seen])
    assert (normal.completed_count, normal.failed_count) == (len(POISON) * PER_MODE, 0)


@pytest.mark.timeout(240)
def test_a_provider_that_always_times_out_ends_the_batch_honestly(
    broken, make_provider, team, redis_sync, worker
):
    queue, log_path = worker
    make_provider(
        "timeout",
        base_url=broken.url("timeout"),
        rpm=6000,
        tpm=10**6,
        max_concurrency=4,
        timeout_seconds=1,
        max_retries=1,
    )
    rows = [
        {"custom_id": f"t{i:02d}", "provider": "timeout", "query": "q", "params": {"max_tokens": 8}}
        for i in range(30)
    ]
    seen = counts_since(broken)
    batch = run_to_end(make_batch_with(team, rows), queue, log_path, limit=60)
    assert batch.status == "failed"  # ended: every item failed
    assert_exactly_once([batch], [seen])
    calls = Counter(broken.counts()["by_request"])
    results = list(BatchItem.objects.filter(batch=batch))
    assert len(results) == 30
    sent = [r for r in results if r.attempts]
    unsent = [r for r in results if not r.attempts]
    assert sent and unsent  # the breaker opened after 5 timeouts and stopped the rest
    for r in sent:
        assert (r.status, r.error_type) == (ItemStatus.FAILED, "timeout"), r.error_message
        assert calls[r.custom_id] == r.attempts <= 2
    for r in unsent:
        assert (r.status, r.error_type, r.error_status_code) == (ItemStatus.FAILED, "no_provider", None)
        assert calls[r.custom_id] == 0
        assert r.error_message.startswith("never sent: circuit breaker open for timeout: waited ")
        waited = float(r.error_message.split("waited ")[1].split(" s")[0])
        assert 3.0 <= waited < 10.0 and "(limit 3 s)" in r.error_message
    for r in sent:
        if r.attempts < 2:  # its retry found the breaker open: it says so, with the real wait
            assert "not retried: circuit breaker open for timeout: waited" in r.error_message
