"""Explicit input and output serializers of the REST API (docs/contract.md §4).

Input: the submission body is validated by batches.submission (hand-written: a DRF serializer is
~3x slower per item, see docs/benchmarks.md); ItemSerializer/BatchCreateSerializer describe it in
the OpenAPI schema. Query parameters are validated by the *QuerySerializer classes below.
Output: BatchSerializer renders the batch object; RESULTs are built by batches.selectors
(result_from_row, fast enough to stream 100k rows) and described by ResultSerializer (the results
endpoint's serializers: batches.api.result_serializers).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from batches.models import Batch, BatchPriority, BatchStatus, ItemStatus
from batches.submission import MAX_CUSTOM_ID_CHARS, MAX_NAME_CHARS, ROLES
from gateway_engine.wire.openai import RESERVED_PARAMS

# --- errors ---------------------------------------------------------------------------------------


class FieldErrorSerializer(serializers.Serializer):
    index = serializers.IntegerField(
        allow_null=True, help_text="0-based position of the item; null for body- or query-level errors."
    )
    field = serializers.CharField(
        help_text="Field at fault, e.g. 'custom_id', 'messages[0].role', 'params', 'items', 'body', 'status'."
    )
    message = serializers.CharField(help_text="What is wrong and what is expected.")
    line = serializers.IntegerField(
        required=False,
        help_text="JSONL bodies: the 1-based line the item is on (it differs from index + 1 after blank "
        "lines); absent for a JSON body and for body-level errors.",
    )


class ErrorsSerializer(serializers.Serializer):
    errors = FieldErrorSerializer(many=True, help_text="At most the first 100 problems.")
    error_count = serializers.IntegerField(help_text="Total number of problems found.")


class BudgetSerializer(serializers.Serializer):
    period = serializers.ChoiceField(choices=["day", "month"], help_text="UTC day or month.")
    limit = serializers.IntegerField()
    used = serializers.IntegerField()
    remaining = serializers.IntegerField()


class BudgetErrorsSerializer(ErrorsSerializer):
    budget = BudgetSerializer(help_text="The team budget the batch does not fit in (field `budget`).")


class DetailSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text="Why the request was refused (401, 404, 429).")


class RetryConflictSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text="Why the batch's failed items were not re-run.")
    retry_batch_id = serializers.UUIDField(
        allow_null=True, help_text="The batch that already re-ran them, when that is the reason."
    )


class ItemStatusListField(serializers.CharField):
    """`status=failed` or a comma-separated list (`failed,cancelled`) of item states."""

    def to_internal_value(self, data):
        text = super().to_internal_value(data)
        statuses = [part.strip() for part in text.split(",") if part.strip()]
        unknown = sorted(set(statuses) - set(ItemStatus.values))
        if not statuses or unknown:
            raise serializers.ValidationError(
                f"must be one or more of {', '.join(ItemStatus.values)}, comma-separated"
                + (f"; unknown: {', '.join(unknown)}" if unknown else "")
            )
        return list(dict.fromkeys(statuses))


# --- submission (documentation of the body; validation lives in batches.submission) -------------


class MessageSerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=sorted(ROLES))
    content = serializers.CharField(
        help_text="Message text (a list of OpenAI content parts is also accepted)."
    )


class ItemSerializer(serializers.Serializer):
    custom_id = serializers.CharField(
        max_length=MAX_CUSTOM_ID_CHARS, help_text="Caller's id for the item, unique in the batch."
    )
    route = serializers.CharField(
        required=False,
        max_length=MAX_NAME_CHARS,
        help_text="Route tag (routing rules pick the provider). Exactly one of route/provider.",
    )
    provider = serializers.CharField(
        required=False,
        max_length=MAX_NAME_CHARS,
        help_text="Send to this provider directly. Exactly one of route/provider.",
    )
    endpoint = serializers.ChoiceField(
        choices=["chat", "embeddings"],
        required=False,
        default="chat",
        help_text="What the item asks for: `chat` (default: a chat completion from messages/query) or "
        "`embeddings` (an OpenAI embeddings answer for `input`; no messages/query).",
    )
    messages = MessageSerializer(
        many=True, required=False, help_text="Chat messages. Exactly one of messages/query (chat items)."
    )
    query = serializers.CharField(
        required=False,
        help_text="Shorthand for one user message. Exactly one of messages/query (chat items).",
    )
    input = serializers.JSONField(
        required=False,
        help_text='Embeddings items only (`"endpoint": "embeddings"`), required there: a non-empty string '
        "or a list of non-empty strings, within the provider's per-request limits (inputs, tokens).",
    )
    params = serializers.DictField(
        required=False,
        help_text="Passed to the provider as-is (e.g. max_tokens, temperature); "
        + "/".join(sorted(RESERVED_PARAMS))
        + " are reserved.",
    )


class StepSerializer(serializers.Serializer):
    """One step of a pipeline (docs/contract.md §4 "steps"), as submitted and as the batch shows it."""

    name = serializers.CharField(help_text="Unique in the batch: letters, digits, '_' or '-'.")
    route = serializers.CharField(
        required=False, help_text="At most one of route/provider; none: the item's."
    )
    provider = serializers.CharField(required=False)
    template = serializers.CharField(
        required=False,
        default="{input}",
        help_text="The step's one user message: {input} is the item's query (or last user message), "
        "{steps.<name>} an earlier step's answer text; {{ and }} are literal braces.",
    )
    params = serializers.DictField(
        required=False, help_text="Passed to the provider, over the item's params."
    )
    route_by = serializers.DictField(
        child=serializers.CharField(),
        required=False,
        help_text='The route by the previous step\'s answer (trimmed, case-folded): {answer: route, "*": default}.',
    )


class BatchCreateSerializer(serializers.Serializer):
    items = ItemSerializer(many=True, help_text="1..GATEWAY_MAX_ITEMS_PER_BATCH items (default 50,000).")
    metadata = serializers.DictField(
        required=False, help_text="Free-form JSON object kept with the batch (≤16 KB)."
    )
    webhook_url = serializers.CharField(
        required=False,
        help_text="Where a signed event is POSTed when the batch ends (https://; docs/webhooks.md). "
        "A JSONL body gives it as the query parameter `webhook_url`.",
    )
    steps = StepSerializer(
        many=True,
        required=False,
        help_text="A pipeline: every item runs through these steps in order, each step as soon as its "
        "previous one finished (a JSONL body: the query parameter `steps`, the list as JSON).",
    )
    targets = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="An evaluation: 2 to 8 route or provider names; every item (without a route or provider "
        "of its own) is sent to each; results carry `target`, GET …/comparison compares them (a JSONL "
        "body: the query parameter `targets`, comma-separated). Not with `steps`.",
    )


# --- batch object ---------------------------------------------------------------------------------


class MetadataField(serializers.DictField):
    """The batch's metadata as stored. Clients can only send an object, but a row written another way
    (an operator, an old version) may hold any JSON value: shown as it is, never a 500."""

    def to_representation(self, value):
        return super().to_representation(value) if isinstance(value, dict) else value


class RequestCountsSerializer(serializers.Serializer):
    total = serializers.IntegerField()
    completed = serializers.IntegerField(help_text="Items that succeeded.")
    failed = serializers.IntegerField(help_text="Items that failed for good.")
    cancelled = serializers.IntegerField(help_text="Items not sent because the batch was cancelled.")
    expired = serializers.IntegerField(help_text="Items not sent before the batch's deadline.")


class ProviderStatsSerializer(serializers.Serializer):
    request_count = serializers.IntegerField(help_text="HTTP attempts sent (retries included).")
    avg_latency_ms = serializers.IntegerField()
    p95_latency_ms = serializers.IntegerField()
    error_count = serializers.IntegerField()
    retry_count = serializers.IntegerField()
    rate_limited_count = serializers.IntegerField()
    cached_tokens = serializers.IntegerField(
        required=False, help_text="Of prompt_tokens: read from the provider's prompt cache."
    )
    cache_write_tokens = serializers.IntegerField(
        required=False, help_text="Of prompt_tokens: written to the provider's prompt cache."
    )
    cost = serializers.FloatField(
        allow_null=True,
        required=False,
        help_text="Cost of the billed tokens, wasted ones included (null: a price is unknown).",
    )
    wasted_cost = serializers.FloatField(
        allow_null=True, required=False, help_text="Cost of the wasted tokens (null: a price is unknown)."
    )


class TokenUsageSerializer(serializers.Serializer):
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    cached_tokens = serializers.IntegerField(
        required=False, help_text="Of prompt_tokens: read from the provider's prompt cache."
    )
    cache_write_tokens = serializers.IntegerField(
        required=False, help_text="Of prompt_tokens: written to the provider's prompt cache."
    )
    retry_extra_tokens = serializers.IntegerField(
        help_text="Tokens billed for attempts whose answer was not used."
    )
    cost = serializers.FloatField(
        allow_null=True,
        required=False,
        help_text="Cost of the billed tokens, wasted ones included (null: a price is unknown).",
    )
    wasted_cost = serializers.FloatField(
        allow_null=True, required=False, help_text="Cost of the wasted tokens (null: a price is unknown)."
    )


class EndpointStatsSerializer(serializers.Serializer):
    """One endpoint's part of the stats (batches/execution/stats.py): its items only."""

    success_count = serializers.IntegerField()
    failed_count = serializers.IntegerField()
    cache_hits = serializers.IntegerField()
    providers = serializers.DictField(child=ProviderStatsSerializer(), help_text="Keyed by provider name.")
    token_usage = TokenUsageSerializer(help_text="Priced at the providers' prices for this endpoint.")


