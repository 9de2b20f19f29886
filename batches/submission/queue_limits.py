"""Per-team limits on queued work, the submission's rule: one team cannot fill the database, the claim
queries and the dashboards, whatever its budget (issue #29).

Three limits, each resolved by teams/limits.py (the team's own value, else the deployment's default):
pending items (items not finished yet across the team's unfinished batches), open batches (unfinished
batches at once), submissions per minute (batches created in the last 60 s).

``locked_refusal(team, new_items)`` runs inside the submission's transaction, after locking the team's
row, so two concurrent submissions of one team cannot both slip under a limit; over a limit the
submission service raises ``QueueLimitRefused`` (a 429 SubmissionError naming the limit, with
``retry_after``) and nothing is stored. Read from the batches' own counters (two indexed aggregates on
the team's unfinished batches and one on its last minute), so the check costs about a millisecond
however large the queue. ``usage(team)`` is the same numbers for the API and the dashboards (registered
as TeamUsage.queue_usage in batches/apps.py).
"""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Count, F, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from teams.limits import limits_of
from teams.models import Team
from teams.usage import QueueUsage

from ..models import Batch


def usage(team: Team) -> QueueUsage:
    done = F("completed_count") + F("failed_count") + F("cancelled_count") + F("expired_count")
    open_rows = Batch.objects.filter(team=team, completed_at__isnull=True).aggregate(
        batches=Count("id"), pending=Coalesce(Sum(F("total_count") - done), 0)
    )
    recent = Batch.objects.filter(team=team, created_at__gte=timezone.now() - timedelta(seconds=60)).count()
    limits = limits_of(team)
    return QueueUsage(
        pending_items=max(0, int(open_rows["pending"] or 0)),
        max_pending_items=limits.max_pending_items,
        open_batches=int(open_rows["batches"] or 0),
        max_open_batches=limits.max_open_batches,
        submissions_last_minute=recent,
        max_submissions_per_minute=limits.max_submissions_per_minute,
    )


def refusal(team: Team, new_items: int) -> tuple[str, str, int] | None:
    """(limit name, message, retry-after seconds) of the first limit this submission would exceed."""
    u = usage(team)
    if u.submissions_last_minute + 1 > u.max_submissions_per_minute:
        return (
            "submissions_per_minute",
            f"team {team.name!r} submitted {u.submissions_last_minute} batches in the last minute; "
            f"its limit is {u.max_submissions_per_minute} per minute",
            60,
        )
    if u.open_batches + 1 > u.max_open_batches:
        return (
            "open_batches",
            f"team {team.name!r} has {u.open_batches} unfinished batches; its limit is {u.max_open_batches}",
            30,
        )
    if u.pending_items + new_items > u.max_pending_items:
        return (
            "pending_items",
            f"team {team.name!r} has {u.pending_items} items not finished yet and this batch adds "
            f"{new_items}; its limit is {u.max_pending_items} pending items",
            60,
        )
    return None


def locked_refusal(team: Team, new_items: int) -> tuple[str, str, int] | None:
    """``refusal`` under the team's row lock: call inside the submission's transaction, the row stays
    locked until it commits (the submission service raises ``QueueLimitRefused`` with the answer)."""
    Team.objects.select_for_update().filter(id=team.id).values_list("id", flat=True).first()
    return refusal(team, new_items)
