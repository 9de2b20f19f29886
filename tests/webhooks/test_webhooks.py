"""Webhooks in one process (issue #26): signatures checked with the `standardwebhooks` package (not the
gateway's signer), the target rules at submission (400 naming webhook_url, nothing stored) and at
delivery (a name resolving to loopback is never connected to), one event per batch end, the
webhook_secret command, the admin's and the batch page's redeliver, retention. Real PostgreSQL and a
real local receiver (tests/webhooks/receiver.py); the real-worker scenarios are in
test_webhook_workers.py."""

from __future__ import annotations

import datetime as dt
import json
import time

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import TestCase
from django.utils import timezone
from rest_framework.test import APIClient
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from batches.execution import finalize_batch_if_done
from batches.models import Batch, BatchItem, BatchStatus, ItemStatus
from batches.submission import BatchOptions, SubmissionError, batch_options, webhook_url
from observability.retention import purge_old_data
from tests.factories import login_superuser, make_batch
from webhooks import delivery, events, services, signing, worker
from webhooks.models import DeliveryAttempt, EventState, TeamWebhook, WebhookEvent

from .receiver import Receiver

pytestmark = pytest.mark.django_db

ITEM = {"custom_id": "a", "provider": "alpha", "query": "hi"}


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def signed(secrets, body=b'{"x":1}', msg_id="evt_1", ts=None):
    return signing.headers(msg_id, int(time.time()) if ts is None else ts, body, secrets), body


# --- signing (verified by the standardwebhooks package) -------------------------------------------


def test_signatures_verify_with_the_standardwebhooks_package():
    secret = signing.new_secret()
    assert secret.startswith("whsec_") and len(signing.key_of(secret)) == 32
    headers, body = signed([secret])
    assert Webhook(secret).verify(body, headers) == {"x": 1}


def test_an_old_timestamp_and_a_wrong_secret_are_rejected():
    secret = signing.new_secret()
    headers, body = signed([secret], ts=int(time.time()) - 6 * 60)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(body, headers)
    headers, body = signed([secret])
    with pytest.raises(WebhookVerificationError):
        Webhook(signing.new_secret()).verify(body, headers)


def test_during_a_rotation_both_secrets_verify_and_after_it_only_the_new_one(team):
    old = services.ensure_team_webhook(team.pk)[0].secret
    hook = services.rotate_secret(team.pk)
    now = timezone.now()
    active = signing.active_secrets(hook.secret, hook.previous_secret, hook.rotated_at, now)
    assert active == [hook.secret, old]
    headers, body = signed(active)
    assert len(headers["webhook-signature"].split(" ")) == 2
    assert Webhook(old).verify(body, headers) == {"x": 1}
    assert Webhook(hook.secret).verify(body, headers) == {"x": 1}
    later = signing.active_secrets(hook.secret, hook.previous_secret, hook.rotated_at, now + signing.OVERLAP)
    headers, body = signed(later)
    with pytest.raises(WebhookVerificationError):
        Webhook(old).verify(body, headers)


# --- targets --------------------------------------------------------------------------------------

REFUSED = [
    "https://127.0.0.1/x", "https://127.9.9.9/x", "https://10.1.2.3/x", "https://172.16.0.1/x",
    "https://192.168.1.1/x", "https://169.254.169.254/latest", "https://[fd00:ec2::254]/x", "https://[::1]/x",
    "https://0.0.0.0/x", "https://[::ffff:127.0.0.1]/x", "https://[::ffff:169.254.169.254]/x",
    "https://2130706433/x", "https://0x7f.1/x", "https://100.64.0.1/x", "http://hooks.example.com/x",
    "ftp://hooks.example.com/x", "https:///nohost", "https://user:pw@hooks.example.com/x", 42,
]  # fmt: skip


@pytest.mark.parametrize("url", REFUSED)
def test_a_private_literal_or_a_non_https_url_is_refused_naming_the_field(url):
    with pytest.raises(SubmissionError) as caught:
        batch_options(webhook_url=url, allow_private_webhooks=False)
    assert [e.field for e in caught.value.errors] == ["webhook_url"]


