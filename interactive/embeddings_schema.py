"""``POST /v1/embeddings`` in the OpenAPI document (/api/schema/): like the chat lane's operations
(openai_api/interactive_schema.py) it is served outside DRF (gateway_site.asgi_interactive), so a
drf-spectacular preprocessing hook (SPECTACULAR_SETTINGS["PREPROCESSING_HOOKS"]) adds this
documentation-only view. Its errors are the ``OpenAIError`` component the /v1 serializers define."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.views import APIView

from batches.api.auth import ApiKeyAuthentication

from .calls import MAX_WAIT_HEADER

PATH = "/v1/embeddings"
OPENAI_ERROR = {"$ref": "#/components/schemas/OpenAIError"}  # openai_api/serializers.py


class EmbeddingsRequestSerializer(serializers.Serializer):
    model = serializers.CharField(help_text="A route of the gateway, else a provider (GET /v1/models).")
    input = serializers.JSONField(
        help_text="A non-empty string, or a list of non-empty strings (at most what one request of every "
        "provider the model can reach takes: 2,048 for OpenAI and Azure, 100 for Gemini); OpenAI's token "
        "arrays for OpenAI and Azure providers."
    )
    dimensions = serializers.IntegerField(required=False, min_value=1)
    encoding_format = serializers.ChoiceField(choices=["float", "base64"], required=False)
    user = serializers.CharField(required=False, help_text="Kinds openai and azure_openai only.")


class EmbeddingSerializer(serializers.Serializer):
    object = serializers.CharField(help_text='Always "embedding".')
    index = serializers.IntegerField()
    embedding = serializers.JSONField(help_text="A list of floats, or base64 (little-endian float32).")


class EmbeddingsUsageSerializer(serializers.Serializer):
    prompt_tokens = serializers.IntegerField()
    total_tokens = serializers.IntegerField()


class EmbeddingsAnswerSerializer(serializers.Serializer):
    object = serializers.CharField(help_text='Always "list".')
    data = EmbeddingSerializer(many=True)
    model = serializers.CharField()
    usage = EmbeddingsUsageSerializer()


def _error(text: str) -> OpenApiResponse:
    return OpenApiResponse(OPENAI_ERROR, description=text)


class EmbeddingsDoc(APIView):
    # documentation only (nothing routes here): the bearer key the interactive lane checks
    authentication_classes = [ApiKeyAuthentication]
    permission_classes = [IsAuthenticated]

    @extend_schema(
        tags=["OpenAI-compatible (/v1)"],
        operation_id="openai_embeddings_create",
        summary="Embeddings through the interactive lane (OpenAI-compatible)",
        description=(
            "OpenAI's embeddings request and answer on the batches' shared quota pool (routing, "
            "fallbacks, breaker, buckets: input tokens only, no completion). `model` names a route, else a "
            "provider; every provider it can reach must serve embeddings (kinds openai, azure_openai, "
            "gemini: docs/providers.md) and take the params and the input. No streaming."
        ),
        request=EmbeddingsRequestSerializer,
        parameters=[
            OpenApiParameter(
                MAX_WAIT_HEADER,
                float,
                OpenApiParameter.HEADER,
                required=False,
                description="Seconds this call may wait for quota.",
            )
        ],  # fmt: skip
        responses={
            200: EmbeddingsAnswerSerializer,
            400: _error(
                "Invalid request (`param` names the field: `input`, `input[i]`, `dimensions`, …), "
                "a provider kind without embeddings (`model`), or the provider refused it."
            ),  # fmt: skip
            401: _error("No, invalid or revoked API key."),
            404: _error("`model_not_found`: no route or provider of that name."),
            429: _error("`gateway_queue_timeout`, the team's budget, `gateway_busy`; see Retry-After."),
            502: _error("The provider failed after retries."),
            503: _error("The provider is overloaded, or Redis (the quota pool) is down."),
        },
    )
    def post(self, request):  # pragma: no cover - documentation only (interactive.views.embeddings serves it)
        raise NotImplementedError


def add_embeddings_endpoint(endpoints: list) -> list:
    """drf-spectacular preprocessing hook: POST /v1/embeddings, documented here."""
    return [*endpoints, (PATH, "^v1/embeddings$", "POST", EmbeddingsDoc.as_view())]
