"""Shared test builders: one place for the objects many test files make.

* `work_item(...)`: an engine/REST ITEM dict (custom_id, query, params, route or provider).
* `make_batch(team, items)`: a queued Batch with its BatchItems, stored the way the submission service
  stores them, without starting it (the engine tests and the worker tests run it themselves).
* `claim(batch_id, owner)`: take a batch's pending items for ``owner`` the way a dispatcher slice does
  (``claims.claim_queued``, one provider queue at a time), for tests that store results themselves.
* `login_superuser(client)` / `login_staff(client, *codenames)`: a Django test client logged in as an
  operator (superuser) or as a staff member with only the given permissions.

Note for the scheduler rewrite: tests/engine/test_execution.py and tests/engine/test_celery_workers.py
still carry their own `q`/`make_batch`/worker helpers; import these (and tests/workers.py) instead.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from batches.execution.claims import claim_queued
from batches.models import Batch, BatchItem, ItemStatus


def work_item(cid: str, route: str | None = None, provider: str | None = None, **params) -> dict:
    """One ITEM; `route` wins over `provider` when both are given (as in the contract)."""
    out = {"custom_id": cid, "query": f"question {cid}", "params": params}
    out["route" if route else "provider"] = route or provider
    return out


def make_batch(team, items: list[dict], **fields) -> Batch:
    """Store a queued batch the way the submission service does, without starting it."""
    batch = Batch.objects.create(team=team, total_count=len(items), **fields)
    BatchItem.objects.bulk_create(
        BatchItem(
            batch=batch,
            seq=n,
            custom_id=i["custom_id"],
            route=i.get("route", ""),
            requested_provider=i.get("provider", ""),
            payload={"messages": [{"role": "user", "content": i["query"]}], "params": i.get("params", {})},
        )
        for n, i in enumerate(items)
    )
    return batch


def claim(batch_id, owner: str, limit: int | None = None) -> list[BatchItem]:
    """Claim up to ``limit`` (default: all) pending items of one batch for ``owner``, lowest seq first,
    through the dispatcher's claim (``claim_queued``) on each provider queue the batch has items in."""
    pending = BatchItem.objects.filter(batch_id=batch_id, status=ItemStatus.PENDING)
    queues = sorted(set(pending.values_list("queue_provider", flat=True)))
    taken: list[BatchItem] = []
    for provider in queues:
        want = (limit if limit is not None else 1_000_000) - len(taken)
        if want <= 0:
            break
        taken += claim_queued(provider, [str(batch_id)], want, owner)
    return sorted(taken, key=lambda item: item.seq)


def login_superuser(client, username: str = "ops"):
    user = get_user_model().objects.create_superuser(username, f"{username}@example.com", "pw-ops-123456")
    client.force_login(user)
    return client


def login_staff(client, *codenames: str, username: str = "ops"):
    """Staff (not superuser) with exactly the given permission codenames."""
    user = get_user_model().objects.create_user(
        username, f"{username}@example.com", "pw-ops-123456", is_staff=True
    )
    if codenames:
        user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    client.force_login(user)
    return client
