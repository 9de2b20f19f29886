"""Where this process writes its Prometheus multiprocess files (``PROMETHEUS_MULTIPROC_DIR``), decided
before ``prometheus_client`` is first imported (it picks its value class at import time).

No Django and no prometheus_client in here: ``gateway_site/settings/base.py`` calls ``configure()`` while
the settings load (the first thing every ``manage.py``, ``celery -A gateway_site`` and gunicorn worker
process does), and ``gunicorn.conf.py`` calls it in the gunicorn master (whose ``child_exit`` hook needs
the directory, and which never loads the settings itself).

The rule (docs/operations.md "Multiprocess mode"):

- ``PROMETHEUS_MULTIPROC_DIR`` set to a directory: that directory (``make up``, docker compose).
- unset, ``REDIS_URL`` set (multi-process mode): a default directory that names the deployment on this
  host, ``<temp dir>/batch-gateway-metrics-<uid>-<hash>``, the hash taken over ``REDIS_URL`` (without its
  password) and ``GATEWAY_REDIS_PREFIX``: every web and worker process started on this host for one
  deployment derives the same directory, two deployments (another Redis, database number or prefix —
  e.g. two test runs) never share one. Created mode 0700; refused (and reported, never used) when it is
  not a plain directory owned by this uid. Never wiped by a process: counters of exited processes stay
  in the sums.
- unset, no ``REDIS_URL`` (single-process mode): no directory; the engine runs inside the web process,
  whose in-memory registry is then complete.
- ``GATEWAY_METRICS_DIR=off``, or ``PROMETHEUS_MULTIPROC_DIR`` set to the empty string: no files (the
  empty variable is removed, else prometheus_client would write its files into the working directory,
  and ``GATEWAY_METRICS_DIR=off`` is set so that child processes inherit the choice).

A ``PROMETHEUS_MULTIPROC_DIR`` whose name is a derived default was inherited from a parent that derived
it (this module sets the variable for prometheus_client): it is derived again from this process's own
environment, so a child started with another Redis or prefix gets its own directory.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import stat
import sys
import tempfile
from collections.abc import MutableMapping
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

ENV = "PROMETHEUS_MULTIPROC_DIR"
LEGACY_ENV = "prometheus_multiproc_dir"  # still honoured by prometheus_client
SWITCH = "GATEWAY_METRICS_DIR"  # "auto" (default) or "off"
NAME_PREFIX = "batch-gateway-metrics-"
_DERIVED_NAME = re.compile(rf"^{re.escape(NAME_PREFIX)}\d+-[0-9a-f]{{12}}$")


@dataclass(frozen=True)
class MetricsDir:
    """``path``: the multiprocess directory this process writes and /metrics reads ("" = none).
    ``source``: explicit, default, off, single-process or unavailable. ``problem``: why a default could
    not be used, or what is wrong with the one in use."""

    path: str
    source: str
    problem: str = ""


def _redis_url(environ) -> str | None:
    raw = environ.get("REDIS_URL")  # as settings.base reads it (env_url: stripped, "" = unset)
    return raw.strip() if raw and raw.strip() else None


def _without_password(url: str) -> str:
    """The URL with its password dropped: the directory name is visible to every local user."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{parts.username or ''}@{host}" if parts.username else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def deployment_key(environ) -> str | None:
    """What identifies this deployment on the host: the shared Redis and the key prefix (None in
    single-process mode)."""
    redis_url = _redis_url(environ)
    if redis_url is None:
        return None
    prefix = environ.get("GATEWAY_REDIS_PREFIX", "bgw:")
    return f"{_without_password(redis_url)}\n{prefix}"


def default_path(environ=os.environ) -> str | None:
    """The derived directory for this environment (None in single-process mode). Pure: creates nothing."""
    key = deployment_key(environ)
    if key is None:
        return None
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return os.path.join(tempfile.gettempdir(), f"{NAME_PREFIX}{os.getuid()}-{digest}")


def is_derived(path: str) -> bool:
    """The name of a derived default directory (of any environment)."""
    return bool(path) and bool(_DERIVED_NAME.match(os.path.basename(os.path.normpath(path))))


