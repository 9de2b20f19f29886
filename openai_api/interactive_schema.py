"""``POST /v1/chat/completions`` and ``GET /v1/models`` in the OpenAPI document (/api/schema/, Swagger UI
at /api/docs/). They are served by the interactive lane's own ASGI path (gateway_site.asgi_interactive,
interactive/views.py), not by DRF, so drf-spectacular does not find them in the URL conf: the
preprocessing hook ``add_interactive_endpoints`` (SPECTACULAR_SETTINGS["PREPROCESSING_HOOKS"]) adds
the documentation-only views below. Nothing routes to them; they only carry the request and answer
shapes, the errors (docs/interactive.md has the table) and the bearer key."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.views import APIView

from batches.api.auth import ApiKeyAuthentication
from interactive.calls import MAX_WAIT_HEADER

from .serializers import OpenAIErrorSerializer
from .surfaces_schema import SURFACE_ENDPOINTS

CHAT_PATH, MODELS_PATH = "/v1/chat/completions", "/v1/models"
TAG = ["OpenAI-compatible (/v1)"]
ERR = OpenAIErrorSerializer


class ChatMessageSerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=["system", "developer", "user", "assistant", "tool"])
    content = serializers.JSONField(
        allow_null=True, help_text="A string, or an array of content parts (text, image_url, …)."
    )
    name = serializers.CharField(required=False)
    tool_calls = serializers.ListField(child=serializers.DictField(), required=False)
    tool_call_id = serializers.CharField(required=False)


class StreamOptionsSerializer(serializers.Serializer):
    include_usage = serializers.BooleanField(
        required=False, help_text="Send a last chunk with `usage` (and `choices: []`)."
    )


class ChatCompletionRequestSerializer(serializers.Serializer):
    model = serializers.CharField(help_text="A route of the gateway, else a provider (GET /v1/models).")
    messages = ChatMessageSerializer(many=True)
    stream = serializers.BooleanField(required=False, default=False, help_text="Server-Sent Events.")
    stream_options = StreamOptionsSerializer(required=False, help_text="Only with `stream: true`.")
    max_tokens = serializers.IntegerField(required=False, min_value=1)
    max_completion_tokens = serializers.IntegerField(required=False, min_value=1)
    temperature = serializers.FloatField(required=False)
    top_p = serializers.FloatField(required=False)
    n = serializers.IntegerField(required=False, min_value=1)
    stop = serializers.JSONField(required=False, help_text="A string or an array of strings.")
    tools = serializers.ListField(child=serializers.DictField(), required=False)
    tool_choice = serializers.JSONField(required=False)
    response_format = serializers.DictField(required=False)
    seed = serializers.IntegerField(required=False)
    user = serializers.CharField(required=False)


class ChatCompletionMessageSerializer(serializers.Serializer):
    role = serializers.CharField(help_text='Always "assistant".')
    content = serializers.CharField(allow_null=True)
    tool_calls = serializers.ListField(child=serializers.DictField(), required=False)


class ChatCompletionChoiceSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    message = ChatCompletionMessageSerializer()
    finish_reason = serializers.CharField(allow_null=True, help_text="stop, length, tool_calls, …")


class ChatCompletionUsageSerializer(serializers.Serializer):
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    total_tokens = serializers.IntegerField()


class ChatCompletionSerializer(serializers.Serializer):
    id = serializers.CharField()
    object = serializers.CharField(help_text='Always "chat.completion".')
    created = serializers.IntegerField(help_text="Unix seconds.")
    model = serializers.CharField()
    choices = ChatCompletionChoiceSerializer(many=True)
    usage = ChatCompletionUsageSerializer()


class ModelSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="A valid `model` value of POST /v1/chat/completions.")
    object = serializers.CharField(help_text='Always "model".')
    created = serializers.IntegerField(help_text="Unix seconds.")
    owned_by = serializers.CharField(help_text='"route", or "provider:<kind>" for a provider.')
    endpoints = serializers.ListField(
        child=serializers.ChoiceField(choices=["chat", "embeddings", "responses", "messages"]),
        help_text="The surfaces this model serves: chat (/v1/chat/completions), embeddings (/v1/embeddings: "
        "every provider it reaches has an embeddings API), responses (/v1/responses), messages (/v1/messages).",
    )


class ModelListSerializer(serializers.Serializer):
    object = serializers.CharField(help_text='Always "list".')
    data = ModelSerializer(many=True)


def _error(text: str) -> OpenApiResponse:
    return OpenApiResponse(ERR, description=text)


ANSWER_HEADERS = [
    OpenApiParameter(
        "x-gateway-provider",
        str,
        OpenApiParameter.HEADER,
        response=[200],
        description="The provider that answered.",
    ),
    OpenApiParameter(
        "x-gateway-attempts",
        int,
        OpenApiParameter.HEADER,
        response=[200],
        description="Attempts the call took (retries and fallbacks included).",
    ),
]
CHAT_ERRORS = {
    400: _error(
        "Invalid request (`param` names the field), a param a reachable provider refuses, a bad "
        f"{MAX_WAIT_HEADER}, `quota_impossible`, or the provider refused it."
    ),
    401: _error("No, invalid or revoked API key."),
    404: _error("`model_not_found`: no route or provider of that name (with a hint)."),
    413: _error("The body is larger than GATEWAY_MAX_BODY_BYTES."),
    429: _error(
        "`gateway_queue_timeout` (no quota within the max wait; the provider never saw the call), "
        "`insufficient_quota` (the team's budget), `provider_rate_limited`, `gateway_busy`; "
        "see Retry-After."
    ),
    502: _error("The provider failed (server error, invalid answer, connection) after retries."),
    503: _error(
        "The provider is overloaded or out of quota, no provider, or Redis (the quota pool) is "
        "down (`quota_store_unavailable`, Retry-After)."
    ),
    504: _error("The provider timed out."),
}


class InteractiveDocView(APIView):
    # documentation only (nothing routes here): the bearer key the interactive lane checks

    authentication_classes = [ApiKeyAuthentication]
    permission_classes = [IsAuthenticated]


class ChatCompletionsDoc(InteractiveDocView):
    @extend_schema(
        tags=TAG,
        operation_id="openai_chat_completions_create",
        summary="A chat completion through the interactive lane (OpenAI-compatible)",
        description=(
            "Served in the web process on the batches' shared quota pool (routing, fallbacks, breaker, "
            "RPM/TPM buckets, leases, team share and budget, retries). `model` names a route, else a "
            "provider; every field but `model`, `messages`, `stream` and `stream_options` is passed on as "
            "the item's params and checked against every provider the model can reach. With "
            "`stream: true` the answer is Server-Sent Events of `chat.completion.chunk` objects ending "
            "with `data: [DONE]` (docs/interactive.md)."
        ),
        request=ChatCompletionRequestSerializer,
        parameters=[
            OpenApiParameter(
                MAX_WAIT_HEADER,
                float,
                OpenApiParameter.HEADER,
                required=False,
                description="Seconds this call may wait for quota (at most, and by default, "
                "GATEWAY_INTERACTIVE_MAX_WAIT_SECONDS; 0: served only if quota is there now).",
            ),
            *ANSWER_HEADERS,
        ],  # fmt: skip
        responses={
            (200, "application/json"): ChatCompletionSerializer,
            (200, "text/event-stream"): OpenApiResponse(
                OpenApiTypes.STR, description="`stream: true`: `data: {chat.completion.chunk}` events."
            ),
            **CHAT_ERRORS,
        },
    )
    def post(self, request):  # pragma: no cover - documentation only (interactive.views serves it)
        raise NotImplementedError


class ModelsDoc(InteractiveDocView):
    @extend_schema(
        tags=TAG,
        operation_id="openai_models_list",
        summary="The routes and providers a call may name (OpenAI-compatible)",
        description="The team's routes (`owned_by: route`) and enabled providers (`owned_by: "
        "provider:<kind>`) as OpenAI model objects, sorted by id; both are valid `model` values.",
        responses={
            200: ModelListSerializer,
            401: CHAT_ERRORS[401],
            429: _error("Too many failed key checks from this address (see Retry-After)."),
            503: _error("Redis or the database is down (Retry-After)."),
        },  # fmt: skip
    )
    def get(self, request):  # pragma: no cover - documentation only (interactive.views serves it)
        raise NotImplementedError


ENDPOINTS = [
    (CHAT_PATH, "^v1/chat/completions$", "POST", ChatCompletionsDoc.as_view()),
    (MODELS_PATH, "^v1/models$", "GET", ModelsDoc.as_view()),
]


def add_interactive_endpoints(endpoints: list) -> list:
    """drf-spectacular preprocessing hook: the interactive lane's operations, documented here and in
    surfaces_schema.py."""
    return [*endpoints, *ENDPOINTS, *SURFACE_ENDPOINTS]
