"""The default storage of `/v1` file blobs: the database every host already shares (issue "Several
hosts": a file uploaded through one web host, a batch created through another, its output read
through a third — with the local disk, each host saw only its own files).

A blob is a run of ``BlobChunk`` rows (``name``, ``seq`` from 0, at most CHUNK_BYTES each), written in
one transaction: a blob is there whole or not at all. Reading opens a seekable stream that fetches one
chunk at a time, so a 200 MB output file is never in memory at once, and Django's FileResponse can
send its Content-Length. PostgreSQL keeps each chunk's bytea out of line (TOAST), so the rows stay
small for the index; a blob costs its size plus about 1 % in the database's backups.

Configured as ``GATEWAY_FILES_STORAGE=openai_api.blob_storage.DatabaseBlobStorage`` (the default);
``django.core.files.storage.FileSystemStorage`` (one host, or a disk every host mounts) and any
django-storages backend (S3-compatible object storage) remain choices (docs/operations.md).
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator

from django.core.files import File
from django.core.files.storage import Storage
from django.db import transaction
from django.utils.deconstruct import deconstructible

from .models import BlobChunk

CHUNK_BYTES = 1024 * 1024


def _pieces(chunks: Iterable[bytes | str], size: int) -> Iterator[bytes]:
    """The content re-cut into pieces of exactly ``size`` bytes (the last one shorter)."""
    buf = bytearray()
    for chunk in chunks:
        buf += chunk.encode() if isinstance(chunk, str) else chunk
        while len(buf) >= size:
            yield bytes(buf[:size])
            del buf[:size]
    if buf:
        yield bytes(buf)


class ChunkReader(io.RawIOBase):
    """A blob's bytes, read (and seeked) one chunk row at a time."""

    def __init__(self, name: str, sizes: list[int]) -> None:
        self.name = name
        self.sizes = sizes
        self.starts = [sum(sizes[:i]) for i in range(len(sizes))]
        self.length = sum(sizes)
        self.pos = 0
        self._seq = -1
        self._data = b""

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.length}[whence]
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset}")
        self.pos = base + offset
        return self.pos

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]  # io's buffer protocol
        if self.pos >= self.length:
            return 0
        seq = self._chunk_at(self.pos)
        if seq != self._seq:
            data = BlobChunk.objects.filter(name=self.name, seq=seq).values_list("data", flat=True).first()
            if data is None:
                raise FileNotFoundError(f"blob {self.name!r} lost its chunk {seq} while it was read")
            self._seq, self._data = seq, bytes(data)
        offset = self.pos - self.starts[seq]
        n = min(len(buffer), len(self._data) - offset)
        buffer[:n] = self._data[offset : offset + n]
        self.pos += n
        return n

    def _chunk_at(self, pos: int) -> int:
        for seq in range(len(self.sizes) - 1, -1, -1):
            if self.starts[seq] <= pos:
                return seq
        return 0


@deconstructible
class DatabaseBlobStorage(Storage):
    """Blobs as BlobChunk rows in the default database (module docstring)."""

    def _save(self, name: str, content) -> str:  # type: ignore[no-untyped-def]  # Django's File
        if hasattr(content, "seek"):
            content.seek(0)
        with transaction.atomic():
            seq = 0
            for piece in _pieces(content.chunks(CHUNK_BYTES), CHUNK_BYTES):
                BlobChunk.objects.create(name=name, seq=seq, size=len(piece), data=piece)
                seq += 1
            if seq == 0:
                BlobChunk.objects.create(name=name, seq=0, size=0, data=b"")
        return name

    def _open(self, name: str, mode: str = "rb") -> File:
        if mode.replace("b", "") != "r":
            raise ValueError(f"the database blob storage opens blobs for reading only (mode {mode!r})")
        sizes = list(BlobChunk.objects.filter(name=name).order_by("seq").values_list("size", flat=True))
        if not sizes:
            raise FileNotFoundError(f"no blob named {name!r} in the database storage")
        return File(io.BufferedReader(ChunkReader(name, sizes), buffer_size=CHUNK_BYTES), name=name)

    def exists(self, name: str) -> bool:
        return BlobChunk.objects.filter(name=name).exists()

    def delete(self, name: str) -> None:
        BlobChunk.objects.filter(name=name).delete()

    def size(self, name: str) -> int:
        return sum(BlobChunk.objects.filter(name=name).values_list("size", flat=True))

    def listdir(self, path: str) -> tuple[list[str], list[str]]:
        prefix = path.rstrip("/") + "/" if path else ""
        names = BlobChunk.objects.filter(name__startswith=prefix, seq=0).values_list("name", flat=True)
        dirs, files = set(), []
        for rest in (n[len(prefix) :] for n in names):
            if "/" in rest:
                dirs.add(rest.split("/", 1)[0])
            else:
                files.append(rest)
        return sorted(dirs), sorted(files)

    def url(self, name: str | None) -> str:
        raise NotImplementedError("blobs in the database have no URL: /v1/files/{id}/content serves them")