def resolve(environ=os.environ) -> MetricsDir:
    """Which directory this environment asks for. Pure: creates and changes nothing."""
    switch = (environ.get(SWITCH) or "auto").strip().lower()
    if switch not in ("auto", "off"):
        raise ValueError(
            f"{SWITCH}={environ.get(SWITCH)!r}: use 'auto' (the default) or 'off'; "
            f"a directory of your own goes in {ENV}"
        )
    if switch == "off":
        return MetricsDir("", "off")
    name = ENV if ENV in environ else (LEGACY_ENV if LEGACY_ENV in environ else None)
    if name is not None:
        explicit = environ[name].strip()
        if not explicit:
            return MetricsDir("", "off")
        if not is_derived(explicit):
            return MetricsDir(explicit, "explicit")
        # inherited from a parent that derived it: derive again from this environment
    path = default_path(environ)
    if path is None:
        return MetricsDir("", "single-process")
    return MetricsDir(path, "default")


def _private_dir(path: str) -> str:
    """Create ``path`` (mode 0700) or check the existing one; returns what is wrong ("" = usable)."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        return f"cannot create {path}: {exc}"
    try:
        st = os.lstat(path)
    except OSError as exc:
        return f"cannot read {path}: {exc}"
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} exists and is not a directory (a symlink or file is never followed)"
    if st.st_uid != os.getuid():
        return f"{path} belongs to uid {st.st_uid}, not this process's uid {os.getuid()}"
    if stat.S_IMODE(st.st_mode) != 0o700:
        try:
            os.chmod(path, 0o700)
        except OSError as exc:
            return f"{path} has mode {oct(stat.S_IMODE(st.st_mode))} and cannot be made 0700: {exc}"
    return ""


def remove_live_gauges(path: str, pid: int) -> None:
    """What ``prometheus_client.multiprocess.mark_process_dead`` does (without importing it): drop the
    live-gauge files of ``pid``; its counters and histograms stay (sums remain monotonic)."""
    for f in glob.glob(os.path.join(path, f"gauge_live*_{pid}.db")):
        try:
            os.remove(f)
        except FileNotFoundError:
            pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


_LIVE_FILE = re.compile(r"^gauge_live[a-z]+_(\d+)\.db$")


def sweep_dead_live_gauges(path: str) -> list[int]:
    """Mark dead the processes whose live-gauge files are still in ``path`` though no such process
    exists on this host (a worker child killed with SIGKILL runs no exit hook). Only for a derived
    directory: it is on this host and in this pid namespace, which an explicit one shared between
    containers is not. Returns the pids marked dead."""
    dead = []
    for name in os.listdir(path) if os.path.isdir(path) else ():
        match = _LIVE_FILE.match(name)
        if match and int(match.group(1)) != os.getpid() and not _alive(int(match.group(1))):
            dead.append(int(match.group(1)))
    for pid in sorted(set(dead)):
        remove_live_gauges(path, pid)
    return sorted(set(dead))


def configure(environ: MutableMapping[str, str] | None = None) -> MetricsDir:
    """Decide this process's directory, create a default one, and set ``environ`` (``os.environ``)
    so that prometheus_client, imported later, uses it. Idempotent."""
    if environ is None:
        environ = os.environ
    chosen = resolve(environ)
    if chosen.source == "default":
        problem = _private_dir(chosen.path)
        if problem:
            chosen = MetricsDir("", "unavailable", problem)
    if chosen.path:
        environ[ENV] = chosen.path
        environ.pop(LEGACY_ENV, None)
        # a process that had this pid before us and died without its exit hook left its live gauges
        remove_live_gauges(chosen.path, os.getpid())
    else:
        environ.pop(ENV, None)
        environ.pop(LEGACY_ENV, None)
        if chosen.source == "off":
            environ[SWITCH] = "off"  # children inherit the choice, not a default
    values = sys.modules.get("prometheus_client.values")
    if values is not None and environ is os.environ:
        writes_files = getattr(values.ValueClass, "_multiprocess", False)
        if writes_files != bool(chosen.path):
            chosen = MetricsDir(
                chosen.path,
                chosen.source,
                "prometheus_client was imported before the settings: this process's own metrics "
                + ("are not written to the directory" if chosen.path else "go to the files it chose"),
            )
    return chosen
