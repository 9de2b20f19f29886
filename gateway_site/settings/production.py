"""Production settings (wsgi, Celery): refuse to start with a development or example secret, or
without REDIS_URL; secure cookies and HSTS whenever DJANGO_SECURE_SSL_REDIRECT is on, and a loud
start-up warning when it is off (plain-HTTP runs on one machine keep working, docs/contract.md §2)."""

from django.core.exceptions import ImproperlyConfigured

from .base import *  # noqa: F403
from .base import (
    DEV_SECRET_KEY,
    GATEWAY_METRICS_PUBLIC,
    GATEWAY_METRICS_TOKEN,
    GATEWAY_SECRET_KEYS,
    REDIS_URL,
    SECRET_KEY,
    SECURE_SSL_REDIRECT,
)

# Placeholders shipped in this repository (.env.example, docs): never a real secret.
EXAMPLE_SECRET_MARKERS = ("change-me", "changeme", "dev-insecure", "example", "placeholder", "your-secret")

if not SECRET_KEY or SECRET_KEY == DEV_SECRET_KEY:
    raise ImproperlyConfigured(
        "DJANGO_SECRET_KEY must be set to a long random value in production "
        "(python -c 'import secrets; print(secrets.token_urlsafe(50))')"
    )
if any(marker in SECRET_KEY.lower() for marker in EXAMPLE_SECRET_MARKERS):
    raise ImproperlyConfigured(
        "DJANGO_SECRET_KEY is the example placeholder (from .env.example or the docs); set a long random "
        "value (python -c 'import secrets; print(secrets.token_urlsafe(50))')"
    )
if len(SECRET_KEY) < 32:
    raise ImproperlyConfigured("DJANGO_SECRET_KEY is too short: use at least 32 random characters")
if len(set(SECRET_KEY)) < 10:
    raise ImproperlyConfigured("DJANGO_SECRET_KEY is not random (fewer than 10 distinct characters)")
if not REDIS_URL:
    raise ImproperlyConfigured(
        "REDIS_URL is required in production: shared token buckets, leases, breakers and the Celery "
        "broker live in Redis (single-process mode is for gateway_site.settings.local only)"
    )
# provider keys are stored sealed with these keys (providers/secrets.py): no default in production
if not GATEWAY_SECRET_KEYS:
    raise ImproperlyConfigured(
        "GATEWAY_SECRET_KEYS must be set in production: provider keys are stored encrypted with it "
        "(comma-separated Fernet keys, newest first; make one with python -c 'from cryptography.fernet "
        "import Fernet; print(Fernet.generate_key().decode())'). Keep it apart from the database backups."
    )
# /metrics labels carry team names with their token counts and cost (#29): a token, or an explicit
# GATEWAY_METRICS_PUBLIC=on where /metrics is reachable only on an internal listener (docs/operations.md).
if not GATEWAY_METRICS_TOKEN and not GATEWAY_METRICS_PUBLIC:
    raise ImproperlyConfigured(
        "GATEWAY_METRICS_TOKEN must be set in production, because /metrics shows every team's token "
        "counts and cost: set it to a long random value (python -c 'import secrets; "
        "print(secrets.token_urlsafe(32))') and give Prometheus the same bearer token, or set "
        "GATEWAY_METRICS_PUBLIC=on if /metrics is reachable only from an internal network"
    )
if GATEWAY_METRICS_TOKEN and (len(GATEWAY_METRICS_TOKEN) < 16 or len(set(GATEWAY_METRICS_TOKEN)) < 8):
    raise ImproperlyConfigured(
        "GATEWAY_METRICS_TOKEN is too short or not random: use at least 16 random characters "
        "(python -c 'import secrets; print(secrets.token_urlsafe(32))')"
    )

# Plain HTTP keeps working, with a warning that the web app (gateway_site/wsgi.py) logs once when its
# process starts; management commands and workers, which set no cookies, do not repeat it (#28).
GATEWAY_START_WARNINGS = (
    []
    if SECURE_SSL_REDIRECT
    else [
        "DJANGO_SECURE_SSL_REDIRECT is off: session and CSRF cookies are not marked secure and no HSTS "
        "is sent. Fine for plain HTTP on one machine; behind TLS set DJANGO_SECURE_SSL_REDIRECT=on."
    ]
)
