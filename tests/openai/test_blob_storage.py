"""The default /v1 files storage: blobs in the database (openai_api/blob_storage.py), read by every
host; and the refusal of a local-disk storage with a database on another host."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.files.base import ContentFile

from openai_api import blob_storage
from openai_api.blob_storage import CHUNK_BYTES, DatabaseBlobStorage
from openai_api.models import BlobChunk

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]


def test_a_blob_over_several_chunks_reads_back_whole_seeks_and_is_gone_after_delete():
    storage = DatabaseBlobStorage()
    data = os.urandom(2 * CHUNK_BYTES + 12_345)
    name = storage.save("7/file-abc", ContentFile(data))
    assert name == "7/file-abc"
    assert list(BlobChunk.objects.filter(name=name).order_by("seq").values_list("seq", "size")) == [
        (0, CHUNK_BYTES), (1, CHUNK_BYTES), (2, 12_345)
    ]  # fmt: skip
    assert storage.exists(name) and storage.size(name) == len(data)
    with storage.open(name, "rb") as f:
        assert f.read() == data
    with storage.open(name) as f:  # seek into the middle of the second chunk, then across into the third
        f.seek(CHUNK_BYTES + 10)
        assert f.read(CHUNK_BYTES) == data[CHUNK_BYTES + 10 : 2 * CHUNK_BYTES + 10]
        f.seek(-5, io.SEEK_END)
        assert f.read() == data[-5:] and f.tell() == len(data)
    storage.delete(name)
    assert not storage.exists(name) and not BlobChunk.objects.exists()
    with pytest.raises(FileNotFoundError):
        storage.open(name)


def test_lines_that_cross_chunk_ends_come_back_whole():
    storage = DatabaseBlobStorage()
    lines = [f'{{"custom_id": "r{i}", "body": "{"x" * (i % 97)}"}}\n'.encode() for i in range(40_000)]
    data = b"".join(lines)
    assert len(data) > 2 * CHUNK_BYTES
    name = storage.save("9/lines", ContentFile(data))
    with storage.open(name) as f:  # line by line, as the /v1 batch input reader takes them
        assert list(f) == lines


def test_names_are_not_reused_and_an_empty_blob_exists():
    storage = DatabaseBlobStorage()
    first = storage.save("1/f", ContentFile(b"one"))
    second = storage.save("1/f", ContentFile(b"two"))
    assert first == "1/f" and second != first
    assert storage.open(first).read() == b"one" and storage.open(second).read() == b"two"
    empty = storage.save("1/empty", ContentFile(b""))
    assert storage.exists(empty) and storage.open(empty).read() == b"" and storage.size(empty) == 0
    assert storage.listdir("") == (["1"], []) and sorted(storage.listdir("1")[1]) == sorted(
        n.split("/", 1)[1] for n in (first, second, empty)
    )


def test_a_save_that_fails_midway_stores_nothing(monkeypatch):
    storage = DatabaseBlobStorage()

    def broken(chunks, size):
        yield b"x" * size
        raise OSError("the upload's temporary file went away")

    monkeypatch.setattr(blob_storage, "_pieces", broken)
    with pytest.raises(OSError):
        storage.save("3/half", ContentFile(b"x" * (3 * CHUNK_BYTES)))
    assert not BlobChunk.objects.exists()


def test_only_reading_is_offered():
    storage = DatabaseBlobStorage()
    name = storage.save("4/r", ContentFile(b"abc"))
    with pytest.raises(ValueError, match="reading only"):
        storage.open(name, "wb")


def settings_error(**env: str) -> str:
    """Load the settings in a fresh interpreter with ``env``; its stderr ('' when they load)."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_FILES")}
    full.update(DJANGO_SETTINGS_MODULE="gateway_site.settings.local", **env)
    out = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env=full,
        capture_output=True,
        text=True,
    )
    return out.stderr


@pytest.mark.parametrize(
    "env, refused",
    [
        ({"GATEWAY_FILES_STORAGE": "django.core.files.storage.FileSystemStorage",
          "DATABASE_URL": "postgres://gw@db.internal:5432/gateway"}, True),
        ({"GATEWAY_FILES_STORAGE": "django.core.files.storage.FileSystemStorage",
          "DATABASE_URL": "postgres://gw@db.internal:5432/gateway", "GATEWAY_FILES_SHARED_DISK": "1"}, False),
        ({"GATEWAY_FILES_STORAGE": "django.core.files.storage.FileSystemStorage",
          "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/gateway"}, False),
        ({"DATABASE_URL": "postgres://gw@db.internal:5432/gateway"}, False),  # the default: the database
    ],
)  # fmt: skip
def test_local_disk_files_with_a_database_on_another_host_refuse_to_start(env, refused):
    err = settings_error(REDIS_URL="redis://127.0.0.1:6379/0", **env)
    if refused:
        assert "ImproperlyConfigured" in err and "GATEWAY_FILES_STORAGE" in err and "db.internal" in err, err
        assert "GATEWAY_FILES_SHARED_DISK" in err, err
    else:
        assert "ImproperlyConfigured" not in err, err
