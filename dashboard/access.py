"""Access to the dashboards: every page is for active staff; pages and actions that show or spend a
team's data need a permission besides (the "gateway operator" group has them, batches migration 0008):

    batches.view_content   prompts and answers (the item page); on the batch and failures pages the
                           items' custom_ids, the batch's metadata and its webhook URL (often a
                           bearer secret): without it those pages show aggregates only
    batches.retry_batch    "Retry failed items" (spends that team's budget), "Redeliver" the webhook
    batches.cancel_batch   "Cancel batch"
"""

from __future__ import annotations

from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied

CONTENT_PERMISSION = "batches.view_content"
REDELIVER_PERMISSION = "batches.retry_batch"  # the operator's power to make a team's traffic again


def staff_required(view):
    """Anonymous → redirect to LOGIN_URL (?next=…); logged in but not active staff → 403."""

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        user = request.user
        if not user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        if not (user.is_active and user.is_staff):
            raise PermissionDenied("The dashboards are for staff users only.")
        return view(request, *args, **kwargs)

    return wrapped


def permission_required(perm: str, what: str):
    """``staff_required`` plus a Django permission; without it → 403 naming what is missing."""

    def decorator(view):
        @staff_required
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if not request.user.has_perm(perm):
                raise PermissionDenied(f"{what} needs the permission {perm} (group 'gateway operator').")
            return view(request, *args, **kwargs)

        return wrapped

    return decorator
