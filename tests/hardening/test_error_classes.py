"""ONE error-class table (#13/#14): the engine's classifier and the dashboard's SQL, generated from
the same table, give identical classes for the same outcomes.

Pre-fix they disagreed: a timeout with status None vs a 5xx-typed row, invalid_response (engine:
'invalid_response', dashboard: 'other'), a gateway_error (engine: '4xx', dashboard: 'other')."""

from __future__ import annotations

import itertools

import pytest
from django.db.models import Count

from batches.models import BatchItem, ItemStatus
from dashboard import selectors
from gateway_engine.retry import ErrorType, error_class
from tests.factories import make_batch
from tests.factories import work_item as q

pytestmark = pytest.mark.django_db

TYPES = [v for k, v in vars(ErrorType).items() if k.isupper()]
STATUSES = [None, 200, 400, 404, 429, 499, 500, 503, 599]
FIXTURE = list(itertools.product(TYPES, STATUSES))


def test_engine_and_dashboard_sql_classify_every_outcome_alike(team):
    from gateway_engine.retry import ERROR_CLASS_KEYS

    batch = make_batch(team, [q(f"i{n}", provider="p") for n in range(len(FIXTURE))])
    rows = list(BatchItem.objects.filter(batch=batch).order_by("seq"))
    for row, (error_type, status) in zip(rows, FIXTURE, strict=True):
        row.status, row.error_type, row.error_status_code = ItemStatus.FAILED, error_type, status
    BatchItem.objects.bulk_update(rows, ["status", "error_type", "error_status_code"])

    by_sql = dict(
        BatchItem.objects.filter(batch=batch)
        .annotate(klass=selectors._error_class_expr())
        .values_list("custom_id", "klass")
    )
    for n, (error_type, status) in enumerate(FIXTURE):
        engine = error_class(error_type, status)
        assert by_sql[f"i{n}"] == engine, (error_type, status)
        assert selectors.error_class_of(error_type, status) == engine
        # the per-class filter selects exactly the rows the classifier puts there
        assert BatchItem.objects.filter(
            selectors.error_class_q(engine), custom_id=f"i{n}", batch=batch
        ).exists()

    # every class key is a dashboard column; the filter partitions the rows
    assert selectors.ERROR_CLASS_KEYS == list(ERROR_CLASS_KEYS)
    counts = [
        BatchItem.objects.filter(selectors.error_class_q(k), batch=batch).count() for k in ERROR_CLASS_KEYS
    ]
    assert sum(counts) == len(FIXTURE)
    grouped = dict(
        BatchItem.objects.filter(batch=batch)
        .annotate(klass=selectors._error_class_expr())
        .values("klass")
        .annotate(n=Count("id"))
        .values_list("klass", "n")
    )
    assert grouped == {k: c for k, c in zip(ERROR_CLASS_KEYS, counts, strict=True) if c}


@pytest.mark.parametrize(
    ("error_type", "status", "klass"),
    [
        (ErrorType.RATE_LIMITED, None, "429"),
        (ErrorType.CLIENT_ERROR, 429, "429"),
        (ErrorType.TIMEOUT, None, "timeout"),
        (ErrorType.SERVER_ERROR, None, "5xx"),
        (ErrorType.INVALID_RESPONSE, 200, "invalid_response"),
        (ErrorType.INVALID_RESPONSE, 502, "5xx"),
        (ErrorType.NO_PROVIDER, 503, "5xx"),
        (ErrorType.NO_PROVIDER, None, "other"),
        (ErrorType.GATEWAY_ERROR, None, "other"),
        (ErrorType.CLIENT_ERROR, None, "4xx"),
    ],
)
def test_decided_cases(error_type, status, klass):
    assert error_class(error_type, status) == klass