@pytest.mark.parametrize("url", ["https://hooks.example.com/b?x=1", "https://93.184.216.34:8443/x"])
def test_a_public_https_url_is_accepted(url):
    assert batch_options(webhook_url=url, allow_private_webhooks=False).webhook_url == url


def test_the_setting_allows_http_and_loopback():
    url = "http://127.0.0.1:9/hook"
    assert batch_options(webhook_url=url, allow_private_webhooks=True).webhook_url == url


def client_for(api_key) -> APIClient:
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key[1]}")
    return c


def test_post_with_a_loopback_webhook_url_is_a_400_naming_the_field_and_stores_nothing(
    api_key, make_provider, settings
):
    settings.GATEWAY_WEBHOOK_ALLOW_PRIVATE = False
    make_provider("alpha")
    c = client_for(api_key)
    body = {"items": [ITEM], "webhook_url": "http://127.0.0.1:8080/hook"}
    r = c.post("/api/v1/batches", body, format="json")
    assert r.status_code == 400, r.content
    assert [e["field"] for e in r.json()["errors"]] == ["webhook_url"]
    jsonl = c.post(
        "/api/v1/batches?webhook_url=https://[::ffff:10.0.0.1]/h",
        data=json.dumps(ITEM),
        content_type="application/jsonl",
    )
    assert jsonl.status_code == 400 and jsonl.json()["errors"][0]["field"] == "webhook_url"
    assert Batch.objects.count() == 0 and BatchItem.objects.count() == 0


def test_webhook_url_is_stored_from_json_and_jsonl_and_shown(api_key, make_provider, settings):
    settings.GATEWAY_WEBHOOK_ALLOW_PRIVATE = True
    make_provider("alpha")
    c = client_for(api_key)
    r = c.post("/api/v1/batches", {"items": [ITEM], "webhook_url": "http://127.0.0.1:1/h"}, format="json")
    assert r.status_code == 201, r.content
    assert r.json()["webhook_url"] == "http://127.0.0.1:1/h"
    r2 = c.post("/api/v1/batches?webhook_url=https://hooks.example.com/j", data=json.dumps(ITEM),
                content_type="application/jsonl")  # fmt: skip
    assert r2.status_code == 201, r2.content
    assert Batch.objects.get(pk=r2.json()["id"]).webhook_url == "https://hooks.example.com/j"


def test_v1_batches_take_webhook_url_through_extra_body(api_key, make_provider, settings):
    settings.GATEWAY_WEBHOOK_ALLOW_PRIVATE = False
    make_provider("alpha")
    c = client_for(api_key)
    line = {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions",
            "body": {"model": "alpha", "messages": [{"role": "user", "content": "hi"}]}}  # fmt: skip
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("in.jsonl", json.dumps(line).encode(), content_type="application/jsonl")
    f = c.post("/v1/files", {"file": upload, "purpose": "batch"}, format="multipart")
    assert f.status_code == 200, f.content
    create = {"input_file_id": f.json()["id"], "endpoint": "/v1/chat/completions", "completion_window": "24h"}
    bad = c.post("/v1/batches", {**create, "webhook_url": "https://169.254.169.254/"}, format="json")
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "webhook_url", bad.content
    assert Batch.objects.count() == 0
    ok = c.post("/v1/batches", {**create, "webhook_url": "https://hooks.example.com/v1"}, format="json")
    assert ok.status_code == 200, ok.content
    assert Batch.objects.get().webhook_url == "https://hooks.example.com/v1"


