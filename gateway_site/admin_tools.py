"""Admin presentation shared by the apps: number inputs whose bounds match the model's validators and
whose width fits the largest value they accept, and short dates for narrow columns.

A PositiveIntegerField's form field allows 0 (widget ``min="0"``, "greater than or equal to 0") while a
MinValueValidator(1) on the model refuses it with a second, different message. Copying the validators'
bounds to the form field gives one limit, one message, and a browser widget that agrees with both.
"""

from __future__ import annotations

from django import forms
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import connection, models
from django.db.models.constants import LOOKUP_SEP
from django.utils import timezone


def validator_bounds(db_field: models.Field) -> tuple[float | None, float | None]:
    """(lowest, highest) allowed by the field's Min/MaxValueValidators; None where unbounded."""
    lows = [v.limit_value for v in db_field.validators if isinstance(v, MinValueValidator)]
    highs = [v.limit_value for v in db_field.validators if isinstance(v, MaxValueValidator)]
    return (max(lows) if lows else None), (min(highs) if highs else None)


class BoundedNumbersMixin:
    """ModelAdmin mixin: number form fields take their min/max from the model field's validators."""

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        if isinstance(db_field, models.IntegerField | models.FloatField | models.DecimalField):
            low, high = validator_bounds(db_field)
            if low is not None:
                kwargs["min_value"] = low
            if high is not None:
                kwargs["max_value"] = high
        return super().formfield_for_dbfield(db_field, request, **kwargs)


# Width classes of admin number inputs, in characters (CSS: input.num-wN in dashboard/static/gateway/admin.css).
NUMBER_WIDTHS = (4, 6, 8, 10, 12, 14, 16, 20, 24)


def number_chars(db_field: models.Field) -> int | None:
    """How many characters the largest value the field accepts needs (sign and decimal point included):
    its validators' bounds, else its digits, else the database column's range. None: not a number."""
    low, high = validator_bounds(db_field)
    if isinstance(db_field, models.DecimalField):
        digits = db_field.max_digits or 20
        return digits + (1 if db_field.decimal_places else 0) + (1 if low is None or low < 0 else 0)
    if isinstance(db_field, models.IntegerField):
        db_low, db_high = connection.ops.integer_field_range(db_field.get_internal_type())
        low = db_low if low is None else low
        high = db_high if high is None else high
        ends = [int(v) for v in (low, high) if v is not None]
        return max((len(str(v)) for v in ends), default=20)
    if isinstance(db_field, models.FloatField):
        whole = len(str(int(abs(high)))) if high is not None else 15
        return whole + 4 + (1 if low is None or low < 0 else 0)  # a point and three decimals
    return None


def width_class(chars: int) -> str:
    return f"num-w{next((w for w in NUMBER_WIDTHS if w >= chars), NUMBER_WIDTHS[-1])}"


class NumberWidthsMixin:
    """ModelAdmin/inline mixin: every number input is wide enough for the largest value its model field
    accepts (Provider tpm 1,000,000,000, team budgets up to 2^63 - 1): a class num-wN, N characters plus
    the padding and the spinner. Changelists keep their own narrower list-editable widths (admin.css)."""

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        formfield = super().formfield_for_dbfield(db_field, request, **kwargs)
        chars = number_chars(db_field)
        if formfield is not None and chars is not None and isinstance(formfield.widget, forms.NumberInput):
            classes = formfield.widget.attrs.get("class", "")
            formfield.widget.attrs["class"] = f"{classes} {width_class(chars)}".strip()
        return formfield


def short_datetime(value) -> str:
    """'2026-11-30 12:05' (UTC) instead of 'Nov. 30, 2026, 12:05 p.m.': narrow columns fit at 1280 px."""
    return timezone.localtime(value).strftime("%Y-%m-%d %H:%M") if value else "-"


# a provider's key (providers.Provider.api_key): never a filter, search, ordering or column in the admin
SECRET_FIELD = "api_key"


class SecretLookupsRefusedMixin:
    """ModelAdmin mixin: a changelist lookup (``?api_key__startswith=…``, ``?provider__api_key=…``) that
    names the key field at any depth is refused (400, ``DisallowedModelAdminLookup``) whatever its value,
    so the answer says nothing about the key: no prefix probe."""

    def lookup_allowed(self, lookup, value, request=None):
        if SECRET_FIELD in lookup.split(LOOKUP_SEP):
            return False  # the changelist answers 400 (DisallowedModelAdminLookup)
        return super().lookup_allowed(lookup, value, request)
