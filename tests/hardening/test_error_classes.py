"""ONE error-class table (#13/#14): the engine's classifier and the dashboard's SQL, generated from
the same table, give identical classes for the same outcomes.

Pre-fix they disagreed: a timeout with status None vs a 5xx-typed row, invalid_response (engine:
'invalid_response', dashboard: 'other'), a gateway_error (engine: '4xx', dashboard: 'other')."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
from django.db.models import Count

from batches.models import BatchItem, ItemStatus
from dashboard.selectors import error_classes
from gateway_engine.retry import ERROR_CLASS_KEYS, ERROR_CLASS_TABLE, ErrorType, error_class
from gateway_engine.stats import StatsBuilder
from tests.factories import make_batch
from tests.factories import work_item as q

pytestmark = pytest.mark.django_db

TYPES = [v for k, v in vars(ErrorType).items() if k.isupper()] + ["", "not_a_known_type"]
# every status boundary of every row of the table, plus codes outside all of them
STATUSES = sorted(
    {None, 200, 302, 600}
    | {
        code
        for rule in ERROR_CLASS_TABLE
        if rule.status_range is not None
        for code in (
            rule.status_range[0] - 1,
            rule.status_range[0],
            rule.status_range[1] - 1,
            rule.status_range[1],
        )
    },
    key=lambda s: -1 if s is None else s,
)
FIXTURE = list(itertools.product(TYPES, STATUSES))


def _stored(team):
    batch = make_batch(team, [q(f"i{n}", provider="p") for n in range(len(FIXTURE))])
    rows = list(BatchItem.objects.filter(batch=batch).order_by("seq"))
    for row, (error_type, status) in zip(rows, FIXTURE, strict=True):
        row.status, row.error_type, row.error_status_code = ItemStatus.FAILED, error_type, status
    BatchItem.objects.bulk_update(rows, ["status", "error_type", "error_status_code"])
    return batch


def test_engine_and_dashboard_sql_classify_every_outcome_alike(team):
    batch = _stored(team)
    by_sql = dict(
        BatchItem.objects.filter(batch=batch)
        .annotate(klass=error_classes.error_class_expr())
        .values_list("custom_id", "klass")
    )
    by_engine = {f"i{n}": error_class(error_type, status) for n, (error_type, status) in enumerate(FIXTURE)}
    assert by_sql == by_engine
    # the fixture reaches every row of the table and 'other'
    assert set(by_engine.values()) == set(ERROR_CLASS_KEYS)

    # the per-class filter selects exactly the rows the classifier puts there (a partition)
    assert error_classes.ERROR_CLASS_KEYS == ERROR_CLASS_KEYS
    for key in ERROR_CLASS_KEYS:
        selected = set(
            BatchItem.objects.filter(error_classes.error_class_q(key), batch=batch).values_list(
                "custom_id", flat=True
            )
        )
        assert selected == {cid for cid, klass in by_engine.items() if klass == key}, key
    grouped = dict(
        BatchItem.objects.filter(batch=batch)
        .annotate(klass=error_classes.error_class_expr())
        .values("klass")
        .annotate(n=Count("id"))
        .values_list("klass", "n")
    )
    assert grouped == dict(Counter(by_engine.values()))


def test_engine_stats_count_the_classes_the_dashboard_counts(team):
    """The same outcomes as attempts of an engine run: the stats' errors_by_class (what the batch log
    shows) equals the dashboard's per-class SQL counts over the stored items."""
    batch = _stored(team)
    builder = StatsBuilder()
    for error_type, status in FIXTURE:
        attempt = {"provider": "p", "status_code": status, "error_type": error_type, "latency_ms": 1}
        builder.add_item("failed", [attempt], provider="p")
    by_class = builder.build(str(batch.pk), len(FIXTURE), 0)["providers"]["p"]["errors_by_class"]
    # an attempt with no error_type is not an error in the stats; the dashboard has no such failed row
    typed = BatchItem.objects.filter(batch=batch).exclude(error_type="")
    sql = {key: typed.filter(error_classes.error_class_q(key)).count() for key in ERROR_CLASS_KEYS}
    assert {k: v for k, v in by_class.items() if v} == {k: v for k, v in sql.items() if v}
    assert set(by_class) >= {rule.key for rule in ERROR_CLASS_TABLE}


@pytest.mark.parametrize(
    ("error_type", "status", "klass"),
    [
        (ErrorType.RATE_LIMITED, None, "429"),
        (ErrorType.CLIENT_ERROR, 429, "429"),
        (ErrorType.TIMEOUT, None, "timeout"),
        (ErrorType.TIMEOUT, 503, "timeout"),  # timeout before 5xx
        (ErrorType.SERVER_ERROR, None, "5xx"),
        (ErrorType.CONNECTION_ERROR, 502, "connection"),
        (ErrorType.INVALID_RESPONSE, 200, "invalid_response"),
        (ErrorType.INVALID_RESPONSE, None, "invalid_response"),
        (ErrorType.INVALID_RESPONSE, 502, "5xx"),
        (ErrorType.NO_PROVIDER, 503, "5xx"),
        (ErrorType.NO_PROVIDER, None, "other"),
        (ErrorType.GATEWAY_ERROR, None, "other"),  # not invalid_response
        (ErrorType.CLIENT_ERROR, None, "4xx"),
        (ErrorType.CLIENT_ERROR, 600, "4xx"),
    ],
)
def test_decided_cases(error_type, status, klass):
    assert error_class(error_type, status) == klass
