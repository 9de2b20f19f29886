"""`/v1/files` and `/v1/batches` (docs/contract.md §6). Thin: parse the request with a serializer, call a
service or selector, render OpenAI's object. Errors use OpenAI's shape (errors.py)."""

from __future__ import annotations

from django.conf import settings
from django.core.files.uploadhandler import FileUploadHandler
from django.http import FileResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework.negotiation import BaseContentNegotiation, DefaultContentNegotiation
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from batches.api.auth import ApiKeyAuthentication
from batches.api.throttling import ApiKeyRateThrottle

from . import files, selectors, services
from .errors import OpenAIError, openai_exception_handler
from .models import File, OpenAIBatch
from .serializers import (
    OpenAIBatchCreateSerializer,
    OpenAIBatchListQuerySerializer,
    OpenAIBatchListSerializer,
    OpenAIBatchSerializer,
    OpenAIErrorSerializer,
    OpenAIFileDeletedSerializer,
    OpenAIFileListQuerySerializer,
    OpenAIFileListSerializer,
    OpenAIFileObjectSerializer,
    OpenAIFileUploadSerializer,
)

TAG = ["OpenAI-compatible (/v1)"]
ERR = OpenAIErrorSerializer
AUTH_ERRORS = {
    401: OpenApiResponse(ERR, description="No, invalid or revoked API key."),
    429: OpenApiResponse(ERR, description="Too many requests for this API key (see Retry-After)."),
}
BAD_REQUEST = {400: OpenApiResponse(ERR, description="Invalid request; `param` names the field.")}
FILE_NOT_FOUND = {
    404: OpenApiResponse(ERR, description="No such file for the caller's team (or it expired).")
}
BATCH_NOT_FOUND = {404: OpenApiResponse(ERR, description="No such batch for the caller's team.")}
MULTIPART_SLACK = 64 * 1024  # multipart boundaries and the purpose field on top of the file itself


def _invalid(serializer) -> OpenAIError:
    field, messages = next(iter(serializer.errors.items()))
    message = messages[0] if isinstance(messages, list) and messages else messages
    if isinstance(message, dict):  # nested (metadata values)
        message = next(iter(message.values()))
        message = message[0] if isinstance(message, list) else message
    return OpenAIError(400, f"{field}: {message}", param=field, code="invalid_value")


class UploadTooLarge(OpenAIError):
    pass


class SizeCapUploadHandler(FileUploadHandler):
    """Refuses an upload as soon as more than `cap` bytes of file data have arrived (chunked uploads
    have no Content-Length); passes every chunk on to Django's memory/temp-file handlers."""

    def __init__(self, request=None, cap: int = 0):
        super().__init__(request)
        self.cap = cap

    def receive_data_chunk(self, raw_data, start):
        if start + len(raw_data) > self.cap:
            raise UploadTooLarge(413, f"file is larger than {self.cap} bytes", param="file")
        return raw_data

    def file_complete(self, file_size):
        return None


class IgnoreAccept(BaseContentNegotiation):
    """The SDK asks for `application/binary` (file content) or `application/json`; answer JSON errors
    and the file's bytes whatever the Accept header says, as OpenAI does."""

    def select_parser(self, request, parsers):
        return DefaultContentNegotiation().select_parser(request, parsers)

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


class OpenAIView(APIView):
    authentication_classes = [ApiKeyAuthentication]
    permission_classes = [IsAuthenticated]
    throttle_classes = [ApiKeyRateThrottle]
    renderer_classes = [JSONRenderer]
    parser_classes = [JSONParser]
    content_negotiation_class = IgnoreAccept

    def get_exception_handler(self):
        return openai_exception_handler

    @property
    def team(self):
        return self.request.user.team

    def get_file(self, file_id: str) -> File:
        try:
            return selectors.get_file_for_team(self.team, file_id)
        except File.DoesNotExist:
            raise OpenAIError(404, f"No such File object: {file_id}", param="id", code="not_found") from None

    def get_openai_batch(self, batch_id: str) -> OpenAIBatch:
        try:
            return selectors.get_batch_for_team(self.team, batch_id)
        except OpenAIBatch.DoesNotExist:
            raise OpenAIError(404, f"No such batch: {batch_id}", param="id", code="not_found") from None


def _list(data: list[dict], has_more: bool) -> dict:
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": has_more,
    }


