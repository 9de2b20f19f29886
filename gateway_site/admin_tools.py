"""Admin presentation shared by the apps: number inputs whose bounds match the model's validators.

A PositiveIntegerField's form field allows 0 (widget ``min="0"``, "greater than or equal to 0") while a
MinValueValidator(1) on the model refuses it with a second, different message. Copying the validators'
bounds to the form field gives one limit, one message, and a browser widget that agrees with both.
"""

from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models


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