def test_a_v1_batchs_event_carries_the_batch_id_the_openai_sdk_retrieves(api_key, make_provider, settings,
                                                                         monkeypatch):  # fmt: skip
    settings.GATEWAY_WEBHOOK_ALLOW_PRIVATE = True
    monkeypatch.setattr(services, "kick", lambda: None)
    from django.core.files.uploadedfile import SimpleUploadedFile

    from sim.testing import run_simulator_in_thread

    sim = {"time_scale": 1, "providers": {"alpha": {"rpm": 100000, "tpm": 10**8, "median_ms": 2}}}
    with run_simulator_in_thread(sim) as handle:
        make_provider("alpha", base_url=handle.provider_url("alpha"), rpm=60000, tpm=10**8)
        c = client_for(api_key)
        line = {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions",
                "body": {"model": "alpha", "messages": [{"role": "user", "content": "hi"}]}}  # fmt: skip
        upload = SimpleUploadedFile("in.jsonl", json.dumps(line).encode(), content_type="application/jsonl")
        f = c.post("/v1/files", {"file": upload, "purpose": "batch"}, format="multipart")
        body = {"input_file_id": f.json()["id"], "endpoint": "/v1/chat/completions", "completion_window": "24h",
                "webhook_url": "http://127.0.0.1:1/h"}  # fmt: skip
        with TestCase.captureOnCommitCallbacks(execute=True):  # eager: the batch runs and ends on commit
            created = c.post("/v1/batches", body, format="json")
    assert created.status_code == 200, created.content
    event = WebhookEvent.objects.get()
    data_id = json.loads(event.body)["data"]["id"]
    assert data_id == created.json()["id"] and data_id.startswith("batch_")
    retrieved = c.get(f"/v1/batches/{data_id}")  # what an SDK receiver does with the event
    assert retrieved.status_code == 200 and retrieved.json()["status"] == "completed"
    native = ended_batch(Batch.objects.get().team, webhook_url="https://hooks.example.com/n")
    assert json.loads(WebhookEvent.objects.get(batch=native).body)["data"]["id"] == str(native.pk)


def test_a_name_that_resolves_to_loopback_is_never_connected_to(team, receiver, settings, monkeypatch):
    settings.GATEWAY_WEBHOOK_ALLOW_PRIVATE = False
    monkeypatch.setattr(services, "kick", lambda: None)  # the slice runs below, in this test
    batch = ended_batch(team, webhook_url=f"https://localhost:{receiver.port}/hook")
    event = WebhookEvent.objects.get(batch=batch)
    report = worker.deliver_due()
    assert report.attempted == 1 and report.delivered == 0
    event.refresh_from_db()
    assert event.state == EventState.REFUSED and event.due_at is None  # not retried
    (attempt,) = DeliveryAttempt.objects.filter(event=event)
    assert attempt.outcome == "refused" and "loopback" in attempt.error
    assert receiver.connections == 0 and receiver.requests == []


def test_every_resolved_address_is_checked_and_the_connection_goes_to_a_checked_one(receiver):
    body = b"{}"
    refused = delivery.post("https://hooks.test/h", body, {}, timeout=2, allow_private=False,
                            resolver=lambda host, port: ["93.184.216.34", "127.0.0.1"])  # fmt: skip
    assert refused.refused and "127.0.0.1" in refused.error
    # allowed: the name is resolved once, by the resolver given, and that address is connected to
    seen = []
    ok = delivery.post(f"http://rebinding.test:{receiver.port}/h", body, {"webhook-id": "evt_x"}, timeout=2,
                       allow_private=True, resolver=lambda host, port: seen.append(host) or ["127.0.0.1"])  # fmt: skip
    assert ok.delivered and ok.address == "127.0.0.1" and seen == ["rebinding.test"]
    assert receiver.requests[0].headers["host"] == f"rebinding.test:{receiver.port}"


def test_redirects_are_not_followed(settings):
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    hits = []

    class Redirect(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):  # noqa: N802
            hits.append(self.path)
            self.send_response(302)
            self.send_header("Location", "/elsewhere")
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        out = delivery.post(f"http://127.0.0.1:{server.server_address[1]}/first", b"{}", {}, timeout=2,
                            allow_private=True)  # fmt: skip
    finally:
        server.shutdown()
        server.server_close()
    assert out.status_code == 302 and not out.delivered and hits == ["/first"]


# --- one event per batch end -------------------------------------------------------------------------


def ended_batch(team, **fields) -> Batch:
    batch = make_batch(team, [{"custom_id": "a", "provider": "alpha", "query": "q"}], **fields)
    BatchItem.objects.filter(batch=batch).update(status=ItemStatus.SUCCEEDED, finished_at=timezone.now())
    with TestCase.captureOnCommitCallbacks(execute=True):  # batch_finished is sent on commit
        assert finalize_batch_if_done(str(batch.pk))
    batch.refresh_from_db()
    return batch


