"""The results endpoint's serializers (docs/api.md "Reading", "RESULT"): the query it takes and the
RESULT it returns. RESULTs come pre-shaped from gateway_engine.result.result_dict (via
batches.selectors.result_from_row); these classes validate the query and describe the shape in the
OpenAPI schema."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from batches.models import ERROR_TYPE_VALUES, ItemStatus
from batches.selectors import RESULT_INCLUDES

from .serializers import ItemStatusListField

# --- query ----------------------------------------------------------------------------------------


class IncludeListField(serializers.CharField):
    """`include=native` (or a comma-separated list): what to add to each RESULT. An unknown word is a
    400 naming `include`, never ignored (a typo would otherwise silently drop what was asked for)."""

    def to_internal_value(self, data):
        text = super().to_internal_value(data)
        words = [part.strip() for part in text.split(",") if part.strip()]
        unknown = sorted(set(words) - set(RESULT_INCLUDES))
        if not words or unknown:
            raise serializers.ValidationError(
                f"must be one or more of {', '.join(RESULT_INCLUDES)}, comma-separated"
                + (f"; unknown: {', '.join(unknown)}" if unknown else "")
            )
        return list(dict.fromkeys(words))


class ResultsQuerySerializer(serializers.Serializer):
    format = serializers.ChoiceField(choices=["json", "jsonl"], required=False, default="json")
    after = serializers.IntegerField(
        required=False,
        min_value=0,
        max_value=2**31 - 1,
        help_text="Return items after this seq (from `next`).",
    )
    limit = serializers.IntegerField(required=False, min_value=1, max_value=1000, default=100)
    status = ItemStatusListField(
        required=False,
        help_text="Only items in these states: one of "
        + ", ".join(ItemStatus.values)
        + ", or a comma-separated list (e.g. `failed,expired`).",
    )
    include = IncludeListField(
        required=False,
        help_text="Add to each RESULT: `native` adds `native_response`, the provider's own answer "
        "(null for kind openai). Works with JSON pages and `format=jsonl`; anything else is a 400.",
    )


# --- RESULT ---------------------------------------------------------------------------------------


class ResultErrorSerializer(serializers.Serializer):
    type = serializers.ChoiceField(
        choices=[*ERROR_TYPE_VALUES, ItemStatus.PENDING, ItemStatus.RUNNING, ItemStatus.CANCELLED],
        help_text="An error class for failed items; 'pending', 'running' or 'cancelled' for items without an answer.",
    )
    status_code = serializers.IntegerField(allow_null=True, help_text="The provider's HTTP status, if any.")
    message = serializers.CharField()


class PromptTokensDetailsSerializer(serializers.Serializer):
    cached_tokens = serializers.IntegerField(
        required=False,
        help_text="Of prompt_tokens: read from the provider's prompt cache (OpenAI's field). "
        "Absent when the provider reported none.",
    )
    x_gateway_cache_write_tokens = serializers.IntegerField(
        required=False,
        help_text="Of prompt_tokens: written to the provider's prompt cache (e.g. Anthropic "
        "cache_creation_input_tokens). Absent when the provider reported none.",
    )


class ResultUsageSerializer(serializers.Serializer):
    prompt_tokens = serializers.IntegerField(help_text="All input tokens, cached and cache writes included.")
    completion_tokens = serializers.IntegerField(help_text="0 for embeddings items (input only).")
    total_tokens = serializers.IntegerField()
    prompt_tokens_details = PromptTokensDetailsSerializer(
        required=False, help_text="Present only when the provider reported prompt-cache counts."
    )


class StepResultSerializer(serializers.Serializer):
    """One step of a pipeline item (docs/contract.md §4 "steps"): the RESULT's fields for that step."""

    name = serializers.CharField()
    ok = serializers.BooleanField()
    provider = serializers.CharField()
    attempts = serializers.IntegerField(help_text="HTTP attempts made for this step.")
    latency_ms = serializers.IntegerField()
    response = serializers.JSONField(allow_null=True)
    error = ResultErrorSerializer(allow_null=True)
    usage = ResultUsageSerializer(allow_null=True)
    served_by = serializers.CharField()


class RoutedBySerializer(serializers.Serializer):
    """Why the item went to its provider rather than its weighted draw (docs/contract.md §4)."""

    rule = serializers.CharField(help_text="The provider the routing rule chose (tried first).")
    reason = serializers.ChoiceField(
        choices=["capacity"],
        help_text="capacity: its weighted first choice was held back (paused, breaker open, or saturated "
        "while the item waited) and this same-priority provider of its route had room.",
    )
    moved_from = serializers.CharField(help_text="The held-back provider the item was queued for.")


class ResultSerializer(serializers.Serializer):
    """One RESULT of docs/contract.md §4 (plus `status`, the item's state). Rows come pre-shaped from
    gateway_engine.result.result_dict (via batches.selectors.result_from_row), so to_representation
    passes them through."""

    custom_id = serializers.CharField()
    ok = serializers.BooleanField(help_text="True only for items that succeeded.")
    status = serializers.ChoiceField(choices=ItemStatus.choices)
    provider = serializers.CharField(help_text="Provider that answered last; empty if none was tried.")
    attempts = serializers.IntegerField(help_text="HTTP attempts made for this item.")
    latency_ms = serializers.IntegerField(help_text="Latency of the last attempt; 0 if none was made.")
    response = serializers.JSONField(
        allow_null=True,
        help_text="The answer as an OpenAI chat.completion object (an embeddings item: OpenAI's embeddings "
        "answer, `object: list` of `embedding` objects), whatever the provider's kind, or null.",
    )
    error = ResultErrorSerializer(allow_null=True)
    usage = ResultUsageSerializer(allow_null=True)
    served_by = serializers.ChoiceField(
        choices=["realtime", "provider_batch", "cache"],
        help_text="What served the item: realtime (sent by the engine), provider_batch (a provider's batch "
        "API) or cache (the response cache or an identical item's answer: attempts 0, nothing billed).",
    )
    target = serializers.CharField(
        required=False,
        help_text="Only for an item of a batch with `targets`: the target (route or provider name) this "
        "RESULT is the answer of; each custom_id has one RESULT per target.",
    )
    steps = StepResultSerializer(
        many=True,
        required=False,
        help_text="Only for an item of a batch with `steps`: each step run, in order (the last one is the "
        "step the item ended on, or is at); the top-level fields describe that last step.",
    )
    routed_by = RoutedBySerializer(
        required=False,
        help_text="Only for an item moved by routing by capacity: the provider chosen and why.",
    )
    native_response = serializers.JSONField(
        required=False,
        allow_null=True,
        help_text="Only with `?include=native`: the provider's own answer before its translation to "
        "`response` (e.g. an Anthropic Messages or Gemini generateContent body); null for kind openai "
        "(its answer is `response`) and for items without an answer.",
    )

    def to_representation(self, instance: dict[str, Any]) -> dict[str, Any]:
        return instance


class ResultPageSerializer(serializers.Serializer):
    results = ResultSerializer(many=True)
    next = serializers.URLField(allow_null=True, help_text="URL of the next page, or null on the last page.")
