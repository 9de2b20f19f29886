from django.db import models


class ConfigChange(models.Model):
    """One change to gateway configuration: who, how, what, when, and old → new values per field.

    Secrets (a provider's API key, an API key's hash) are never stored: their entry says "changed".
    """

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.CharField(max_length=150, help_text="User name, or 'system' outside a request.")
    via = models.CharField(
        max_length=100, help_text="admin, dashboard, api, command:<name>, or code (shell, tasks)."
    )
    model = models.CharField(max_length=50, db_index=True, help_text="provider, routing rule, team, API key.")
    object_id = models.CharField(max_length=64)
    object_repr = models.CharField(max_length=200)
    action = models.CharField(max_length=16)  # created | updated | deleted | revoked
    changes = models.JSONField(default=dict, help_text='{field: {"old": …, "new": …}} or {field: "changed"}')

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["model", "object_id", "-at"], name="configchange_object")]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor} {self.action} {self.model} {self.object_repr}"
