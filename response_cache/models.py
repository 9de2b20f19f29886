"""What the cache stores: answers by key (CacheEntry) and the leaders of identical items in flight
(InFlight). PostgreSQL, not Redis: the size bound is the gateway's own eviction (oldest first), never
Redis ``maxmemory`` (which would evict bucket and lease keys)."""

from __future__ import annotations

from django.db import models

from teams.models import Team


class CacheEntry(models.Model):
    key = models.CharField(max_length=64, unique=True, help_text="SHA-256 (response_cache.keys).")
    team = models.ForeignKey(
        Team,
        on_delete=models.CASCADE,
        related_name="+",
        null=True,
        help_text="The team whose call stored it.",
    )
    provider = models.CharField(max_length=64, help_text="The provider that gave the answer.")
    # the RESULT parts of the answer: response, native_response, usage (response_cache.services.ANSWER_FIELDS)
    answer = models.JSONField()
    bytes = models.PositiveBigIntegerField(help_text="Size of the stored answer (counts against the bound).")
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()

    class Meta:
        verbose_name_plural = "cache entries"
        indexes = [
            models.Index(fields=["created_at", "id"], name="cacheentry_eviction"),
            models.Index(fields=["expires_at"], name="cacheentry_expiry"),
            models.Index(fields=["team", "created_at"], name="cacheentry_team"),
        ]

    def __str__(self) -> str:
        return f"{self.provider} {self.key[:12]}"


class InFlight(models.Model):
    """One leader per dedup key: the claim owner sending it, until ``expires_at`` (renewed while it runs;
    a crashed leader's row expires and another item takes the lead)."""

    key = models.CharField(max_length=64, primary_key=True)
    owner = models.CharField(max_length=64)
    expires_at = models.DateTimeField()

    class Meta:
        verbose_name_plural = "in-flight leaders"
        indexes = [models.Index(fields=["owner"], name="inflight_owner")]

    def __str__(self) -> str:
        return f"{self.key[:12]} led by {self.owner}"
