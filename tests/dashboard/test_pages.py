"""What the pages show: filters, grouped failure counts, batch log, usage audit and CSV."""

from __future__ import annotations

import csv
import datetime as dt
import io

import pytest
from django.urls import reverse
from django.utils import timezone

from batches.models import BatchItem, ItemStatus
from dashboard.selectors import batch_detail, error_classes
from gateway_engine.retry import ErrorType, error_class


def test_batch_history_rows_and_filters(staff_client, seeded):
    url = reverse("dashboard:batches")
    rows = staff_client.get(url).context["rows"]
    assert len(rows) == 5
    completed = next(r for r in rows if r.batch.pk == seeded.completed.pk)
    assert completed.total == 50 and completed.failed == 7
    assert round(completed.success_rate, 1) == round(100 * 43 / 50, 1)
    assert completed.duration == dt.timedelta(milliseconds=420_000)
    assert completed.providers == ["alpha", "beta", "local"]

    acme = seeded.teams["acme"].pk
    rows = staff_client.get(url, {"team": acme}).context["rows"]
    assert {r.batch.team.name for r in rows} == {"acme"}
    rows = staff_client.get(url, {"status": "running"}).context["rows"]
    assert [r.batch.pk for r in rows] == [seeded.running.pk]
    tomorrow = (timezone.now() + dt.timedelta(days=1)).date().isoformat()
    assert staff_client.get(url, {"date_from": tomorrow}).context["rows"] == []
    today = timezone.now().date().isoformat()
    assert len(staff_client.get(url, {"date_from": today, "date_to": today}).context["rows"]) == 5


def test_invalid_filter_names_the_field_and_shows_nothing(staff_client, seeded):
    response = staff_client.get(
        reverse("dashboard:batches"), {"status": "exploded", "date_from": "yesterday"}
    )
    assert response.status_code == 200
    assert response.context["rows"] == []
    assert "status" in response.context["form"].errors and "date_from" in response.context["form"].errors
    assert b"status:" in response.content

    response = staff_client.get(reverse("dashboard:failures"), {"status_code": "99", "window": "all"})
    assert "status_code" in response.context["form"].errors
    assert response.context["page"].paginator.count == 0


def test_batch_detail_log_table_and_failed_items(staff_client, seeded):
    response = staff_client.get(reverse("dashboard:batch_detail", args=[seeded.completed.pk]))
    rows = {r.provider: r for r in response.context["providers"]}
    assert set(rows) == {"alpha", "beta", "local"}
    assert rows["beta"].attempts == 15 and rows["beta"].rate_limited_count == 3
    assert rows["alpha"].failed_by_class["5xx"] == 2 and rows["alpha"].failed_by_class["other"] == 1
    # the seed's stats have no errors_by_class: the table falls back to failed items by class
    assert rows["alpha"].errors_are_attempt_level is False
    assert rows["alpha"].shown_errors == rows["alpha"].failed_by_class
    failures_link = f"?batch={seeded.completed.pk}&amp;provider=alpha&amp;window=all"
    assert failures_link.encode() in response.content
    # tokens and retry_extra_tokens summed from the items per provider
    ok_alpha = BatchItem.objects.filter(batch=seeded.completed, provider="alpha", status=ItemStatus.SUCCEEDED)
    assert rows["alpha"].prompt_tokens == 20 * ok_alpha.count()
    failed = list(response.context["page"].object_list)
    assert [i.seq for i in failed] == list(range(7))
    detail_url = reverse("dashboard:item_detail", args=[failed[0].pk])
    assert detail_url.encode() in response.content
    assert b'http-equiv="refresh"' not in response.content  # finished → no auto-refresh
    # HTML in provider messages is escaped
    assert b"<script>alert(1)</script>" not in response.content


def test_running_batch_auto_refreshes_and_shows_in_flight(staff_client, seeded):
    response = staff_client.get(reverse("dashboard:batch_detail", args=[seeded.running.pk]))
    assert b'http-equiv="refresh"' in response.content
    assert response.context["status_counts"]["running"] == 15
    assert response.context["has_stats"] is False