class FilesView(OpenAIView):
    parser_classes = [MultiPartParser, FormParser]

    def initial(self, request, *args, **kwargs):
        if request.method == "POST":
            cap = settings.GATEWAY_OPENAI_MAX_FILE_BYTES
            length = int(request.META.get("CONTENT_LENGTH") or 0)
            if length > cap + MULTIPART_SLACK:
                # refuse before reading the body (after authentication, so a stranger learns nothing)
                self.perform_authentication(request)
                raise UploadTooLarge(
                    413, f"request is {length} bytes; files are at most {cap} bytes", param="file"
                )
        super().initial(request, *args, **kwargs)

    def initialize_request(self, request, *args, **kwargs):
        """The Django request, before DRF wraps it: an upload is cut off at the cap while it is read."""
        if request.method == "POST":
            request.upload_handlers.insert(
                0, SizeCapUploadHandler(request, settings.GATEWAY_OPENAI_MAX_FILE_BYTES)
            )
        return super().initialize_request(request, *args, **kwargs)

    @extend_schema(
        tags=TAG,
        operation_id="openai_files_list",
        summary="List the team's files (OpenAI-compatible)",
        parameters=[OpenAIFileListQuerySerializer],
        responses={200: OpenAIFileListSerializer, **BAD_REQUEST, **AUTH_ERRORS},
    )
    def get(self, request):
        query = OpenAIFileListQuerySerializer(data=request.query_params)
        if not query.is_valid():
            raise _invalid(query)
        params = query.validated_data
        qs = selectors.files_for_team(self.team, purpose=params.get("purpose"), order=params["order"])
        rows, more = selectors.list_page(
            qs, params.get("after"), params["limit"], descending=params["order"] == "desc"
        )
        data = [selectors.file_object(f) for f in rows]
        return Response(OpenAIFileListSerializer(_list(data, more)).data)

    @extend_schema(
        tags=TAG,
        operation_id="openai_files_create",
        summary="Upload a batch input file (OpenAI-compatible)",
        description=(
            "Multipart fields `file` (JSONL, one OpenAI batch request per line) and `purpose=batch`. "
            "Streamed to the files storage; at most GATEWAY_OPENAI_MAX_FILE_BYTES (default 200 MB). "
            "A file that is not JSONL (not UTF-8, or a line that does not start a JSON object) is a 400 "
            "naming the line. The file expires GATEWAY_FILES_EXPIRE_DAYS (default 30) days later "
            "(`expires_at`)."
        ),
        request={"multipart/form-data": OpenAIFileUploadSerializer},
        responses={
            200: OpenAIFileObjectSerializer,
            **BAD_REQUEST,
            413: OpenApiResponse(ERR, description="The file is larger than the cap."),
            415: OpenApiResponse(ERR, description="Not a multipart/form-data body."),
            **AUTH_ERRORS,
            429: OpenApiResponse(
                ERR,
                description=(
                    "Too many requests for this API key (see Retry-After), or the team's file quota "
                    "(`code` file_quota_exceeded, `param` limits.stored_files | limits.stored_file_bytes; "
                    "`x-should-retry: false`): nothing is stored."
                ),
            ),
        },
    )
    def post(self, request):
        form = OpenAIFileUploadSerializer(data=request.data)
        if not form.is_valid():
            raise _invalid(form)
        file = files.upload_file(
            team=self.team, upload=form.validated_data["file"], purpose=form.validated_data["purpose"]
        )
        return Response(OpenAIFileObjectSerializer(selectors.file_object(file)).data)


class FileDetailView(OpenAIView):
    @extend_schema(
        tags=TAG,
        operation_id="openai_files_retrieve",
        summary="A file's metadata (OpenAI-compatible)",
        responses={200: OpenAIFileObjectSerializer, **FILE_NOT_FOUND, **AUTH_ERRORS},
    )
    def get(self, request, file_id):
        return Response(OpenAIFileObjectSerializer(selectors.file_object(self.get_file(file_id))).data)

    @extend_schema(
        tags=TAG,
        operation_id="openai_files_delete",
        summary="Delete a file (OpenAI-compatible)",
        responses={200: OpenAIFileDeletedSerializer, **FILE_NOT_FOUND, **AUTH_ERRORS},
    )
    def delete(self, request, file_id):
        file = self.get_file(file_id)
        files.delete_file(file)
        return Response(OpenAIFileDeletedSerializer({"id": file_id, "object": "file", "deleted": True}).data)


class FileContentView(OpenAIView):
    @extend_schema(
        tags=TAG,
        operation_id="openai_files_content",
        summary="A file's content, streamed (OpenAI-compatible)",
        responses={
            (200, "application/octet-stream"): OpenApiResponse(OpenApiTypes.BINARY, description="The JSONL."),
            **FILE_NOT_FOUND,
            **AUTH_ERRORS,
        },
    )
    def get(self, request, file_id):
        file = self.get_file(file_id)
        try:
            stream = files.file_storage().open(file.storage_name, "rb")
        except FileNotFoundError:  # purged between the lookup and the read
            raise OpenAIError(404, f"No such File object: {file_id}", param="id", code="not_found") from None
        return FileResponse(
            stream, as_attachment=True, filename=file.filename, content_type="application/octet-stream"
        )