def test_one_event_per_batch_end_whatever_signals_again(team, settings, monkeypatch):
    kicks = []
    monkeypatch.setattr(services, "kick", lambda: kicks.append(1))
    batch = ended_batch(team, webhook_url="https://hooks.example.com/x")
    event = WebhookEvent.objects.get(batch=batch)  # created by the batch_finished receiver
    assert event.type == "batch.completed" and event.url == "https://hooks.example.com/x"
    doc = json.loads(event.body)
    assert doc == {"object": "event", "id": event.id, "type": "batch.completed",
                   "created_at": doc["created_at"], "data": {"id": str(batch.pk)}}  # fmt: skip
    again, created = events.create_event(batch)
    events.on_batch_finished(Batch, batch=batch, line={})
    assert not created and again.id == event.id and WebhookEvent.objects.count() == 1
    assert kicks == [1]
    assert TeamWebhook.objects.get(team=team).secret.startswith("whsec_")  # made for the first event


def test_the_team_default_url_is_used_and_no_url_means_no_event(team, monkeypatch):
    monkeypatch.setattr(services, "kick", lambda: None)
    ended_batch(team)
    assert WebhookEvent.objects.count() == 0
    services.set_team_url(team.pk, "https://hooks.example.com/default")
    b = ended_batch(team)
    assert WebhookEvent.objects.get(batch=b).url == "https://hooks.example.com/default"


def test_backoff_doubles_and_an_event_past_its_window_fails(team, settings, monkeypatch):
    settings.GATEWAY_WEBHOOK_RETRY_BASE_SECONDS = 5
    settings.GATEWAY_WEBHOOK_RETRY_CAP_SECONDS = 3600
    assert [worker.backoff_seconds(n) for n in (1, 2, 3, 12, 13)] == [5, 10, 20, 3600, 3600]
    monkeypatch.setattr(services, "kick", lambda: None)
    event, _ = events.create_event(ended_batch(team, webhook_url="https://hooks.example.com/x"))
    now = timezone.now()
    worker.record(event.pk, delivery.Outcome(status_code=500), now)
    event.refresh_from_db()
    assert event.state == EventState.PENDING and event.due_at > now
    WebhookEvent.objects.filter(pk=event.pk).update(give_up_at=now)
    worker.record(event.pk, delivery.Outcome(error="timeout"), now)
    event.refresh_from_db()
    assert event.state == EventState.FAILED and event.due_at is None and event.attempts == 2


# --- the command, the admin, the batch page, retention ---------------------------------------------


def run_command(*args) -> list[str]:
    from io import StringIO

    out = StringIO()
    call_command("webhook_secret", *args, stdout=out, stderr=StringIO())
    return out.getvalue().strip().splitlines()


def test_webhook_secret_command_creates_prints_rotates_and_sets_the_url(team, settings):
    settings.GATEWAY_WEBHOOK_ALLOW_PRIVATE = False
    first = run_command("--team", team.name)[-1]
    assert first.startswith("whsec_") and len(signing.key_of(first)) == 32
    assert run_command("--team", team.name)[-1] == first
    rotated = run_command("--team", team.name, "--rotate")[-1]
    hook = TeamWebhook.objects.get(team=team)
    assert rotated != first and hook.secret == rotated and hook.previous_secret == first
    run_command("--team", team.name, "--url", "https://hooks.example.com/t")
    assert TeamWebhook.objects.get(team=team).url == "https://hooks.example.com/t"
    with pytest.raises(CommandError, match="webhook_url"):
        run_command("--team", team.name, "--url", "http://127.0.0.1/x")
    with pytest.raises(CommandError, match="--team"):
        run_command("--team", "nobody")


