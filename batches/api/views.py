"""REST API views (docs/contract.md §4). Thin: parse/validate the request, call a service or selector, render.

Errors are raised, never rendered here: batches/api/exceptions.py answers every ApplicationError."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

from django.http import StreamingHttpResponse
from django.utils.dateparse import parse_datetime
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound
from rest_framework.pagination import CursorPagination
from rest_framework.permissions import IsAuthenticated
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.response import Response
from rest_framework.utils.urls import remove_query_param, replace_query_param
from rest_framework.views import APIView

from batches import selectors
from batches.execution import cancel_batch
from batches.models import Batch
from batches.retry import retry_failed
from batches.submission import check_body_size, request_hash, submit_body, submit_idempotent
from gateway_engine.errors import ApplicationError

from .auth import ApiKeyAuthentication
from .exceptions import InvalidQuery
from .result_serializers import ResultPageSerializer, ResultsQuerySerializer
from .serializers import (
    BatchCreateSerializer,
    BatchListQuerySerializer,
    BatchPageSerializer,
    BatchSerializer,
    BudgetErrorsSerializer,
    DetailSerializer,
    ErrorsSerializer,
    RetryConflictSerializer,
)
from .throttling import ApiKeyRateThrottle
from .usage_serializers import UsageQuerySerializer, UsageSerializer

STREAM_CHUNK_LINES = 200

AUTH_ERRORS = {
    401: OpenApiResponse(DetailSerializer, description="No, invalid or revoked API key."),
    429: OpenApiResponse(
        DetailSerializer, description="Too many requests for this API key (see Retry-After)."
    ),
    503: OpenApiResponse(
        DetailSerializer, description="Redis or the database is unavailable; retry after Retry-After."
    ),
}
BATCH_ID = OpenApiParameter("batch_id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The batch id.")
NOT_FOUND = {404: OpenApiResponse(DetailSerializer, description="No such batch for the caller's team.")}
BAD_QUERY = {400: OpenApiResponse(ErrorsSerializer, description="Invalid query parameter (field names it).")}


class JsonLinesRenderer(BaseRenderer):
    """Lets `?format=jsonl` (and `Accept: application/jsonl`) select the streaming results."""

    media_type = "application/jsonl"
    format = "jsonl"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return json.dumps(data).encode() if data is not None else b""


class TeamAPIView(APIView):
    # Authenticated by API key, scoped to the key's team, throttled per key.

    authentication_classes = [ApiKeyAuthentication]
    permission_classes = [IsAuthenticated]
    throttle_classes = [ApiKeyRateThrottle]
    renderer_classes = [JSONRenderer]

    @property
    def team(self):
        return self.request.user.team

    def get_batch(self, batch_id: str) -> Batch:
        try:
            return selectors.get_batch_for_team(self.team, uuid.UUID(batch_id))
        except (ValueError, Batch.DoesNotExist):  # a malformed id is as unknown as another team's
            raise NotFound("batch not found") from None


class BatchPagination(CursorPagination):
    ordering = ("-created_at", "-id")
    page_size = 20
    page_size_query_param = "limit"
    max_page_size = 100

    def decode_cursor(self, request):
        cursor = super().decode_cursor(request)
        # DRF trusts the decoded position; a forged one would reach the ORM as a bad datetime (500).
        if cursor is not None and cursor.position is not None:
            try:
                valid = parse_datetime(cursor.position) is not None
            except ValueError:
                valid = False
            if not valid:
                raise NotFound(self.invalid_cursor_message)
        return cursor


# the OpenAPI description of POST /api/batches (docs/api.md)
SUBMIT_BATCH_SCHEMA = extend_schema(
    operation_id="batches_create",
    summary="Submit a batch (JSON or JSONL)",
    description=(
        'JSON body `{"items": [ITEM, ...], "metadata": {...}}`, or a JSONL body '
        "(`Content-Type: application/jsonl`) with one ITEM per line. Every item is validated "
        "before anything is stored; on any error nothing is stored. With an `Idempotency-Key` "
        "header a retry with the same key and body returns the first batch (200) instead of a "
        "new one; the same key with a different body is a 409."
    ),
    parameters=[
        OpenApiParameter(
            "Idempotency-Key",
            OpenApiTypes.STR,
            OpenApiParameter.HEADER,
            required=False,
            description="1-255 visible ASCII characters; unique per team.",
        )
    ],
    request={
        "application/json": BatchCreateSerializer,
        "application/jsonl": {"type": "string", "description": "One ITEM object as JSON per line."},
    },
    responses={
        201: BatchSerializer,
        200: OpenApiResponse(BatchSerializer, description="Idempotent repeat: the first batch."),
        400: OpenApiResponse(ErrorsSerializer, description="Invalid body or items; nothing stored."),
        409: OpenApiResponse(
            ErrorsSerializer, description="Idempotency-Key already used with a different body."
        ),
        413: OpenApiResponse(ErrorsSerializer, description="Body larger than GATEWAY_MAX_BODY_BYTES."),
        411: OpenApiResponse(ErrorsSerializer, description="Chunked body without Content-Length."),
        415: OpenApiResponse(ErrorsSerializer, description="Content-Type is not JSON or JSONL."),
        **AUTH_ERRORS,
        429: OpenApiResponse(
            BudgetErrorsSerializer,
            description="Over the team's daily or monthly token budget; nothing stored. (A throttled key "
            'gets `{"detail": …}` instead.)',
        ),
    },
    examples=[
        OpenApiExample(
            "Two items",
            request_only=True,
            media_type="application/json",
            value={
                "items": [
                    {"custom_id": "q1", "route": "intent", "query": "Where is my order?"},
                    {
                        "custom_id": "q2",
                        "provider": "alpha",
                        "messages": [{"role": "user", "content": "Hi"}],
                        "params": {"max_tokens": 64},
                    },
                ],
                "metadata": {"source": "docs"},
            },
        )
    ],
)


def read_body(request) -> bytes:
    """The raw request body, refused before anything is read when chunked (no Content-Length), when
    the Content-Length is not an integer or when it is over GATEWAY_MAX_BODY_BYTES."""
    if not request.META.get("CONTENT_LENGTH") and "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", ""):
        # Django's WSGI layer reads no body without a Content-Length; say so instead of "empty".
        message = "required: chunked request bodies are not supported, send a Content-Length"
        raise ApplicationError(message, field="Content-Length", status=411, code="length_required")
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise ApplicationError("not an integer", field="Content-Length") from None
    check_body_size(length)
    stream = request.stream
    return stream.read() if stream is not None else b""


class BatchListCreateView(TeamAPIView):
    # The body is read raw and parsed by batches.submission (JSON and JSONL), never by DRF parsers.

    @extend_schema(
        operation_id="batches_list",
        summary="List the team's batches, newest first",
        parameters=[BatchListQuerySerializer],
        responses={200: BatchPageSerializer, **BAD_QUERY, **AUTH_ERRORS},
    )
    def get(self, request):
        query = BatchListQuerySerializer(data=request.query_params)
        if not query.is_valid():
            raise InvalidQuery(query.errors)
        qs = selectors.batches_for_team(self.team, status=query.validated_data.get("status"))
        paginator = BatchPagination()
        try:
            page = paginator.paginate_queryset(qs, request, view=self)
        except NotFound as exc:  # DRF answers a bad cursor with 404; it is a bad query parameter
            raise ApplicationError(str(exc.detail), field="cursor") from None
        return paginator.get_paginated_response(BatchSerializer(page, many=True).data)

    @SUBMIT_BATCH_SCHEMA
    def post(self, request):
        body = read_body(request)
        content_type = request.META.get("CONTENT_TYPE")
        batch, created = submit_idempotent(
            team=self.team,
            key=request.headers.get("Idempotency-Key"),
            request_hash=request_hash(body, content_type, request.query_params),
            submit=lambda idempotency: submit_body(
                team=self.team,
                body=body,
                content_type=content_type,
                api_key=request.auth,
                query=request.query_params,
                idempotency=idempotency,
            ),
        )
        return Response(
            BatchSerializer(batch).data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK
        )


class BatchDetailView(TeamAPIView):
    @extend_schema(
        operation_id="batches_retrieve",
        summary="The batch object",
        parameters=[BATCH_ID],
        responses={200: BatchSerializer, **NOT_FOUND, **AUTH_ERRORS},
    )
    def get(self, request, batch_id):
        return Response(BatchSerializer(self.get_batch(batch_id)).data)


class BatchResultsView(TeamAPIView):
    renderer_classes = [JSONRenderer, JsonLinesRenderer]

    def perform_content_negotiation(self, request, force=False):
        # An unknown ?format= falls back to JSON here and is then refused as a 400 naming the field.
        return super().perform_content_negotiation(request, force=True)

    @extend_schema(
        operation_id="batches_results",
        summary="Item results in submission order",
        description=(
            "Paginated JSON (`next` is null on the last page), or with `?format=jsonl` every RESULT "
            "streamed as one JSON object per line. Items without an answer yet have ok=false and an "
            "error whose type is 'pending', 'running', 'cancelled' or 'expired'. `?status=failed` (or a "
            "comma-separated list such as `failed,cancelled`) returns only items in those states. "
            "`response` is an OpenAI chat.completion object for every provider kind; "
            "`?include=native` adds `native_response`, the provider's own answer (null for kind openai)."
        ),
        parameters=[BATCH_ID, ResultsQuerySerializer],
        responses={
            (200, "application/json"): ResultPageSerializer,
            (200, "application/jsonl"): OpenApiResponse(
                OpenApiTypes.STR, description="One RESULT object per line (with ?format=jsonl)."
            ),
            **BAD_QUERY,
            **NOT_FOUND,
            **AUTH_ERRORS,
        },
    )
    def get(self, request, batch_id):
        query = ResultsQuerySerializer(data=request.query_params)
        if not query.is_valid():
            raise InvalidQuery(query.errors)
        batch = self.get_batch(batch_id)
        params = query.validated_data
        native = "native" in (params.get("include") or ())
        if params["format"] == "jsonl" or request.accepted_renderer.format == "jsonl":
            lines = _jsonl_lines(batch, params.get("status"), native)
            response = StreamingHttpResponse(lines, content_type="application/jsonl")
            response["Content-Disposition"] = f'inline; filename="batch-{batch.id}-results.jsonl"'
            return response
        request.accepted_renderer = JSONRenderer()
        request.accepted_media_type = JSONRenderer.media_type
        results, next_after = selectors.result_page(
            batch,
            after=params.get("after"),
            limit=params["limit"],
            statuses=params.get("status"),
            native=native,
        )
        next_url = None
        if next_after is not None:
            url = remove_query_param(request.build_absolute_uri(), "format")
            next_url = replace_query_param(url, "after", next_after)
        return Response({"results": results, "next": next_url})


def _jsonl_lines(batch: Batch, statuses: list[str] | None = None, native: bool = False) -> Iterator[bytes]:
    lines: list[str] = []
    for result in selectors.iter_results(batch, statuses=statuses, native=native):
        lines.append(json.dumps(result, ensure_ascii=False, separators=(",", ":")))
        if len(lines) >= STREAM_CHUNK_LINES:
            yield ("\n".join(lines) + "\n").encode("utf-8", "backslashreplace")
            lines = []
    if lines:
        yield ("\n".join(lines) + "\n").encode("utf-8", "backslashreplace")


class BatchCancelView(TeamAPIView):
    @extend_schema(
        operation_id="batches_cancel",
        summary="Cancel a batch",
        description=(
            "Items not yet sent are cancelled; in-flight ones finish. Returns the batch object. "
            "Cancelling a finished batch changes nothing."
        ),
        parameters=[BATCH_ID],
        request=None,
        responses={200: BatchSerializer, **NOT_FOUND, **AUTH_ERRORS},
    )
    def post(self, request, batch_id):
        batch = cancel_batch(str(self.get_batch(batch_id).id))  # the engine's service
        return Response(BatchSerializer(batch).data)


class BatchRetryFailedView(TeamAPIView):
    @extend_schema(
        operation_id="batches_retry_failed",
        summary="Re-run the failed items as a new batch",
        description=(
            "Submits the finished batch's failed items (same custom_ids, route or provider, messages, "
            "params, priority and completion window) as a new batch and returns it (`201`). Its "
            'metadata is the original\'s plus `"retry_of": "<this batch id>"`. `409` while the batch '
            "is still running, when it has no failed items, or when it was already retried (the "
            "answer's `retry_batch_id` names that batch; retry it to go again). `400` (errors shape, "
            "nothing stored) when an item no longer validates, e.g. its route was removed."
        ),
        parameters=[BATCH_ID],
        request=None,
        responses={
            201: BatchSerializer,
            400: OpenApiResponse(
                ErrorsSerializer, description="An item no longer validates; nothing stored."
            ),
            409: OpenApiResponse(
                RetryConflictSerializer, description="Not finished, nothing failed, or already retried."
            ),
            **NOT_FOUND,
            **AUTH_ERRORS,
        },
    )
    def post(self, request, batch_id):
        new_batch = retry_failed(self.get_batch(batch_id), api_key=request.auth)
        return Response(BatchSerializer(new_batch).data, status=status.HTTP_201_CREATED)


class UsageView(TeamAPIView):
    @extend_schema(
        operation_id="usage",
        summary="The team's token usage",
        parameters=[UsageQuerySerializer],
        responses={200: UsageSerializer, **BAD_QUERY, **AUTH_ERRORS},
    )
    def get(self, request):
        query = UsageQuerySerializer(data=request.query_params)
        if not query.is_valid():
            raise InvalidQuery(query.errors)
        params = query.validated_data
        usage = selectors.usage_for_team(
            self.team, group_by=params["group_by"], date_from=params.get("from"), date_to=params.get("to")
        )
        return Response(usage)
