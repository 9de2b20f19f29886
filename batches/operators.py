"""The "gateway operator" group (issue #29): staff powers are permissions — reading prompts and
answers, retrying, cancelling, editing limits — and this group holds them (is_staff alone sees
aggregate pages only).

Migration batches 0008 made the group; ``ensure_operator_group`` (on ``post_migrate``) makes it again,
with its default permissions, when it is missing: a database whose tables were flushed (``manage.py
flush``, the test runner's transactional tests) or where the group was deleted. An existing group is
never changed, so an operator's edits to its permissions stay.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps as global_apps
from django.db.models import Q

OPERATOR_GROUP = "gateway operator"
# (app label, model, codename) as they are today (teams.Team moved from batches in teams 0001/0002)
OPERATOR_PERMISSIONS = (
    ("batches", "batch", "view_content"),
    ("batches", "batch", "retry_batch"),
    ("batches", "batch", "cancel_batch"),
    ("batches", "batch", "view_batch"),
    ("teams", "team", "view_team"),
    ("teams", "team", "change_team"),
    ("providers", "provider", "view_provider"),
    ("providers", "provider", "change_provider"),
    ("providers", "routingrule", "view_routingrule"),
    ("providers", "routingrule", "change_routingrule"),
)


def ensure_operator_group(using: str = "default", apps: Any = global_apps, **kwargs: Any) -> bool:
    """Create the group with its permissions if it does not exist; True if it was created."""
    try:
        group_model = apps.get_model("auth", "Group")
        permission_model = apps.get_model("auth", "Permission")
    except LookupError:  # auth not installed in this state
        return False
    if group_model.objects.using(using).filter(name=OPERATOR_GROUP).exists():
        return False
    from django.contrib.auth.management import create_permissions

    for label in sorted({label for label, _, _ in OPERATOR_PERMISSIONS}):
        try:
            create_permissions(apps.get_app_config(label), verbosity=0, using=using, apps=apps)
        except LookupError:
            return False  # a state without that app yet: the migration that adds it comes later
    wanted = Q()
    for label, model, codename in OPERATOR_PERMISSIONS:
        wanted |= Q(content_type__app_label=label, content_type__model=model, codename=codename)
    group = group_model.objects.using(using).create(name=OPERATOR_GROUP)
    group.permissions.add(*permission_model.objects.using(using).filter(wanted))
    return True
