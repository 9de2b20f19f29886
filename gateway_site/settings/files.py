"""The OpenAI-compatible files' settings (/v1/files: size, storage, per-team quotas, expiry) and the
``STORAGES`` they configure; ``base`` imports them all (``from .files import *``)."""

from __future__ import annotations

from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from gateway_site.env import env_bool, env_int, env_str

_ROOT = Path(__file__).resolve().parents[2]  # the project root (base.BASE_DIR)

# Uploads larger than FILE_UPLOAD_MAX_MEMORY_SIZE (Django's 2.5 MB) stream to a temporary file, then to
# the "openai_files" storage: by default the database every host shares (openai_api/blob_storage.py);
# the local disk (FileSystemStorage under GATEWAY_FILES_ROOT) or any django-storages backend (S3) by
# class path.
GATEWAY_OPENAI_MAX_FILE_BYTES = env_int("GATEWAY_OPENAI_MAX_FILE_BYTES", 200 * 1024 * 1024, minimum=1024)
DATABASE_BLOBS = "openai_api.blob_storage.DatabaseBlobStorage"
LOCAL_DISK = "django.core.files.storage.FileSystemStorage"
GATEWAY_FILES_STORAGE = env_str("GATEWAY_FILES_STORAGE", DATABASE_BLOBS)
GATEWAY_FILES_ROOT = env_str("GATEWAY_FILES_ROOT", str(_ROOT / "var" / "files"))
# GATEWAY_FILES_ROOT is a disk every web and worker host mounts (NFS, a shared volume): the local-disk
# storage is then allowed with a database on another host (refuse_local_disk_across_hosts)
GATEWAY_FILES_SHARED_DISK = env_bool("GATEWAY_FILES_SHARED_DISK", False)
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
        "OPTIONS": ({"location": GATEWAY_FILES_ROOT} if GATEWAY_FILES_STORAGE == LOCAL_DISK else {}),
    },
}

_LOCAL_HOSTS = ("", "localhost", "127.0.0.1", "::1")


def refuse_local_disk_across_hosts(database: dict) -> None:
    """A database on another host means the gateway runs on more than one machine (web hosts and
    workers all reach it): /v1 file blobs on one host's local disk would be missing on the others (an
    upload through web host A, its batch created through B). Refused at start, naming the settings,
    unless GATEWAY_FILES_SHARED_DISK says GATEWAY_FILES_ROOT is a disk every host mounts."""
    host = str(database.get("HOST") or "")
    if GATEWAY_FILES_STORAGE != LOCAL_DISK or GATEWAY_FILES_SHARED_DISK:
        return
    if host in _LOCAL_HOSTS or host.startswith("/"):  # the same machine (or its Unix socket)
        return
    raise ImproperlyConfigured(
        f"GATEWAY_FILES_STORAGE={LOCAL_DISK} keeps /v1 file blobs on this host's disk "
        f"(GATEWAY_FILES_ROOT={GATEWAY_FILES_ROOT}), but DATABASE_URL names another host ({host}): on "
        "several hosts each would see only the files uploaded through it. Leave GATEWAY_FILES_STORAGE "
        f"unset (the default, {DATABASE_BLOBS}: blobs in the database), use an S3-compatible "
        "django-storages backend, or set GATEWAY_FILES_SHARED_DISK=1 if GATEWAY_FILES_ROOT is mounted "
        "by every web and worker host."
    )
