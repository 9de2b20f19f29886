"""Security settings (#29, #41; gateway_site/security.py): provider keys at rest, trusted proxies, the
failed-key throttle, request-body and stream bounds, the admin lockout and the Content-Security-Policy.
Read from the environment through env.py's typed helpers like every setting; ``base`` imports them all
(``from .security import *``), so every settings module has them."""

from __future__ import annotations

from datetime import timedelta

import csp.constants as csp

from gateway_site.env import env_fernet_keys, env_float, env_int, env_list
from gateway_site.security import parse_networks as _parse_networks

# --- security (#29; gateway_site/security.py) ------------------------------------------------------
# Provider keys at rest (providers/secrets.py): Fernet keys, comma-separated, newest first; the newest
# seals, every one opens (rotation: put a new key first, run `manage.py rotate_provider_keys`, then drop
# the old one). Required in production; the local and test settings derive one from SECRET_KEY when unset.
GATEWAY_SECRET_KEYS = env_fernet_keys("GATEWAY_SECRET_KEYS")
# Client IP: X-Forwarded-For is read only when the peer is one of these proxies (addresses or CIDRs,
# comma-separated), rightmost untrusted hop first; unset = REMOTE_ADDR, the header is ignored.
GATEWAY_TRUSTED_PROXIES = _parse_networks(env_list("GATEWAY_TRUSTED_PROXIES", []))
# Failed API-key checks per client IP per window (fixed windows): past the limit the address answers 429
# with Retry-After before any key lookup, until its window ends. 0 = off.
GATEWAY_AUTH_FAILURE_LIMIT = env_int("GATEWAY_AUTH_FAILURE_LIMIT", 30, minimum=0)
GATEWAY_AUTH_FAILURE_WINDOW_SECONDS = env_int(
    "GATEWAY_AUTH_FAILURE_WINDOW_SECONDS", 60, minimum=1, maximum=86_400
)
# Ingress (gateway_site/ingress.py, docs/operations.md "Request bodies and streams"): on /api/ and /v1/ an
# Authorization header is checked before any body byte is read; a request without a valid key may send at
# most GATEWAY_PREAUTH_MAX_BODY_BYTES. A body must keep arriving (no gap longer than the idle timeout) and
# be complete within the read timeout, else 408 and the connection is closed. A streamed answer ends after
# GATEWAY_STREAM_MAX_SECONDS; a client that reads a stream so slowly that one chunk cannot be written for
# GATEWAY_STREAM_SEND_TIMEOUT_SECONDS is cut (the call's lease and provider connection are released).
GATEWAY_PREAUTH_MAX_BODY_BYTES = env_int("GATEWAY_PREAUTH_MAX_BODY_BYTES", 64 * 1024, minimum=1024)
GATEWAY_BODY_IDLE_TIMEOUT_SECONDS = env_float(
    "GATEWAY_BODY_IDLE_TIMEOUT_SECONDS", 30.0, minimum=0.1, maximum=3600.0
)
GATEWAY_BODY_READ_TIMEOUT_SECONDS = env_float(
    "GATEWAY_BODY_READ_TIMEOUT_SECONDS", 300.0, minimum=0.1, maximum=86_400.0
)
GATEWAY_STREAM_MAX_SECONDS = env_float("GATEWAY_STREAM_MAX_SECONDS", 900.0, minimum=0.1, maximum=86_400.0)
GATEWAY_STREAM_SEND_TIMEOUT_SECONDS = env_float(
    "GATEWAY_STREAM_SEND_TIMEOUT_SECONDS", 30.0, minimum=0.1, maximum=3600.0
)
# Admin login lockout (django-axes, attempts in the database): this many failed logins for one
# (client IP, username) lock that pair for the cool-off; a successful login clears its failures.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("GATEWAY_ADMIN_LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("GATEWAY_ADMIN_LOCKOUT_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = [["ip_address", "username"]]
AXES_CLIENT_IP_CALLABLE = "gateway_site.security.client_ip"
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False  # no "AXES: BEGIN" line from every process; failures and lockouts are still logged
# Content-Security-Policy (django-csp) on every page but Swagger UI (/api/docs/, drf-spectacular's inline
# script): the admin's and dashboards' own static scripts and styles, nothing inline, nothing foreign.
CONTENT_SECURITY_POLICY = {
    "EXCLUDE_URL_PREFIXES": ["/api/docs/"],
    "DIRECTIVES": {
        "default-src": [csp.SELF],
        "script-src": [csp.SELF],
        "style-src": [csp.SELF],
        "img-src": [csp.SELF],
        "font-src": [csp.SELF],
        "connect-src": [csp.SELF],
        "object-src": [csp.NONE],
        "base-uri": [csp.SELF],
        "form-action": [csp.SELF],
        "frame-ancestors": [csp.NONE],
    },
}
