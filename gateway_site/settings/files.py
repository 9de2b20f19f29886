"""The OpenAI-compatible files' settings (/v1/files: size, storage, per-team quotas, expiry) and the
``STORAGES`` they configure; ``base`` imports them all (``from .files import *``)."""

from __future__ import annotations

from pathlib import Path

from gateway_site.env import env_int, env_str

_ROOT = Path(__file__).resolve().parents[2]  # the project root (base.BASE_DIR)

# Uploads larger than FILE_UPLOAD_MAX_MEMORY_SIZE (Django's 2.5 MB) stream to a temporary file, then to
# the "openai_files" storage; never the database. Any django-storages backend works by class path.
GATEWAY_OPENAI_MAX_FILE_BYTES = env_int("GATEWAY_OPENAI_MAX_FILE_BYTES", 200 * 1024 * 1024, minimum=1024)
GATEWAY_FILES_STORAGE = env_str("GATEWAY_FILES_STORAGE", "django.core.files.storage.FileSystemStorage")
GATEWAY_FILES_ROOT = env_str("GATEWAY_FILES_ROOT", str(_ROOT / "var" / "files"))
# Per-team quotas on the /v1 files a team holds (uploads and batch output; expired files not counted): an
# upload over either is a 429 and nothing is stored. A team's own values (Team fields) override these.
GATEWAY_FILES_MAX_PER_TEAM = env_int("GATEWAY_FILES_MAX_PER_TEAM", 10_000, minimum=1)
GATEWAY_FILES_MAX_BYTES_PER_TEAM = env_int("GATEWAY_FILES_MAX_BYTES_PER_TEAM", 20 * 1024**3, minimum=1024)
# Days until a /v1 file expires (expires_at): then a 404, and purge_old_data deletes it with its blob.
# 0 = files never expire.
GATEWAY_FILES_EXPIRE_DAYS = env_int("GATEWAY_FILES_EXPIRE_DAYS", 30, minimum=0, maximum=36500)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "openai_files": {
        "BACKEND": GATEWAY_FILES_STORAGE,
        "OPTIONS": (
            {"location": GATEWAY_FILES_ROOT}
            if GATEWAY_FILES_STORAGE == "django.core.files.storage.FileSystemStorage"
            else {}
        ),
    },
}