def test_item_detail_shows_request_response_and_attempts(staff_client, seeded):
    ok = BatchItem.objects.get(batch=seeded.completed, seq=10)
    response = staff_client.get(reverse("dashboard:item_detail", args=[ok.pk]))
    assert b"question 10" in response.content and b"answer 10" in response.content
    response = staff_client.get(reverse("dashboard:item_detail", args=[seeded.failed_item.pk]))
    assert response.context["error_class"] == "4xx"
    assert len(response.context["attempts"]) == 3
    assert b"max_tokens too large" in response.content


def test_failure_groups_by_provider_and_class(staff_client, seeded):
    response = staff_client.get(reverse("dashboard:failures"), {"window": "all"})
    groups = response.context["groups"]
    keys = [k for k, _ in groups.classes]
    by = {row["provider"]: dict(zip(keys, row["counts"], strict=True)) for row in groups.rows}
    # completed batch: 7 listed failures; running batch: the first two (alpha 503, alpha 502)
    assert by["alpha"]["5xx"] == 4 and by["alpha"]["other"] == 1
    assert by["beta"] == {
        "quota_exhausted": 0,  # the two classes #21 put first in the table
        "overloaded": 0,
        "4xx": 1,
        "429": 1,
        "5xx": 0,
        "timeout": 0,
        "connection": 0,
        "invalid_response": 0,
        "other": 0,
    }
    assert by["local"]["timeout"] == 1 and by["local"]["connection"] == 1
    assert groups.total == 9 == response.context["page"].paginator.count
    codes = dict(groups.status_codes)
    assert codes[503] == 2 and codes[None] == 3


def test_failures_filters(staff_client, seeded):
    url = reverse("dashboard:failures")

    def count(**params):
        return staff_client.get(url, {"window": "all", **params}).context["page"].paginator.count

    assert count(provider="alpha") == 5
    assert count(error_class="5xx") == 4
    assert count(error_class="429") == 1
    assert count(error_class="other") == 1
    assert count(status_code=503) == 2
    assert count(team=seeded.teams["globex"].pk) == 2
    assert count(provider="beta", error_class="4xx") == 1
    assert count(batch=str(seeded.running.pk)) == 2
    assert count(batch=str(seeded.completed.pk), provider="local") == 2
    # time: move one failure far into the past; the default 24 h window no longer sees it
    BatchItem.objects.filter(pk=seeded.failed_item.pk).update(
        finished_at=timezone.now() - dt.timedelta(days=3)
    )
    assert staff_client.get(url).context["page"].paginator.count == 8
    assert count() == 9
    day = (timezone.now() - dt.timedelta(days=3)).date().isoformat()
    assert count(date_from=day, date_to=day) == 1


def test_error_class_python_and_sql_agree(seeded):
    for item in BatchItem.objects.filter(status=ItemStatus.FAILED):
        klass = error_class(item.error_type, item.error_status_code)
        assert BatchItem.objects.filter(error_classes.error_class_q(klass), pk=item.pk).exists(), (
            item.error_type
        )
    assert error_class(ErrorType.SERVER_ERROR, None) == "5xx"


def test_usage_audit_totals_and_csv(staff_client, seeded):
    today = timezone.now().date()
    start = today - dt.timedelta(days=2)
    params = {"date_from": start.isoformat(), "date_to": today.isoformat(), "team": seeded.teams["acme"].pk}
    response = staff_client.get(reverse("dashboard:usage"), params)
    ctx = response.context
    # 3 days × 3 providers for one team; prompt = 20000 + 1000 d + 500 k
    expected_prompt = sum(20_000 + 1000 * d + 500 * k for d in range(3) for k in range(3))
    assert ctx["totals"]["prompt"] == expected_prompt
    assert len(ctx["by_team_day"]) == 3 and len(ctx["by_team_provider"]) == 3
    assert {r["team__name"] for r in ctx["by_team_provider"]} == {"acme"}
    assert str(ctx["chart"]).startswith("<svg")

    csv_response = staff_client.get(reverse("dashboard:usage_csv"), params)
    assert csv_response["Content-Type"].startswith("text/csv")
    assert "attachment" in csv_response["Content-Disposition"]
    text = b"".join(csv_response.streaming_content).decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == 9
    assert sum(int(r["prompt_tokens"]) for r in rows) == expected_prompt
    assert all(int(r["total_tokens"]) == int(r["prompt_tokens"]) + int(r["completion_tokens"]) for r in rows)


