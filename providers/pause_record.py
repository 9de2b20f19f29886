"""``ProviderPause``: the durable record of a provider pause (billing exhausted, a per-day quota).

The quota store holds the pause every grant checks (Redis: ``{prefix}q:{<provider>}:pause``); this row is
its durable copy, so a pause outlives a Redis restart or flush: every process's LimitsSource loads these
rows with the live config, holds them in its store's local view (gateway_engine/quota/pauses.py) and
writes them back into the store (docs/quota.md, "Provider pause"). Written by providers.pauses (the
engine's on_provider_paused hook), removed when an operator clears the pause.
"""

from __future__ import annotations

import datetime as dt

from django.db import models

from gateway_engine.quota.types import PauseState


class ProviderPause(models.Model):
    provider = models.OneToOneField("providers.Provider", on_delete=models.CASCADE, related_name="pause")
    reason = models.CharField(max_length=64)
    until = models.DateTimeField(null=True, blank=True, help_text="empty: until an operator clears it")
    message = models.TextField(blank=True, default="")
    since = models.DateTimeField()

    class Meta:
        app_label = "providers"

    def __str__(self) -> str:
        return f"{self.provider_id}: {self.reason}"

    def as_state(self, provider_name: str) -> PauseState:
        return PauseState(
            provider=provider_name,
            reason=self.reason,
            until_epoch=self.until.timestamp() if self.until is not None else None,
            message=self.message,
            since_epoch=self.since.timestamp(),
        )

    def expired(self, now: dt.datetime) -> bool:
        return self.until is not None and self.until <= now
