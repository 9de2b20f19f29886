"""Every dashboard page, as URLs for a seeded database."""

from django.urls import reverse


def all_pages(seeded) -> dict[str, str]:
    return {
        "batches": reverse("dashboard:batches"),
        "batches_filtered": reverse("dashboard:batches")
        + f"?team={seeded.teams['acme'].pk}&status=completed",
        "batch_completed": reverse("dashboard:batch_detail", args=[seeded.completed.pk]),
        "batch_running": reverse("dashboard:batch_detail", args=[seeded.running.pk]),
        "item": reverse("dashboard:item_detail", args=[seeded.failed_item.pk]),
        "failures": reverse("dashboard:failures"),
        "providers": reverse("dashboard:providers"),
        "usage": reverse("dashboard:usage"),
        "usage_csv": reverse("dashboard:usage_csv"),
        "history": reverse("audit:history"),
    }
