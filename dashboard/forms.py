"""GET filter forms for the dashboard pages. Invalid input → the page names the field, shows nothing."""

from __future__ import annotations

import datetime as dt

from django import forms
from django.utils import timezone

from batches.models import BatchStatus
from teams.models import Team

from .selectors.error_classes import ERROR_CLASSES


class DateInput(forms.DateInput):
    input_type = "date"


# Dates the pages can do arithmetic with (a day after, two weeks before) without overflowing.
MIN_DATE = dt.date(2000, 1, 1)
MAX_DATE = dt.date(2999, 12, 31)


class BoundedDateField(forms.DateField):
    """A date between MIN_DATE and MAX_DATE; anything else is a form error naming the field."""

    def __init__(self, **kwargs):
        kwargs.setdefault("required", False)
        kwargs.setdefault("widget", DateInput)
        super().__init__(**kwargs)

    def to_python(self, value):
        try:
            day = super().to_python(value)
        except OverflowError:
            raise forms.ValidationError("not a usable date", code="invalid") from None
        if day is not None and not MIN_DATE <= day <= MAX_DATE:
            raise forms.ValidationError(
                f"must be between {MIN_DATE.isoformat()} and {MAX_DATE.isoformat()}", code="out_of_range"
            )
        return day


class _RangeMixin:
    def clean(self):
        data = super().clean()
        start, end = data.get("date_from"), data.get("date_to")
        if start and end and start > end:
            self.add_error("date_to", "date_to must be on or after date_from")
        return data


def _team_field() -> forms.ModelChoiceField:
    return forms.ModelChoiceField(
        queryset=Team.objects.order_by("name"), required=False, empty_label="all teams"
    )


class BatchFilterForm(_RangeMixin, forms.Form):
    team = _team_field()
    status = forms.ChoiceField(choices=[("", "any status"), *BatchStatus.choices], required=False)
    date_from = BoundedDateField(label="from")
    date_to = BoundedDateField(label="to")


WINDOWS = [
    ("1h", "last hour", dt.timedelta(hours=1)),
    ("24h", "last 24 hours", dt.timedelta(hours=24)),
    ("7d", "last 7 days", dt.timedelta(days=7)),
    ("30d", "last 30 days", dt.timedelta(days=30)),
    ("all", "all time", None),
]
DEFAULT_WINDOW = "24h"


class FailureFilterForm(_RangeMixin, forms.Form):
    provider = forms.ChoiceField(required=False)
    error_class = forms.ChoiceField(choices=[("", "any class"), *ERROR_CLASSES], required=False)
    status_code = forms.IntegerField(required=False, min_value=100, max_value=599, label="status code")
    team = _team_field()
    batch = forms.UUIDField(required=False, label="batch id")
    window = forms.ChoiceField(choices=[(k, label) for k, label, _ in WINDOWS], required=False, label="time")
    date_from = BoundedDateField(label="from")
    date_to = BoundedDateField(label="to")

    def __init__(self, *args, provider_names: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["provider"].choices = [("", "any provider")] + [(n, n) for n in provider_names]
        self.fields["window"].initial = DEFAULT_WINDOW

    def time_bounds(self) -> tuple[dt.datetime | None, dt.datetime | None]:
        """(since, until) from the explicit dates, else from the window (default 24 h)."""
        data = self.cleaned_data
        start, end = data.get("date_from"), data.get("date_to")
        to_dt = lambda d: timezone.make_aware(dt.datetime.combine(d, dt.time.min), dt.UTC)  # noqa: E731
        if start or end:
            return (to_dt(start) if start else None, to_dt(end + dt.timedelta(days=1)) if end else None)
        window = data.get("window") or DEFAULT_WINDOW
        delta = next(d for k, _, d in WINDOWS if k == window)
        return (timezone.now() - delta if delta else None, None)


USAGE_DEFAULT_DAYS = 14
USAGE_MAX_DAYS = 366


class UsageFilterForm(_RangeMixin, forms.Form):
    team = _team_field()
    date_from = BoundedDateField(label="from")
    date_to = BoundedDateField(label="to")

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        today = timezone.now().date()
        end = data.get("date_to") or today
        start = data.get("date_from") or end - dt.timedelta(days=USAGE_DEFAULT_DAYS - 1)
        if start > end:
            self.add_error("date_from", "date_from must be on or before date_to")
        elif (end - start).days >= USAGE_MAX_DAYS:
            self.add_error("date_from", f"the range is limited to {USAGE_MAX_DAYS} days")
        data["date_from"], data["date_to"] = start, end
        return data
