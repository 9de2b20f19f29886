"""The request log of the interactive lane: one row per ``/v1/chat/completions`` call that reached the
engine (metadata always; the prompt and the answer only for a team that opted in with
``Team.log_interactive_content``). Rows are written in bulk by ``records.CallLog`` and deleted after
GATEWAY_INTERACTIVE_LOG_RETENTION_DAYS (``retention.purge_calls``)."""

from __future__ import annotations

from django.db import models

from gateway_engine.endpoints import ENDPOINTS
from teams.models import ApiKey, Team

ENDPOINT_CHOICES = [(e, e) for e in ENDPOINTS]


class InteractiveCall(models.Model):
    call_id = models.CharField(max_length=64, unique=True, help_text="The answer's id (chatcmpl-…).")
    created_at = models.DateTimeField(db_index=True)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="interactive_calls")
    api_key = models.ForeignKey(ApiKey, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    model = models.CharField(max_length=200, help_text="What the call named: a route, else a provider.")
    route = models.CharField(max_length=100, blank=True)
    provider = models.CharField(
        max_length=64, blank=True, help_text="The provider that answered (last tried)."
    )
    stream = models.BooleanField(default=False)
    endpoint = models.CharField(
        max_length=16, choices=ENDPOINT_CHOICES, default="chat", db_default="chat",
        help_text="The surface the call came in on: chat, embeddings, responses, messages.",
    )  # fmt: skip
    status = models.CharField(max_length=20, help_text="succeeded, failed, expired (queue timeout) …")
    http_status = models.PositiveSmallIntegerField(help_text="What the gateway answered the caller.")
    error_type = models.CharField(max_length=40, blank=True)
    error_message = models.TextField(blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    latency_ms = models.PositiveIntegerField(null=True, blank=True, help_text="Request in → answer out.")
    queue_ms = models.PositiveIntegerField(null=True, blank=True, help_text="Request in → first send.")
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    cached_tokens = models.PositiveIntegerField(default=0)
    wasted_tokens = models.PositiveIntegerField(default=0, help_text="Billed for attempts not used.")
    attempt_log = models.JSONField(default=list, blank=True)
    request_body = models.JSONField(null=True, blank=True, help_text="Only for teams that opted in.")
    response_body = models.JSONField(null=True, blank=True, help_text="Only for teams that opted in.")

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["team", "-created_at"], name="icall_team_created"),
            models.Index(fields=["provider", "-created_at"], name="icall_provider_created"),
        ]

    def __str__(self) -> str:
        return f"{self.call_id} ({self.status})"
