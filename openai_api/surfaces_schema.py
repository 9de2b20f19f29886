"""``POST /v1/responses`` and ``POST /v1/messages`` in the OpenAPI document, beside the chat lane's
(openai_api/interactive_schema.py adds ``SURFACE_ENDPOINTS`` in its preprocessing hook). Documentation
only: interactive/views.py serves them (their translation: interactive/surfaces/, docs/interactive.md)."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.views import APIView

from batches.api.auth import ApiKeyAuthentication

from .serializers import OpenAIErrorSerializer

TAG = ["OpenAI-compatible (/v1)"]
RESPONSES_PATH, MESSAGES_PATH = "/v1/responses", "/v1/messages"


class ResponsesRequestSerializer(serializers.Serializer):
    model = serializers.CharField(help_text="A route of the gateway, else a provider (GET /v1/models).")
    input = serializers.JSONField(
        help_text="A string, or input items (message, function_call, function_call_output)."
    )
    instructions = serializers.CharField(required=False, help_text="A leading system message.")
    tools = serializers.ListField(
        child=serializers.DictField(), required=False, help_text="Function tools only."
    )
    tool_choice = serializers.JSONField(required=False)
    text = serializers.DictField(required=False, help_text="`format`: text, json_object or json_schema.")
    max_output_tokens = serializers.IntegerField(required=False, min_value=1)
    temperature = serializers.FloatField(required=False)
    top_p = serializers.FloatField(required=False)
    metadata = serializers.DictField(required=False, help_text="Echoed in the Response.")
    store = serializers.BooleanField(required=False, help_text="Accepted; nothing is stored (stateless).")
    stream = serializers.BooleanField(required=False, default=False, help_text="The Responses event stream.")


class ResponseSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="resp_…")
    object = serializers.CharField(help_text='Always "response".')
    created_at = serializers.IntegerField()
    status = serializers.CharField(help_text="completed, incomplete (or failed in a stream).")
    model = serializers.CharField()
    output = serializers.ListField(
        child=serializers.DictField(), help_text="message and function_call items."
    )
    usage = serializers.DictField(help_text="input_tokens, output_tokens, total_tokens.")


class AnthropicMessagesRequestSerializer(serializers.Serializer):
    model = serializers.CharField(help_text="A route of the gateway, else a provider.")
    max_tokens = serializers.IntegerField(min_value=1)
    messages = serializers.ListField(
        child=serializers.DictField(), help_text="user / assistant turns, content blocks."
    )
    system = serializers.JSONField(
        required=False, help_text="A string or text blocks (cache_control carried)."
    )
    tools = serializers.ListField(child=serializers.DictField(), required=False)
    tool_choice = serializers.DictField(required=False)
    stop_sequences = serializers.ListField(child=serializers.CharField(), required=False)
    temperature = serializers.FloatField(required=False)
    top_p = serializers.FloatField(required=False)
    metadata = serializers.DictField(required=False, help_text="user_id only.")
    stream = serializers.BooleanField(required=False, default=False, help_text="Anthropic's event stream.")


class AnthropicMessageSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="msg_…")
    type = serializers.CharField(help_text='Always "message".')
    role = serializers.CharField()
    model = serializers.CharField()
    content = serializers.ListField(child=serializers.DictField(), help_text="text and tool_use blocks.")
    stop_reason = serializers.CharField(help_text="end_turn, max_tokens, tool_use, refusal.")
    usage = serializers.DictField(help_text="input_tokens, output_tokens, cache_read/creation_input_tokens.")


class AnthropicErrorDetailSerializer(serializers.Serializer):
    type = serializers.CharField(help_text="invalid_request_error, authentication_error, not_found_error, …")
    message = serializers.CharField()


class AnthropicErrorSerializer(serializers.Serializer):
    type = serializers.CharField(help_text='Always "error".')
    error = AnthropicErrorDetailSerializer()


def _errors(serializer: type[serializers.Serializer], overloaded: int) -> dict:
    texts = {400: "Invalid request: the message names the field.", 401: "No, invalid or revoked API key.",
             404: "No route or provider of that name.", 429: "No quota within the max wait, the team's budget, "
             "the provider's 429s (Retry-After).", overloaded: "Overloaded: every provider, or Redis, unavailable."}  # fmt: skip
    return {code: OpenApiResponse(serializer, description=text) for code, text in texts.items()}


class _Doc(APIView):
    authentication_classes = [ApiKeyAuthentication]
    permission_classes = [IsAuthenticated]


class ResponsesDoc(_Doc):
    @extend_schema(
        tags=TAG, operation_id="openai_responses_create", request=ResponsesRequestSerializer,
        summary="A response through the interactive lane (OpenAI's Responses API, stateless)",
        description="Translated to a chat call on the same pool (docs/interactive.md); previous_response_id "
        "and conversation are refused (nothing is stored). `stream: true`: response.* events.",
        responses={(200, "application/json"): ResponseSerializer,
                   (200, "text/event-stream"): OpenApiResponse(OpenApiTypes.STR, description="response.* events."),
                   **_errors(OpenAIErrorSerializer, 503)},
    )  # fmt: skip
    def post(self, request):  # pragma: no cover - documentation only (interactive.views serves it)
        raise NotImplementedError


class MessagesDoc(_Doc):
    @extend_schema(
        tags=TAG, operation_id="anthropic_messages_create", request=AnthropicMessagesRequestSerializer,
        summary="A message through the interactive lane (Anthropic's Messages API)",
        description="For the anthropic SDK with base_url the gateway; the key as Bearer or x-api-key. "
        "Errors in Anthropic's shape (503 → 529 overloaded_error). `stream: true`: Anthropic's events.",
        responses={(200, "application/json"): AnthropicMessageSerializer,
                   (200, "text/event-stream"): OpenApiResponse(OpenApiTypes.STR, description="message_* events."),
                   **_errors(AnthropicErrorSerializer, 529)},
    )  # fmt: skip
    def post(self, request):  # pragma: no cover - documentation only (interactive.views serves it)
        raise NotImplementedError


SURFACE_ENDPOINTS = [
    (RESPONSES_PATH, "^v1/responses$", "POST", ResponsesDoc.as_view()),
    (MESSAGES_PATH, "^v1/messages$", "POST", MessagesDoc.as_view()),
]
