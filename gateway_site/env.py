"""Typed, loud environment readers.

Every setting that comes from the environment is read through one of these helpers, so a bad value
fails at start-up with the variable's name instead of surfacing later as a confusing behaviour.
"""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    return default if value is None else value


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(
        f"{name}={raw!r} is not a boolean (use one of 1/0, true/false, yes/no, on/off)"
    )


def _env_number(name, default, parse, kind: str, minimum, maximum):
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        value = default
    else:
        try:
            value = parse(raw.strip())
        except ValueError:
            raise ImproperlyConfigured(f"{name}={raw!r} is not {kind}") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} is below the minimum {minimum}")
    if maximum is not None and value > maximum:
        raise ImproperlyConfigured(f"{name}={value} is above the maximum {maximum}")
    return value


def env_int(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    return _env_number(name, default, int, "an integer", minimum, maximum)


def env_float(
    name: str, default: float, *, minimum: float | None = None, maximum: float | None = None
) -> float:
    return _env_number(name, default, float, "a number", minimum, maximum)


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return list(default)
    return [part.strip() for part in raw.split(",") if part.strip()]


def env_url(name: str, default: str | None, *, schemes: tuple[str, ...]) -> str | None:
    raw = os.environ.get(name)
    value = default if raw is None or raw.strip() == "" else raw.strip()
    if value is None:
        return None
    scheme = value.split("://", 1)[0].lower() if "://" in value else ""
    if scheme not in schemes:
        raise ImproperlyConfigured(f"{name}={value!r} must be a URL with scheme {' or '.join(schemes)}")
    return value


def env_fernet_keys(name: str) -> list[str]:
    """Comma-separated Fernet keys (urlsafe base64 of 32 bytes), newest first; [] when unset. A bad key
    refuses to start, named by its position (never its value)."""
    from cryptography.fernet import Fernet

    keys = env_list(name, [])
    for position, key in enumerate(keys, start=1):
        try:
            Fernet(key)
        except ValueError:
            raise ImproperlyConfigured(
                f"{name}: key #{position} is not a Fernet key (32 url-safe base64-encoded bytes; make one "
                "with python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())')"
            ) from None
    return keys


def derived_fernet_key(secret: str) -> str:
    """A Fernet key derived from ``secret`` (DJANGO_SECRET_KEY): the local and test settings' default for
    GATEWAY_SECRET_KEYS, never used in production (which refuses to start without the variable)."""
    import base64
    import hashlib

    digest = hashlib.sha256(b"batch-gateway provider keys:" + secret.encode("utf-8")).digest()
    return base64.urlsafe_b64encode(digest).decode("ascii")


def refuse_removed(removed: dict[str, str]) -> None:
    """Refuse to start while a variable that no longer does anything is set ({name: what to do}), so an
    operator's old setting is never silently ignored."""
    import os

    for name, advice in removed.items():
        if name in os.environ:
            raise ImproperlyConfigured(f"{name} was removed: {advice}")
