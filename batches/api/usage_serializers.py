"""The shapes of GET /api/v1/usage: the token usage per day, provider or endpoint (and per endpoint
beside any grouping), the queued work against its
limits and the RPM / TPM limits across providers (docs/api.md), and its query parameters."""

from __future__ import annotations

from rest_framework import serializers

from batches.selectors import USAGE_GROUPS


class UsageNumbersSerializer(serializers.Serializer):
    requests = serializers.IntegerField(help_text="HTTP attempts sent.")
    items_succeeded = serializers.IntegerField()
    items_failed = serializers.IntegerField()
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    wasted_tokens = serializers.IntegerField(
        help_text="Tokens billed for attempts whose answer was not used."
    )
    total_tokens = serializers.IntegerField(help_text="prompt_tokens + completion_tokens.")
    cached_tokens = serializers.IntegerField(
        help_text="Of prompt_tokens: read from the provider's prompt cache."
    )
    cache_write_tokens = serializers.IntegerField(
        help_text="Of prompt_tokens: written to the provider's prompt cache."
    )
    cost = serializers.FloatField(
        allow_null=True,
        help_text="Cost of the billed tokens, wasted ones included (null: a price is unknown).",
    )
    wasted_cost = serializers.FloatField(
        allow_null=True, help_text="Cost of the wasted tokens (null: a price is unknown)."
    )
    realtime_prompt_tokens = serializers.IntegerField(help_text="Of prompt_tokens: sent in real time.")
    realtime_completion_tokens = serializers.IntegerField(help_text="Of completion_tokens: real time.")
    provider_batch_prompt_tokens = serializers.IntegerField(
        help_text="Of prompt_tokens: served through the provider's batch API."
    )
    provider_batch_completion_tokens = serializers.IntegerField(
        help_text="Of completion_tokens: served through the provider's batch API."
    )
    realtime_cost = serializers.FloatField(
        allow_null=True, help_text="Cost of the real-time tokens, wasted ones excluded (null: unknown)."
    )
    provider_batch_cost = serializers.FloatField(
        allow_null=True, help_text="Cost of the provider-batch tokens, at batch_price_factor (null: unknown)."
    )


class UsageRowSerializer(UsageNumbersSerializer):
    day = serializers.DateField(required=False, help_text="Present when group_by=day.")
    provider = serializers.CharField(required=False, help_text="Present when group_by=provider.")
    endpoint = serializers.CharField(
        required=False, help_text="Present when group_by=endpoint: chat, embeddings, responses, messages."
    )


class QueueUsageSerializer(serializers.Serializer):
    pending_items = serializers.IntegerField(
        help_text="Items not finished yet in the team's unfinished batches."
    )
    max_pending_items = serializers.IntegerField()
    open_batches = serializers.IntegerField()
    max_open_batches = serializers.IntegerField()
    submissions_last_minute = serializers.IntegerField()
    max_submissions_per_minute = serializers.IntegerField()


class RateDimensionSerializer(serializers.Serializer):
    limit = serializers.IntegerField(
        allow_null=True, help_text="Per minute, across all providers; null: unlimited."
    )
    used_last_minute = serializers.IntegerField(
        allow_null=True,
        help_text="Granted in the last 60 s (tokens settled to usage); null: no limit, not counted.",
    )
    available_now = serializers.IntegerField(allow_null=True, help_text="What the team's bucket holds now.")


class RateLimitsSerializer(serializers.Serializer):
    rpm = RateDimensionSerializer()
    tpm = RateDimensionSerializer()
    burst_seconds = serializers.FloatField(help_text="Seconds of the rate a team bucket holds.")


class UsageSerializer(serializers.Serializer):
    group_by = serializers.ChoiceField(choices=USAGE_GROUPS)
    queue = QueueUsageSerializer(
        help_text="The team's queued work against its limits (a submission over one answers 429)."
    )
    rate_limits = RateLimitsSerializer(
        help_text="The team's RPM / TPM limits across all providers and their use (docs/api.md)."
    )
    # "from" is a Python keyword: declared through the fields dict below.
    to = serializers.DateField(allow_null=True)
    results = UsageRowSerializer(many=True)
    totals = UsageNumbersSerializer()
    endpoints = serializers.DictField(
        child=UsageNumbersSerializer(),
        help_text="The same numbers per endpoint the tokens went to (chat, embeddings, responses, "
        "messages), each priced at the provider's prices for that endpoint.",
    )

    def get_fields(self):
        fields = super().get_fields()
        fields["from"] = serializers.DateField(allow_null=True)
        return fields


class UsageQuerySerializer(serializers.Serializer):
    group_by = serializers.ChoiceField(choices=USAGE_GROUPS, required=False, default="day")
    to = serializers.DateField(required=False, help_text="Last day included (YYYY-MM-DD).")

    def get_fields(self):
        fields = super().get_fields()
        fields["from"] = serializers.DateField(required=False, help_text="First day included (YYYY-MM-DD).")
        return fields

    def validate(self, attrs):
        start, end = attrs.get("from"), attrs.get("to")
        if start and end and start > end:
            raise serializers.ValidationError({"from": "must be on or before 'to'"})
        return attrs