class StatsSerializer(serializers.Serializer):
    batch_id = serializers.UUIDField()
    task_total = serializers.IntegerField()
    success_count = serializers.IntegerField()
    failed_count = serializers.IntegerField()
    total_elapsed_ms = serializers.IntegerField()
    providers = serializers.DictField(child=ProviderStatsSerializer(), help_text="Keyed by provider name.")
    token_usage = TokenUsageSerializer()
    cache_hits = serializers.IntegerField(
        help_text="Items answered by the response cache or by an identical item's answer (no call, nothing billed)."
    )
    endpoints = serializers.DictField(
        child=EndpointStatsSerializer(),
        help_text="The same numbers per endpoint the items asked for (chat, embeddings): keyed by endpoint.",
    )


def zero_stats(batch: Batch) -> dict[str, Any]:
    return {
        "batch_id": str(batch.id),
        "task_total": batch.total_count,
        "success_count": batch.completed_count,
        "failed_count": batch.failed_count,
        "total_elapsed_ms": 0,
        "providers": {},
        "token_usage": {
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "retry_extra_tokens": 0,
            "cached_tokens": 0,
            "cache_write_tokens": 0,
        },
        "cache_hits": 0,
        "endpoints": {},
    }


class BatchSerializer(serializers.Serializer):
    """The batch object of docs/contract.md §4."""

    id = serializers.UUIDField()
    status = serializers.ChoiceField(choices=BatchStatus.choices)
    request_counts = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    completed_at = serializers.DateTimeField(allow_null=True)
    metadata = MetadataField()
    stats = serializers.SerializerMethodField(
        help_text="Filled by the engine while/after running; zeros of the same shape before that."
    )

    priority = serializers.ChoiceField(choices=BatchPriority.choices)
    completion_window = serializers.CharField(
        allow_null=True, help_text="As submitted, e.g. '24h'; null = none."
    )
    expires_at = serializers.DateTimeField(allow_null=True)
    webhook_url = serializers.CharField(
        allow_null=True, help_text="As submitted; null = none (the team's default URL, if any, is used)."
    )
    cache = serializers.BooleanField(
        allow_null=True,
        help_text="The response cache as submitted: true (every item), false (none), null (the route's "
        "`cache` setting, items at temperature 0). docs/cache.md",
    )

    steps = StepSerializer(many=True, help_text="The pipeline's steps as checked at submission; [] = none.")
    targets = serializers.ListField(
        child=serializers.CharField(),
        help_text="An evaluation's targets as checked at submission; [] = none. request_counts count "
        "copies: total = items × targets.",
    )

    @extend_schema_field(RequestCountsSerializer)
    def get_request_counts(self, batch: Batch) -> dict[str, int]:
        return {
            "total": batch.total_count,
            "completed": batch.completed_count,
            "failed": batch.failed_count,
            "cancelled": batch.cancelled_count,
            "expired": batch.expired_count,
        }

    def to_representation(self, batch: Batch) -> dict[str, Any]:
        data = super().to_representation(batch)
        data["completion_window"] = batch.completion_window or None
        data["webhook_url"] = batch.webhook_url or None
        return data

    @extend_schema_field(StatsSerializer)
    def get_stats(self, batch: Batch) -> dict[str, Any]:
        stats = zero_stats(batch)
        if batch.stats:
            stats.update(batch.stats)
        return stats


class BatchPageSerializer(serializers.Serializer):
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = BatchSerializer(many=True)


# --- query parameters -----------------------------------------------------------------------------


class BatchListQuerySerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=BatchStatus.choices, required=False)
    cursor = serializers.CharField(required=False, help_text="Opaque cursor taken from `next`/`previous`.")
    limit = serializers.IntegerField(
        required=False, min_value=1, max_value=100, help_text="Page size (default 20)."
    )
