"""Provider keys at rest (least privilege, second pass): ``providers_provider.api_key`` holds a Fernet token,
never the key, so a dump or a backup of the table carries no key.

* ``seal``: the key → ``fernet1:<token>``, encrypted with the newest of ``settings.GATEWAY_SECRET_KEYS``
  (env ``GATEWAY_SECRET_KEYS``, comma-separated Fernet keys, newest first; cryptography's MultiFernet).
  ``SealedKeyField`` seals whatever is assigned to it (``Provider(api_key="sk-…")``, the admin form, the
  provider file), so the model attribute and the column only ever hold the sealed value.
* ``reveal``: the one place a stored key is decrypted (providers.adapters, when the engine's
  ProviderConfig is built; the provider file's change check). Any of the configured keys decrypts, so a
  new key can be put first before the rows are re-sealed; a value none of them opens, or a plain-text
  value (a row written before migration providers 0007), is refused loudly, never sent as it is.
* ``reseal``: the token again under the newest key (``manage.py rotate_provider_keys``).
"""

from __future__ import annotations

from functools import cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.db import models
from django.db.models.query_utils import DeferredAttribute

PREFIX = "fernet1:"


class ProviderKeyUnreadable(RuntimeError):
    """A stored provider key that cannot be decrypted with the configured keys (or is not sealed)."""


@cache
def _fernet(keys: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([Fernet(key) for key in keys])


def _current() -> MultiFernet:
    keys = tuple(settings.GATEWAY_SECRET_KEYS)
    if not keys:
        raise ProviderKeyUnreadable("GATEWAY_SECRET_KEYS is empty: provider keys cannot be sealed or read")
    return _fernet(keys)


def is_sealed(value: str) -> bool:
    return value.startswith(PREFIX)


def seal(plain: str) -> str:
    """The key as it is stored; "" (no key) and an already sealed value stay as they are."""
    if not plain or is_sealed(plain):
        return plain
    return PREFIX + _current().encrypt(plain.encode("utf-8")).decode("ascii")


def reveal(stored: str) -> str:
    """The key a stored value seals ("" for none)."""
    if not stored:
        return ""
    if not is_sealed(stored):
        raise ProviderKeyUnreadable(
            "a provider key is stored in plain text: run `manage.py migrate providers` (migration 0007 seals it)"
        )
    try:
        return _current().decrypt(stored.removeprefix(PREFIX).encode("ascii")).decode("utf-8")
    except InvalidToken:
        raise ProviderKeyUnreadable(
            "a stored provider key opens with none of GATEWAY_SECRET_KEYS: keep the old key in the list "
            "(after the new one) until `manage.py rotate_provider_keys` has re-sealed every row"
        ) from None


def reseal(stored: str) -> str:
    """The same key sealed with the newest of GATEWAY_SECRET_KEYS (MultiFernet.rotate)."""
    if not stored:
        return stored
    reveal(stored)  # refuses plain text and unknown keys with the messages above
    return PREFIX + _current().rotate(stored.removeprefix(PREFIX).encode("ascii")).decode("ascii")


class _PlainFromDatabase(str):
    """A value read from the column that is not sealed (written around the ORM, or before migration
    0007): kept as it is, so ``reveal`` refuses it instead of the row being sealed silently in memory."""


class _SealingAttribute(DeferredAttribute):
    """The field's descriptor: a value assigned is sealed at once (a row read back is sealed already)."""

    def __set__(self, instance, value) -> None:
        if isinstance(value, str) and not isinstance(value, _PlainFromDatabase):
            value = seal(value)
        instance.__dict__[self.field.attname] = value


class SealedKeyField(models.CharField):
    """A CharField that only ever holds ``seal``'s output. A lookup's value is sealed too, so even a
    query that names the field (the admin refuses them: gateway_site.admin_tools) can never match."""

    descriptor_class = _SealingAttribute

    def from_db_value(self, value, expression, connection):
        return _PlainFromDatabase(value) if value and not is_sealed(value) else value

    def get_prep_value(self, value):
        value = super().get_prep_value(value)
        return seal(value) if isinstance(value, str) else value
