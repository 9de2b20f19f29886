"""Read-only admin for /v1 files and batches (the native batch has its own admin page)."""

from django.contrib import admin

from batches.admin import ReadOnlyAdmin

from .models import File, OpenAIBatch


@admin.register(File)
class FileAdmin(ReadOnlyAdmin):
    list_display = ["id", "team", "purpose", "filename", "bytes", "created_at", "expires_at"]
    list_filter = ["purpose", "team"]
    search_fields = ["id", "filename"]


@admin.register(OpenAIBatch)
class OpenAIBatchAdmin(ReadOnlyAdmin):
    list_display = ["id", "team", "batch", "endpoint", "completion_window", "created_at", "failed_at"]
    list_filter = ["team"]
    search_fields = ["id", "input_file_ref"]
    raw_id_fields = ["batch", "input_file", "output_file", "error_file"]
