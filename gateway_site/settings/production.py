"""Production settings: refuse to start with the development secret."""

from django.core.exceptions import ImproperlyConfigured

from .base import *  # noqa: F403
from .base import DEV_SECRET_KEY, SECRET_KEY

if not SECRET_KEY or SECRET_KEY == DEV_SECRET_KEY:
    raise ImproperlyConfigured(
        "DJANGO_SECRET_KEY must be set to a long random value in production "
        "(python -c 'import secrets; print(secrets.token_urlsafe(50))')"
    )
if len(SECRET_KEY) < 32:
    raise ImproperlyConfigured("DJANGO_SECRET_KEY is too short: use at least 32 random characters")
