"""Structured logs: one JSON object per line (python-json-logger), a request id carried from the HTTP
request into Celery tasks, and a filter that keeps secrets and bodies out.

    GATEWAY_LOG_FORMAT=json      {"time", "level", "logger", "message", "request_id", ...extras}
    GATEWAY_LOG_FORMAT=console   human-readable: time level logger message key=value ... (make demo)
    unset                        json, except a manage.py command whose stderr is a terminal: console
                                 (web and worker processes log JSON unless told otherwise)

Events carry their fields as ``extra=`` (``event``, ``batch_id``, ``team``, ``provider``, ...). The request
id comes from the ``X-Request-ID`` header (or a new one), is echoed in the response, and travels to
Celery tasks in the ``gateway_request_id`` message header (see ``celery_hooks``).
"""

from __future__ import annotations

import contextvars
import logging
import re
import sys
import uuid

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from pythonjsonlogger.json import JsonFormatter

request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("gateway_request_id", default="")

REQUEST_ID_HEADER = "HTTP_X_REQUEST_ID"
_VALID_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
# extra keys never written as they are (a caller passing one of these by mistake logs "[redacted]")
REDACTED_KEYS = frozenset(
    {
        "api_key",
        "authorization",
        "password",
        "secret",
        "token",
        "messages",
        "prompt",
        "response",
        "payload",
        "body",
    }
)
# attributes every LogRecord has; anything else on a record is an ``extra=`` field
_RECORD_ATTRS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


_command_line = False


def mark_command_line() -> None:
    """Called by manage.py before the settings load: this process is a management command."""
    global _command_line
    _command_line = True


def default_format() -> str:
    """GATEWAY_LOG_FORMAT when the variable is unset: "console" for a management command whose stderr is
    a terminal (a person reads it, e.g. between submit_batch's progress lines), else "json" (web and
    worker processes, and commands whose output goes to a file, a pipe or a log collector)."""
    try:
        on_terminal = sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stderr
        on_terminal = False
    return "console" if _command_line and on_terminal else "json"


def current_request_id() -> str:
    return request_id_var.get()


def new_request_id() -> str:
    return uuid.uuid4().hex


def clean_request_id(value: str | None) -> str:
    """A caller's X-Request-ID if it is short and plain, else a new one."""
    return value if value and _VALID_REQUEST_ID.match(value) else new_request_id()


class RequestIdFilter(logging.Filter):
    """Adds ``request_id`` (the current one, or "") and redacts secret-looking extras."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(record, "request_id", ""):
            record.request_id = request_id_var.get()
        for key in REDACTED_KEYS.intersection(record.__dict__):
            setattr(record, key, "[redacted]")
        return True


class GatewayJsonFormatter(JsonFormatter):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("rename_fields", {"asctime": "time", "levelname": "level", "name": "logger"})
        kwargs.setdefault("timestamp", False)
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s", *args, **kwargs)

    def formatTime(self, record, datefmt=None):  # noqa: N802 - logging API
        from datetime import UTC, datetime

        return datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")


class ConsoleFormatter(logging.Formatter):
    """``12:00:01 INFO batches.execution batch started batch_id=… team=acme`` (extras as key=value)."""

    def __init__(self):
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s", "%H:%M:%S")

    def format(self, record: logging.LogRecord) -> str:
        if getattr(record, "event", "") == "batch_finished":
            # the batch report line: its message is the report's JSON (kilobytes with many providers);
            # a person gets its summary, in the extras below (the report: submit_batch, API, dashboard)
            record = logging.makeLogRecord({**record.__dict__, "msg": "batch finished", "args": ()})
        text = super().format(record)
        extras = {
            k: v for k, v in record.__dict__.items() if k not in _RECORD_ATTRS and not k.startswith("_")
        }
        if not extras.get("request_id"):
            extras.pop("request_id", None)
        if record.name.startswith("celery."):
            extras.pop("data", None)  # Celery's own copy of what its message already says
        if extras:
            text += " " + " ".join(f"{k}={v}" for k, v in extras.items())
        return text


def logging_config(fmt: str, level: str) -> dict:
    """The LOGGING dict for settings (fmt: json | console)."""
    formatter = "json" if fmt == "json" else "console"
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"request_id": {"()": "observability.logs.RequestIdFilter"}},
        "formatters": {
            "json": {"()": "observability.logs.GatewayJsonFormatter"},
            "console": {"()": "observability.logs.ConsoleFormatter"},
        },
        "handlers": {
            "console": {"class": "logging.StreamHandler", "formatter": formatter, "filters": ["request_id"]}
        },
        "root": {"handlers": ["console"], "level": level},
        "loggers": {
            "django.db.backends": {"level": "WARNING"},
            "httpx": {"level": "WARNING"},
            "httpcore": {"level": "WARNING"},
        },
    }


class RequestIdMiddleware:
    """Sets the request id for the request (from ``X-Request-ID`` or new) and echoes it back. Sync and
    async (under ASGI it adds no thread hop to the async views of the interactive lane)."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request):
        if self.is_async:
            return self._acall(request)
        rid = clean_request_id(request.META.get(REQUEST_ID_HEADER))
        token = request_id_var.set(rid)
        request.request_id = rid
        try:
            response = self.get_response(request)
        finally:
            request_id_var.reset(token)
        response["X-Request-ID"] = rid
        return response

    async def _acall(self, request):
        rid = clean_request_id(request.META.get(REQUEST_ID_HEADER))
        token = request_id_var.set(rid)
        request.request_id = rid
        try:
            response = await self.get_response(request)
        finally:
            request_id_var.reset(token)
        response["X-Request-ID"] = rid
        return response