def test_admin_and_batch_page_show_the_attempts_and_redeliver(team, client, monkeypatch):
    kicks = []
    monkeypatch.setattr(services, "kick", lambda: kicks.append(1))
    batch = ended_batch(team, webhook_url="https://hooks.example.com/x")
    event = WebhookEvent.objects.get(batch=batch)
    kicks.clear()
    worker.record(event.pk, delivery.Outcome(status_code=503, latency_ms=12), timezone.now())
    worker.record(event.pk, delivery.Outcome(status_code=200, latency_ms=7), timezone.now())
    login_superuser(client)
    page = client.get(f"/dashboard/batches/{batch.pk}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert event.id in html and "503" in html and "delivered" in html
    admin_page = client.get(f"/admin/webhooks/webhookevent/{event.pk}/change/")
    assert admin_page.status_code == 200 and "503" in admin_page.content.decode()
    r = client.post(f"/dashboard/batches/{batch.pk}/webhook/redeliver")
    assert r.status_code == 302
    event.refresh_from_db()
    assert event.state == EventState.PENDING and event.due_at is not None and kicks == [1]
    r = client.post("/admin/webhooks/webhookevent/", {"action": "redeliver", "_selected_action": [event.pk]})
    assert r.status_code == 302 and kicks == [1, 1]


def test_purge_old_data_deletes_old_finished_delivery_logs(team, monkeypatch):
    monkeypatch.setattr(services, "kick", lambda: None)
    event, _ = events.create_event(ended_batch(team, webhook_url="https://hooks.example.com/x"))
    worker.record(event.pk, delivery.Outcome(status_code=200), timezone.now())
    pending, _ = events.create_event(ended_batch(team, webhook_url="https://hooks.example.com/y"))
    WebhookEvent.objects.update(created_at=timezone.now() - dt.timedelta(days=40))
    report = purge_old_data(30)
    assert report.purged["webhook_deliveries"] == 1
    assert list(WebhookEvent.objects.values_list("pk", flat=True)) == [pending.pk]
    assert DeliveryAttempt.objects.count() == 0


def test_the_event_type_follows_the_batch_status(team, monkeypatch):
    monkeypatch.setattr(services, "kick", lambda: None)
    for status in (BatchStatus.FAILED, BatchStatus.EXPIRED, BatchStatus.CANCELLED):
        b = make_batch(
            team, [ITEM], status=status, completed_at=timezone.now(), webhook_url="https://h.example/x"
        )
        event, created = events.create_event(b)
        assert created and event.type == f"batch.{status}"
    queued = make_batch(team, [ITEM], webhook_url="https://h.example/x")
    assert events.create_event(queued) == (None, False)


def test_batch_options_default_has_no_webhook():
    assert BatchOptions().webhook_url == "" and webhook_url.FIELD == "webhook_url"


def test_the_sweep_makes_the_event_a_dead_process_never_wrote_and_only_that(team, monkeypatch):
    from webhooks import sweep

    kicks = []
    monkeypatch.setattr(services, "kick", lambda: kicks.append(1))
    ended = timezone.now() - dt.timedelta(minutes=2)
    lost = make_batch(
        team, [ITEM], status=BatchStatus.COMPLETED, completed_at=ended, webhook_url="https://h.example/x"
    )
    make_batch(team, [ITEM], status=BatchStatus.COMPLETED, completed_at=ended)  # no webhook: no event
    just_now = make_batch(
        team,
        [ITEM],
        status=BatchStatus.COMPLETED,
        completed_at=timezone.now(),
        webhook_url="https://h.example/x",
    )  # fmt: skip  (the receiver's own insert is due)
    assert sweep.sweep() == 1
    assert list(WebhookEvent.objects.values_list("batch_id", flat=True)) == [lost.pk]
    assert sweep.sweep() == 0 and kicks == [1]  # idempotent: nothing made twice
    assert not WebhookEvent.objects.filter(batch=just_now).exists()


def test_the_admin_sets_a_team_default_url_with_the_same_rule_and_makes_a_secret(team, client, settings):
    settings.GATEWAY_WEBHOOK_ALLOW_PRIVATE = False
    login_superuser(client)
    bad = client.post("/admin/webhooks/teamwebhook/add/", {"team": team.pk, "url": "https://10.0.0.5/x"})
    assert bad.status_code == 200 and "webhook_url" in bad.content.decode()
    assert not TeamWebhook.objects.exists()
    ok = client.post(
        "/admin/webhooks/teamwebhook/add/", {"team": team.pk, "url": "https://hooks.example.com/t"}
    )
    assert ok.status_code == 302, ok.content.decode()[:2000]
    hook = TeamWebhook.objects.get(team=team)
    assert hook.url == "https://hooks.example.com/t" and hook.secret.startswith("whsec_")
