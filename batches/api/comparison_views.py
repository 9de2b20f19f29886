"""GET /api/v1/batches/{id}/comparison: an evaluation's comparison (batches.comparison) as JSON, or with
``?format=csv`` one row per custom_id with each target's answer side by side. Thin."""

from __future__ import annotations

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from batches import comparison

from .exceptions import InvalidQuery
from .views import AUTH_ERRORS, BAD_QUERY, BATCH_ID, NOT_FOUND, TeamAPIView


class ComparisonQuerySerializer(serializers.Serializer):
    format = serializers.ChoiceField(choices=["json", "csv"], required=False, default="json")


class TargetFiguresSerializer(serializers.Serializer):
    items = serializers.IntegerField(help_text="Copies sent to this target (one per item).")
    ok = serializers.IntegerField()
    failed = serializers.IntegerField(
        help_text="Copies that ended without an answer (failed, cancelled, expired)."
    )
    pending = serializers.IntegerField(help_text="Copies not finished yet.")
    request_count = serializers.IntegerField(help_text="HTTP attempts sent (retries included).")
    p50_latency_ms = serializers.IntegerField(allow_null=True, help_text="Nearest rank, over the ok copies.")
    p95_latency_ms = serializers.IntegerField(allow_null=True)
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    total_tokens = serializers.IntegerField()
    retry_extra_tokens = serializers.IntegerField()
    cost = serializers.FloatField(allow_null=True, help_text="Null when a price is unknown.")
    wasted_cost = serializers.FloatField(allow_null=True)


class AgreementSerializer(serializers.Serializer):
    targets = serializers.ListField(child=serializers.CharField(), help_text="The pair of targets.")
    compared = serializers.IntegerField(help_text="Items ok on both targets.")
    agreed = serializers.IntegerField(help_text="Of those, answers equal once normalised.")
    rate = serializers.FloatField(allow_null=True, help_text="agreed / compared; null when none compared.")


class ComparisonSerializer(serializers.Serializer):
    batch_id = serializers.UUIDField()
    status = serializers.CharField()
    targets = serializers.ListField(child=serializers.CharField())
    items = serializers.IntegerField(help_text="Items of the batch (each sent to every target).")
    per_target = serializers.DictField(child=TargetFiguresSerializer())
    agreement = AgreementSerializer(many=True)


class BatchComparisonView(TeamAPIView):
    def perform_content_negotiation(self, request, force=False):
        # ?format=csv is this view's own (DRF would look for a csv renderer): JSON is negotiated
        return super().perform_content_negotiation(request, force=True)

    @extend_schema(
        operation_id="batches_comparison",
        summary="An evaluation's comparison of its targets",
        description=(
            "For a batch submitted with `targets`: per target its copies' outcomes, HTTP attempts, "
            "p50/p95 latency, tokens and cost, and the agreement rate of each pair of targets (answers "
            "of items ok on both, equal once trimmed, case-folded, whitespace collapsed and trailing "
            "punctuation stripped). `?format=csv`: one row per custom_id with each target's ok, answer "
            "text, latency and tokens. A batch without targets is a 404."
        ),
        parameters=[BATCH_ID, ComparisonQuerySerializer],
        responses={
            (200, "application/json"): ComparisonSerializer,
            (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="With ?format=csv."),
            **BAD_QUERY,
            **NOT_FOUND,
            **AUTH_ERRORS,
        },
    )
    def get(self, request, batch_id):
        query = ComparisonQuerySerializer(data=request.query_params)
        if not query.is_valid():
            raise InvalidQuery(query.errors)
        batch = self.get_batch(batch_id)
        if not comparison.is_evaluation(batch):
            raise NotFound("batch has no targets: it is not an evaluation")
        if query.validated_data["format"] == "csv":
            response = StreamingHttpResponse(
                comparison.csv_lines(batch), content_type="text/csv; charset=utf-8"
            )
            response["Content-Disposition"] = f'attachment; filename="batch-{batch.id}-comparison.csv"'
            return response
        request.accepted_renderer = JSONRenderer()
        request.accepted_media_type = JSONRenderer.media_type
        return Response(comparison.comparison(batch))
