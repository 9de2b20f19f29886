"""The submission service: ties parsing, options, validation, the budget and queue-limit checks and
storage into one transaction per batch, and queues the batch once it has committed.

This is the only module of the package that reads the database for validation: it builds the
``KnownTargets`` the pure validator needs and the routing table storage queues items by.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from django.db import transaction
from django.utils import timezone

from gateway_engine.routing import RoutingTable
from providers.adapters import routing_table_from_models
from providers.models import Provider, RoutingRule
from teams.models import ApiKey, Team

from ..models import Batch, BatchStatus
from ..steps import Step
from . import budget, enqueue, queue_limits
from .caps import Limits
from .errors import BudgetRefused, QueueLimitRefused, SubmissionError
from .fanout import check_copies, check_targets, fan_out, targets_query
from .idempotency import Idempotency
from .metadata import metadata_errors
from .options import BatchOptions, batch_options
from .parsing import parse_body
from .pipeline_items import pipeline_items, step_payloads
from .provider_batch import check_provider_batch
from .reach import Reach
from .steps import check_steps, real_time_only, steps_query
from .storage import insert_items
from .targets import KnownTargets
from .validation import ValidItem, check_items


def load_targets() -> tuple[KnownTargets, RoutingTable]:
    """What an item may name now, as stored, with the providers each name reaches (their kinds check
    the params), and the routing table storage queues the items by: two queries per submission,
    whatever its size (nothing is read per item)."""
    providers = list(Provider.objects.all())
    table = routing_table_from_models(providers, RoutingRule.objects.select_related("provider"))
    enabled = {p.name: bool(p.enabled) for p in providers}
    reach = Reach.of(table, enabled)
    return KnownTargets(routes=frozenset(reach.routes), providers=enabled, reach=reach), table


def known_targets() -> KnownTargets:
    """The routes and providers an item may name now (``load_targets`` without the table)."""
    return load_targets()[0]


def validate_items(
    items: Sequence[Any],
    item_sizes: Sequence[int] | None = None,
    limits: Limits | None = None,
    item_lines: Sequence[int] | None = None,
    targets: KnownTargets | None = None,
    steps: tuple[Step, ...] = (),
    fan: tuple[str, ...] = (),
) -> list[ValidItem]:
    """Validate every item against the routes and providers stored now (``validation.check_items``),
    or ``targets``; raise SubmissionError(400) listing the first 100 problems, or return all. With
    ``steps`` the items are returned at their first step (``pipeline_items``); with ``fan`` (the
    batch's ``targets`` option) one copy per item and target (``fanout.fan_out``)."""
    targets = targets or known_targets()
    limits = limits or Limits.from_settings()
    if fan:
        check_copies(len(items), fan, limits)
    valid = check_items(items, targets, limits, item_sizes, item_lines, target_optional=bool(steps or fan))
    if fan:
        return fan_out(items, valid, fan, targets)
    return pipeline_items(items, valid, steps, targets) if steps else valid


def submit_batch(
    *,
    team: Team,
    items: Sequence[Any],
    metadata: dict[str, Any] | None = None,
    api_key: ApiKey | None = None,
    item_sizes: Sequence[int] | None = None,
    options: BatchOptions | None = None,
    idempotency: Idempotency | None = None,
    item_lines: Sequence[int] | None = None,
    steps: Any = None,
    targets: Any = None,
) -> Batch:
    """Validate `items` and store a queued batch with its items in one transaction. ``steps``: the
    pipeline as sent (docs/contract.md §4; its items always go in real time); ``targets``: an
    evaluation's targets as sent (every item fanned out to each, batches.submission.fanout).

    Raises SubmissionError (nothing stored) when any item or the metadata is invalid. After commit,
    `batches.tasks.start_batch.delay(batch_id)` is called. With ``idempotency`` the batch row carries
    its key and request hash (see ``submit_idempotent``); a concurrent twin raises IntegrityError.
    """
    metadata = {} if metadata is None else metadata
    problems = metadata_errors(metadata)
    if problems:
        raise SubmissionError(400, problems)
    options = options or BatchOptions()
    known, table = load_targets()
    fan = check_targets(targets, known, with_steps=steps is not None)
    pipeline = check_steps(steps, known)
    valid = validate_items(items, item_sizes, item_lines=item_lines, targets=known, steps=pipeline, fan=fan)
    if pipeline:  # every step after the first is sent when the one before it ends: real time only
        options = dataclasses.replace(options, provider_batch=real_time_only(options.provider_batch))
    check_provider_batch(options, valid, known.reach)
    check_budget(team, valid, pipeline)
    with transaction.atomic():
        refused = queue_limits.locked_refusal(team, len(valid))  # the team's row locked until commit
        if refused is not None:
            raise QueueLimitRefused(*refused)
        now = timezone.now()
        batch = Batch.objects.create(
            team=team,
            api_key=api_key,
            status=BatchStatus.QUEUED,
            metadata=metadata,
            total_count=len(valid),
            priority=options.priority,
            completion_window=options.completion_window,
            webhook_url=options.webhook_url,
            expires_at=now + options.window if options.window else None,
            cache=options.cache,
            provider_batch=options.provider_batch,
            steps=[step.as_dict() for step in pipeline],
            targets=list(fan),
            idempotency_key=idempotency.key if idempotency else "",
            request_hash=idempotency.request_hash if idempotency else "",
        )
        insert_items(batch, valid, table, options)
        batch_id = str(batch.id)
        transaction.on_commit(lambda: enqueue.enqueue_start(batch_id))
    return batch


def check_budget(team: Team, valid: Sequence[ValidItem], steps: tuple[Step, ...] = ()) -> None:
    """Raise BudgetRefused (429, nothing stored) if the batch's estimated tokens exceed the team's
    remaining daily or monthly budget (a pipeline: every step of every item, ``step_payloads``)."""
    payloads = step_payloads(valid, steps) if steps else (v.payload for v in valid)
    refusal = budget.budget_refusal(team, budget.estimate_payload_tokens(payloads))
    if refusal is not None:
        raise BudgetRefused(refusal)


def submit_body(
    *,
    team: Team,
    body: bytes,
    content_type: str | None,
    api_key: ApiKey | None = None,
    query: Mapping[str, str] | None = None,
    idempotency: Idempotency | None = None,
) -> Batch:
    """Parse a raw request body (JSON or JSONL) and submit it. Raises SubmissionError.

    Batch options come from the JSON body's top level, or from ``query`` (the request's query
    parameters) for a JSONL body."""
    parsed = parse_body(body, content_type)  # containers bounded before parsing; GC stays on
    if parsed.item_sizes is not None:  # JSONL: options travel as query parameters
        query = query or {}
        parsed.priority, parsed.completion_window = query.get("priority"), query.get("completion_window")
        parsed.webhook_url = query.get("webhook_url")
        parsed.cache = query.get("cache")
        parsed.provider_batch = query.get("provider_batch")
        parsed.steps = steps_query(query.get("steps"))
        parsed.targets = targets_query(query.get("targets"))
    options = batch_options(
        parsed.priority,
        parsed.completion_window,
        cache=parsed.cache,
        webhook_url=parsed.webhook_url,
        provider_batch=parsed.provider_batch,
    )
    return submit_batch(
        team=team,
        items=parsed.items,
        metadata=parsed.metadata,
        api_key=api_key,
        item_sizes=parsed.item_sizes,
        options=options,
        idempotency=idempotency,
        item_lines=parsed.item_lines,
        steps=parsed.steps,
        targets=parsed.targets,
    )
