"""Development and demo settings: DEBUG on unless told otherwise."""

from gateway_site.env import derived_fernet_key, env_bool

from .base import *  # noqa: F403

DEBUG = env_bool("DJANGO_DEBUG", True)
# provider keys at rest: a key derived from SECRET_KEY unless GATEWAY_SECRET_KEYS is set (never in production)
if not GATEWAY_SECRET_KEYS:  # noqa: F405
    GATEWAY_SECRET_KEYS = [derived_fernet_key(SECRET_KEY)]  # noqa: F405
