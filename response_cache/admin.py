from django.contrib import admin, messages

from .models import CacheEntry
from .services import clear_team


@admin.register(CacheEntry)
class CacheEntryAdmin(admin.ModelAdmin):
    list_display = ("key", "team", "provider", "bytes", "created_at", "expires_at")
    list_filter = ("team", "provider")
    search_fields = ("key", "provider")
    date_hierarchy = "created_at"
    exclude = ("answer",)  # answers are prompts' content: not shown here
    actions = ["clear_teams_cache"]

    @admin.action(description="Clear the whole cache of the selected entries' teams", permissions=["delete"])
    def clear_teams_cache(self, request, queryset):
        teams = {team_id for team_id in queryset.values_list("team_id", flat=True) if team_id is not None}
        deleted = sum(clear_team(team_id) for team_id in teams)
        self.message_user(
            request, f"cleared {deleted} cache entries of {len(teams)} team(s)", messages.SUCCESS
        )

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
