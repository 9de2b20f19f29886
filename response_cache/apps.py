from django.apps import AppConfig


class ResponseCacheConfig(AppConfig):
    """The response cache and in-flight dedup (issue #25, docs/cache.md)."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "response_cache"
    verbose_name = "response cache"