def test_usage_default_range_and_bad_range(staff_client, seeded):
    ctx = staff_client.get(reverse("dashboard:usage")).context
    assert (ctx["date_to"] - ctx["date_from"]).days == 13
    response = staff_client.get(
        reverse("dashboard:usage_csv"), {"date_from": "2026-02-10", "date_to": "2026-01-01"}
    )
    assert response.status_code == 400
    assert b"date_" in response.content


def test_batch_log_prefers_the_engines_attempt_level_stats(staff_client, seeded):
    """Stats as gateway_engine/stats.py writes them: errors_by_class and tokens per provider."""
    batch = seeded.completed
    batch.stats["providers"]["alpha"].update(
        errors_by_class={"4xx": 0, "5xx": 5, "429": 2, "timeout": 1, "connection": 0, "invalid_response": 3},
        prompt_tokens=111,
        completion_tokens=222,
        retry_extra_tokens=333,
    )
    batch.save(update_fields=["stats"])
    response = staff_client.get(reverse("dashboard:batch_detail", args=[batch.pk]))
    alpha = {r.provider: r for r in response.context["providers"]}["alpha"]
    assert alpha.errors_are_attempt_level
    # stats stored before the table gained quota_exhausted / overloaded show those classes at 0
    assert alpha.shown_errors == {
        "quota_exhausted": 0, "overloaded": 0,
        "4xx": 0, "429": 2, "5xx": 5, "timeout": 1, "connection": 0, "invalid_response": 3, "other": 0
    }  # fmt: skip
    assert (alpha.prompt_tokens, alpha.completion_tokens, alpha.retry_extra_tokens) == (111, 222, 333)
    assert alpha.items_failed == 3  # items still counted live from the rows


def test_batch_log_reads_stats_exactly_as_the_engine_builds_them(staff_client, seeded):
    stats_mod = pytest.importorskip("gateway_engine.stats")
    batch = seeded.completed
    builder = stats_mod.StatsBuilder()
    for item in BatchItem.objects.filter(batch=batch):
        builder.add_item(
            item.status,
            item.attempt_log,
            provider=item.provider,
            prompt_tokens=item.prompt_tokens,
            completion_tokens=item.completion_tokens,
        )
    batch.stats = builder.build(str(batch.pk), batch.total_count, 420_000)
    batch.save(update_fields=["stats"])
    response = staff_client.get(reverse("dashboard:batch_detail", args=[batch.pk]))
    rows = {r.provider: r for r in response.context["providers"]}
    for name, entry in batch.stats["providers"].items():
        row = rows[name]
        assert row.shown_attempts == entry["request_count"]
        assert row.p95_latency_ms == entry["p95_latency_ms"]
        assert row.retry_count == entry["retry_count"]
        assert row.retry_extra_tokens == entry["retry_extra_tokens"]
        assert sum(row.shown_errors.values()) == entry["error_count"]
    assert rows["beta"].shown_errors["4xx"] == 3  # three 400 attempts on the seed's failed beta item
    assert rows["beta"].shown_errors["429"] == 3


def test_progress_over_time_counts_finished_items(staff_client, seeded):
    response = staff_client.get(reverse("dashboard:batch_detail", args=[seeded.running.pk]))
    unit, buckets = batch_detail.progress_over_time(seeded.running)
    assert unit == "minute"
    assert sum(ok for _, ok, _ in buckets) == 23 and sum(f for _, _, f in buckets) == 2
    assert "Items finished per minute" in str(response.context["progress_chart"])


def test_csv_neutralizes_spreadsheet_formulas(staff_client, seeded):
    from batches.models import TeamUsageDaily
    from teams.models import Team

    evil = Team.objects.create(name="=HYPERLINK(1)")
    TeamUsageDaily.objects.create(team=evil, provider="alpha", day=timezone.now().date(), prompt_tokens=5)
    response = staff_client.get(reverse("dashboard:usage_csv"), {"team": evil.pk})
    text = b"".join(response.streaming_content).decode()
    assert "'=HYPERLINK(1)" in text
    assert "\n=HYPERLINK" not in text and ",=HYPERLINK" not in text
