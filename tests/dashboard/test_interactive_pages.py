"""The interactive lane beside the batches on the staff pages: the providers page's recent interactive
calls per provider, the failures browser's failed interactive calls (with the provider / team filters)."""

from __future__ import annotations

from django.utils import timezone

from interactive.models import InteractiveCall
from providers.models import Provider


def call(team, call_id, provider, status="succeeded", **kw) -> InteractiveCall:
    values = dict(created_at=timezone.now(), team=team, model="chat", provider=provider, status=status,
                  http_status=200 if status == "succeeded" else 429, latency_ms=40, queue_ms=5)  # fmt: skip
    values.update(kw)
    return InteractiveCall.objects.create(call_id=call_id, **values)


def test_the_pages_show_interactive_traffic_beside_batches(staff_client, seeded, team, other_team):
    name = Provider.objects.order_by("name").first().name
    call(team, "chatcmpl-ok-1", name)
    call(team, "chatcmpl-ok-2", name, stream=True)
    call(team, "chatcmpl-timeout-1", "", status="expired", error_type="expired",
         error_message="no quota for this call within the 0.1 s it may wait")  # fmt: skip
    call(
        other_team, "chatcmpl-fail-globex", name, status="failed", error_type="server_error", http_status=502
    )
    page = staff_client.get("/dashboard/providers/").content.decode()
    assert "Interactive 5 min" in page
    assert "3 calls (1 streamed)" in page and "33.3 % failed" in page  # both teams' calls at that provider
    failures = staff_client.get("/dashboard/failures/").content.decode()
    assert "Failed interactive calls" in failures
    assert "chatcmpl-timeout-1"[:20] in failures and "chatcmpl-fail-globex"[:20] in failures
    assert "chatcmpl-ok-1"[:13] not in failures
    only_acme = staff_client.get(f"/dashboard/failures/?team={team.pk}").content.decode()
    assert "chatcmpl-timeout-1"[:20] in only_acme and "chatcmpl-fail-globex"[:20] not in only_acme
