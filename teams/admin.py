"""The Team and API-key admin: a team's live limits (with what it has used of them) and its keys (a new
raw key is shown once, on its own no-store page)."""

import weakref

from django.contrib import admin
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse

from gateway_engine.quota import QuotaError
from gateway_site.admin_tools import BoundedNumbersMixin, NumberWidthsMixin, short_datetime

from .keys import generate_raw_key, hash_key, visible_prefix
from .models import ApiKey, Team
from .services import revoke_api_key
from .usage import rate_limits, team_usage

# a new raw key, kept for the one request that created it (rendered once by response_add; never put in
# the messages cookie or the session)
_new_keys: weakref.WeakKeyDictionary[HttpRequest, str] = weakref.WeakKeyDictionary()


class ApiKeyInline(admin.TabularInline[ApiKey, Team]):
    model = ApiKey
    extra = 0
    fields = ["prefix", "name", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["prefix", "name", "created_at", "last_used_at", "revoked_at"]
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: Team | None = None) -> bool:
        return False


@admin.register(Team)
class TeamAdmin(NumberWidthsMixin, BoundedNumbersMixin, admin.ModelAdmin[Team]):
    """Team limits are live: a save (here or in the list) reaches every worker on commit (docs/quota.md)."""

    list_display = [
        "name", "weight", "daily_token_budget", "monthly_token_budget", "max_provider_share", "rpm_limit", "tpm_limit",
        "created_at",
    ]  # fmt: skip
    list_editable = [
        "weight",
        "daily_token_budget",
        "monthly_token_budget",
        "max_provider_share",
        "rpm_limit",
        "tpm_limit",
    ]
    search_fields = ["name"]
    readonly_fields = ["budget_usage", "rate_usage", "queue_usage", "created_at"]
    fieldsets = [
        (None, {"fields": ["name", "created_at"]}),
        (
            "Limits (live: applied by every worker within about a second of saving)",
            {
                "fields": [
                    "weight",
                    "daily_token_budget",
                    "monthly_token_budget",
                    "max_provider_share",
                    "rpm_limit",
                    "tpm_limit",
                    "budget_usage",
                    "rate_usage",
                ]  # fmt: skip
            },
        ),
        (
            "Queued-work and file limits (empty: the deployment's GATEWAY_TEAM_MAX_* / GATEWAY_FILES_MAX_* defaults)",
            {
                "fields": [
                    "max_pending_items",
                    "max_open_batches",
                    "max_submissions_per_minute",
                    "queue_usage",
                    "max_stored_files",
                    "max_stored_file_bytes",
                ]
            },
        ),
        (
            "Interactive calls (/v1/chat/completions: docs/interactive.md)",
            {"fields": ["max_waiting_calls", "log_interactive_content"]},
        ),
    ]
    inlines = [ApiKeyInline]

    @admin.display(description="queue now")
    def queue_usage(self, obj: Team | None) -> str:
        if obj is None or obj.pk is None:
            return "–"
        u = team_usage().queue_usage(obj)
        return (
            f"{u.pending_items:,} of {u.max_pending_items:,} pending items; {u.open_batches:,} of "
            f"{u.max_open_batches:,} open batches; {u.submissions_last_minute} of "
            f"{u.max_submissions_per_minute} submissions in the last minute"
        )

    @admin.display(description="RPM / TPM used (last minute)")
    def rate_usage(self, obj: Team | None) -> str:
        if obj is None or obj.pk is None:
            return "–"
        try:
            limits = rate_limits(obj)
        except QuotaError as exc:
            return f"unavailable ({exc})"
        return "; ".join(
            f"{name.upper()}: unlimited"
            if d["limit"] is None
            else f"{name.upper()}: {d['used_last_minute']:,} of {d['limit']:,}"
            for name, d in ((n, limits[n]) for n in ("rpm", "tpm"))
            if isinstance(d, dict)
        )

    @admin.display(description="budget used (UTC day / month)")
    def budget_usage(self, obj: Team | None) -> str:
        if obj is None or obj.pk is None:
            return "–"
        try:
            usage = team_usage().budget_usage(obj)
        except QuotaError as exc:
            return f"unavailable ({exc})"
        return "; ".join(
            f"{period}: {used:,} of {'unlimited' if limit is None else f'{limit:,}'} tokens"
            for period, limit, used in usage
        )


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin[ApiKey]):
    list_display = ["prefix", "name", "team", "created", "last_used", "revoked"]
    list_filter = ["team", ("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["prefix", "name", "team__name"]
    list_select_related = ["team"]
    actions = ["revoke"]

    def get_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> list[str]:  # type: ignore[override]  # the stub says Sequence[str | Sequence[str]]; a list of names is one
        if obj is None:
            return ["team", "name"]
        return ["team", "name", "prefix", "created_at", "last_used_at", "revoked_at"]

    def get_readonly_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> list[str]:
        if obj is None:
            return []
        return ["team", "prefix", "created_at", "last_used_at"]

    def save_model(self, request: HttpRequest, obj: ApiKey, form: ModelForm[ApiKey], change: bool) -> None:
        if not change:
            raw = generate_raw_key()
            obj.prefix = visible_prefix(raw)
            obj.key_hash = hash_key(raw)
            super().save_model(request, obj, form, change)
            _new_keys[request] = raw
            return
        super().save_model(request, obj, form, change)

    def response_add(
        self, request: HttpRequest, obj: ApiKey, post_url_continue: str | None = None
    ) -> HttpResponse:
        """The new raw key on its own page (no-store), instead of a message that would travel in the
        messages cookie."""
        raw = _new_keys.pop(request, None)
        if raw is None:
            return super().response_add(request, obj, post_url_continue)
        context = {
            **self.admin_site.each_context(request),
            "title": "New API key",
            "key": obj,
            "raw_key": raw,
            "opts": self.opts,
            "changelist_url": reverse("admin:teams_apikey_changelist"),
        }
        response = TemplateResponse(request, "admin/teams/apikey/created.html", context)
        response["Cache-Control"] = "no-store"
        return response

    @admin.display(description="created", ordering="created_at")
    def created(self, obj: ApiKey) -> str:
        return short_datetime(obj.created_at)

    @admin.display(description="last used", ordering="last_used_at")
    def last_used(self, obj: ApiKey) -> str:
        return short_datetime(obj.last_used_at)

    @admin.display(description="revoked at", ordering="revoked_at")
    def revoked(self, obj: ApiKey) -> str:
        return short_datetime(obj.revoked_at)

    @admin.action(description="Revoke selected keys")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        keys = list(queryset.filter(revoked_at__isnull=True))
        for key in keys:  # one save per key: the revocation is recorded in the config history
            revoke_api_key(key)
        count = len(keys)
        self.message_user(request, f"Revoked {count} key(s).")
