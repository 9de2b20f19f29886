"""drf-spectacular extension: documents ApiKeyAuthentication as HTTP bearer auth."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "batches.api.auth.ApiKeyAuthentication"
    name = "ApiKeyAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "bgw_<43 url-safe characters>",
            "description": (
                "An API key from `manage.py create_api_key --team NAME`, sent as "
                "`Authorization: Bearer <key>`. Every request is scoped to the key's team."
            ),
        }