class BatchesView(OpenAIView):
    @extend_schema(
        tags=TAG,
        operation_id="openai_batches_list",
        summary="List the team's batches, newest first (OpenAI-compatible)",
        parameters=[OpenAIBatchListQuerySerializer],
        responses={200: OpenAIBatchListSerializer, **BAD_REQUEST, **AUTH_ERRORS},
    )
    def get(self, request):
        query = OpenAIBatchListQuerySerializer(data=request.query_params)
        if not query.is_valid():
            raise _invalid(query)
        params = query.validated_data
        rows, more = selectors.list_page(
            selectors.batches_for_team(self.team), params.get("after"), params["limit"]
        )
        data = [selectors.batch_object(services.refresh_batch(ob)) for ob in rows]
        return Response(OpenAIBatchListSerializer(_list(data, more)).data)

    @extend_schema(
        tags=TAG,
        operation_id="openai_batches_create",
        summary="Create a batch from an uploaded input file (OpenAI-compatible)",
        description=(
            "Validates the input file and submits it as a native batch (answered `in_progress`). An invalid "
            "file gives a `failed` batch whose `errors` name each bad line; nothing runs. Each line's "
            "`body.model` names a route (or else a provider). `completion_window` is the deadline "
            "('24h', '1h', '15m', …); `priority` (high|normal|low), `cache` (true|false: the response "
            "cache, docs/cache.md) and `webhook_url` (a signed event when the batch ends, docs/webhooks.md) "
            "are gateway extensions."
        ),
        request=OpenAIBatchCreateSerializer,
        examples=[
            OpenApiExample(
                "create",
                request_only=True,
                value={
                    "input_file_id": "file-0123456789abcdef0123456789abcdef",
                    "endpoint": "/v1/chat/completions",
                    "completion_window": "1h",
                    "metadata": {"job": "nightly"},
                },
            )
        ],
        responses={200: OpenAIBatchSerializer, **BAD_REQUEST, **FILE_NOT_FOUND, **AUTH_ERRORS},
    )
    def post(self, request):
        form = OpenAIBatchCreateSerializer(data=request.data)
        if not form.is_valid():
            raise _invalid(form)
        params = form.validated_data
        try:
            input_file = selectors.get_file_for_team(self.team, params["input_file_id"])
        except File.DoesNotExist:
            raise OpenAIError(
                404,
                f"No such File object: {params['input_file_id']}",
                param="input_file_id",
                code="not_found",
            ) from None
        ob = services.create_batch_idempotent(
            team=self.team,
            api_key=request.auth,
            key=request.headers.get("Idempotency-Key"),
            body=request.data,
            request=services.BatchRequest(
                input_file=input_file,
                endpoint=params["endpoint"],
                completion_window=params["completion_window"],
                metadata=params.get("metadata"),
                priority=params.get("priority"),
                webhook_url=params.get("webhook_url"),
                cache=params.get("cache"),
                provider_batch=params.get("provider_batch"),
            ),
        )
        ob = services.refresh_batch(selectors.get_batch_for_team(self.team, ob.id))
        return Response(OpenAIBatchSerializer(selectors.batch_object(ob)).data)


class BatchDetailView(OpenAIView):
    @extend_schema(
        tags=TAG,
        operation_id="openai_batches_retrieve",
        summary="A batch (OpenAI-compatible)",
        description="Once the native batch has ended, the first read writes the output and error files.",
        responses={200: OpenAIBatchSerializer, **BATCH_NOT_FOUND, **AUTH_ERRORS},
    )
    def get(self, request, batch_id):
        ob = services.refresh_batch(self.get_openai_batch(batch_id))
        return Response(OpenAIBatchSerializer(selectors.batch_object(ob)).data)


class BatchCancelView(OpenAIView):
    @extend_schema(
        tags=TAG,
        operation_id="openai_batches_cancel",
        summary="Cancel a batch (OpenAI-compatible)",
        description=(
            "`cancelling` until in-flight requests finish, then `cancelled`; requests not yet sent get an "
            "error-file line with code `batch_cancelled`. A batch that already ended is a 409."
        ),
        request=None,
        responses={
            200: OpenAIBatchSerializer,
            **BATCH_NOT_FOUND,
            409: OpenApiResponse(ERR, description="The batch already ended."),
            **AUTH_ERRORS,
        },
    )
    def post(self, request, batch_id):
        ob = services.cancel_batch(self.get_openai_batch(batch_id))
        return Response(OpenAIBatchSerializer(selectors.batch_object(ob)).data)
