"""Explicit serializers of the OpenAI-compatible surface: request bodies and query strings in, OpenAI's
objects out (they render the dicts built by `selectors.file_object` / `selectors.batch_object`)."""

from __future__ import annotations

from rest_framework import serializers

from .conversion import ENDPOINTS
from .selectors import MAX_FILE_LIST_LIMIT, MAX_LIST_LIMIT

STATUSES = (
    "validating",
    "failed",
    "in_progress",
    "finalizing",
    "completed",
    "expired",
    "cancelling",
    "cancelled",
)


# --- errors ---------------------------------------------------------------------------------------


class OpenAIErrorDetailSerializer(serializers.Serializer):
    message = serializers.CharField()
    type = serializers.CharField()
    param = serializers.CharField(allow_null=True)
    code = serializers.CharField(allow_null=True)


class OpenAIErrorSerializer(serializers.Serializer):
    error = OpenAIErrorDetailSerializer()


# --- files ----------------------------------------------------------------------------------------


class OpenAIFileUploadSerializer(serializers.Serializer):
    file = serializers.FileField(help_text="The JSONL input file (OpenAI Batch format).")
    purpose = serializers.CharField(help_text='Must be "batch".')


class OpenAIFileListQuerySerializer(serializers.Serializer):
    purpose = serializers.CharField(required=False)
    after = serializers.CharField(required=False, max_length=64)
    limit = serializers.IntegerField(
        required=False, min_value=1, max_value=MAX_FILE_LIST_LIMIT, default=10_000
    )
    order = serializers.ChoiceField(choices=["asc", "desc"], required=False, default="desc")


class OpenAIFileObjectSerializer(serializers.Serializer):
    id = serializers.CharField()
    object = serializers.CharField(help_text='Always "file".')
    bytes = serializers.IntegerField()
    created_at = serializers.IntegerField(help_text="Unix seconds.")
    filename = serializers.CharField()
    purpose = serializers.ChoiceField(choices=["batch", "batch_output"])
    status = serializers.CharField(help_text='Always "processed".')
    expires_at = serializers.IntegerField(
        allow_null=True, help_text="Unix seconds; GATEWAY_FILES_EXPIRE_DAYS after created_at (null: never)."
    )
    status_details = serializers.CharField(allow_null=True)


class OpenAIFileListSerializer(serializers.Serializer):
    object = serializers.CharField(help_text='Always "list".')
    data = OpenAIFileObjectSerializer(many=True)
    first_id = serializers.CharField(allow_null=True)
    last_id = serializers.CharField(allow_null=True)
    has_more = serializers.BooleanField()


class OpenAIFileDeletedSerializer(serializers.Serializer):
    id = serializers.CharField()
    object = serializers.CharField(help_text='Always "file".')
    deleted = serializers.BooleanField()


# --- batches --------------------------------------------------------------------------------------


class OpenAIBatchCreateSerializer(serializers.Serializer):
    input_file_id = serializers.CharField(max_length=64)
    endpoint = serializers.CharField(
        max_length=64, help_text=f"Only {', '.join(ENDPOINTS)} (other values answer 400)."
    )
    completion_window = serializers.CharField(
        max_length=16, help_text="The deadline: '24h', or shorter such as '1h' or '15m'."
    )
    metadata = serializers.DictField(
        child=serializers.CharField(allow_blank=True), required=False, allow_null=True
    )
    priority = serializers.CharField(
        required=False, allow_null=True, help_text="Gateway extension: high | normal | low (SDK: extra_body)."
    )
    webhook_url = serializers.CharField(
        required=False,
        allow_null=True,
        allow_blank=True,
        help_text="Gateway extension (SDK: extra_body): where a signed event is POSTed when the batch ends.",
    )
    cache = serializers.JSONField(
        required=False,
        allow_null=True,
        help_text="Gateway extension: true | false, the response cache for every line (SDK: extra_body; "
        "docs/cache.md). Omitted: the route's cache setting.",
    )
    provider_batch = serializers.CharField(
        required=False,
        allow_null=True,
        help_text="Gateway extension: auto (default) | never | always — whether items may go through "
        "their provider's own batch API (SDK: extra_body; docs/provider_batches.md).",
    )


class OpenAIBatchListQuerySerializer(serializers.Serializer):
    after = serializers.CharField(required=False, max_length=64)
    limit = serializers.IntegerField(required=False, min_value=1, max_value=MAX_LIST_LIMIT, default=20)


class OpenAIBatchErrorSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    param = serializers.CharField(allow_null=True)
    line = serializers.IntegerField(allow_null=True)


class OpenAIBatchErrorsSerializer(serializers.Serializer):
    object = serializers.CharField(help_text='Always "list".')
    data = OpenAIBatchErrorSerializer(many=True)


class OpenAIBatchRequestCountsSerializer(serializers.Serializer):
    total = serializers.IntegerField()
    completed = serializers.IntegerField()
    failed = serializers.IntegerField(help_text="Every line of the error file (failed, cancelled, expired).")


class OpenAIInputTokensDetailsSerializer(serializers.Serializer):
    cached_tokens = serializers.IntegerField()


class OpenAIOutputTokensDetailsSerializer(serializers.Serializer):
    reasoning_tokens = serializers.IntegerField()


class OpenAIBatchUsageSerializer(serializers.Serializer):
    input_tokens = serializers.IntegerField()
    input_tokens_details = OpenAIInputTokensDetailsSerializer()
    output_tokens = serializers.IntegerField()
    output_tokens_details = OpenAIOutputTokensDetailsSerializer()
    total_tokens = serializers.IntegerField()


def _ts(**kw):
    return serializers.IntegerField(allow_null=True, **kw)


class OpenAIBatchSerializer(serializers.Serializer):
    id = serializers.CharField()
    object = serializers.CharField(help_text='Always "batch".')
    endpoint = serializers.CharField()
    model = serializers.CharField(allow_null=True)
    errors = OpenAIBatchErrorsSerializer(allow_null=True)
    input_file_id = serializers.CharField()
    completion_window = serializers.CharField()
    status = serializers.ChoiceField(choices=STATUSES)
    output_file_id = serializers.CharField(allow_null=True)
    error_file_id = serializers.CharField(allow_null=True)
    created_at = serializers.IntegerField(help_text="Unix seconds, like every *_at field.")
    in_progress_at = _ts()
    expires_at = _ts()
    finalizing_at = _ts()
    completed_at = _ts()
    failed_at = _ts()
    expired_at = _ts()
    cancelling_at = _ts()
    cancelled_at = _ts()
    request_counts = OpenAIBatchRequestCountsSerializer()
    metadata = serializers.DictField(child=serializers.CharField(), allow_null=True)
    usage = OpenAIBatchUsageSerializer()
    priority = serializers.CharField(
        allow_null=True, help_text="Gateway extension: the native batch's priority."
    )


class OpenAIBatchListSerializer(serializers.Serializer):
    object = serializers.CharField(help_text='Always "list".')
    data = OpenAIBatchSerializer(many=True)
    first_id = serializers.CharField(allow_null=True)
    last_id = serializers.CharField(allow_null=True)
    has_more = serializers.BooleanField()
