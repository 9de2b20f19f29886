"""Batch lifecycle events: one log line and the metrics that go with them.

Receivers of ``batches.signals`` (connected in observability.apps): ``batch_started`` when a batch turns
running, ``batch_finished`` after the finalizing transaction commits.
"""

from __future__ import annotations

import json
import logging

from . import metrics

log = logging.getLogger("batches.batchlog")  # the batch report line (its message is the report's JSON)
lifecycle = logging.getLogger("batches.lifecycle")


def _team_name(team_id) -> str:
    from teams.models import Team

    return Team.objects.filter(id=team_id).values_list("name", flat=True).first() or ""


def batch_started(batch) -> None:
    lifecycle.info(
        "batch started",
        extra={
            "event": "batch_started",
            "batch_id": str(batch.id),
            "team": _team_name(batch.team_id),
            "items": batch.total_count,
            "priority": batch.priority,
        },
    )


def batch_finished(batch, line: dict) -> None:
    """``line`` is the batch report ({"event", "status", "team_id", **stats}); the message stays that JSON."""
    if batch.started_at and batch.completed_at:
        metrics.batch_duration.observe(max(0.0, (batch.completed_at - batch.started_at).total_seconds()))
    log.info(
        json.dumps(line, sort_keys=True),
        extra={
            "event": "batch_finished",
            "batch_id": str(batch.id),
            "team": _team_name(batch.team_id),
            "status": batch.status,
            "succeeded": line.get("success_count"),
            "failed": line.get("failed_count"),
        },
    )


def on_batch_started(sender, batch, **kwargs) -> None:
    batch_started(batch)


def on_batch_finished(sender, batch, line: dict, **kwargs) -> None:
    batch_finished(batch, line)
