"""Staff-only access for every dashboard page."""

from __future__ import annotations

from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied


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
