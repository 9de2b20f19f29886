"""The ONE table of what each error type means (docs/architecture.md "Error types: one row each";
docs/contract.md §4 and §6). A row per error type (``ErrorType``, the RESULT's ``error.type``) says:

* the engine's side: its class (the stats' ``errors_by_class``, the dashboards' SQL: retry.py builds
  ``ERROR_CLASS_TABLE`` from this column), whether it is retried (``retryable``: retry.py), whether it
  counts against the provider's breaker (``breaker_failure``: recording.py) and how its retries back
  off (``backoff``: a name in gateway_engine/backoff.py ``BACKOFF_POLICIES``, read by attempts.py);
* the item's side: the status an item that ends with it has (``item_status``: the engine's stops,
  provider_batches/lines.py, a ``/v1`` line of an item without an error type);
* every surface's answer, both OpenAI ones reading the same columns: the interactive lane's HTTP
  status, OpenAI error ``type`` and ``code`` (``interactive.errors``, its stream's error frame
  ``interactive.streams``) and the code of a ``/v1`` batch error line (``openai_api.conversion``, its
  ``type`` being the row's ``openai_type`` too). The code is the error type's own name on both
  surfaces; the only differences are named in the row: an item that ran out of time is the contract's
  ``gateway_queue_timeout`` on the interactive lane and OpenAI's ``batch_expired`` on a ``/v1`` line, a
  cancelled one OpenAI's ``batch_cancelled``.

Rows that are not an error type are the interactive lane's own refusals (``line_code`` None: never in
a ``/v1`` batch file); a new refusal is one more row here, and ``interactive.errors.refusal(name,
message)`` answers it. A new error type is one name in ``ErrorType`` and one row here, both in this
module (the model's choices derive from the rows: a migration follows);
tests/architecture/test_error_tables.py fails on a missing row, an unfilled column, or a side table
elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass

from .backoff import NEVER, PROVIDER_OVERLOAD, STANDARD


class ErrorType:
    """The error types an item or attempt can end with: the RESULT's ``error.type`` (the model's choices,
    ``batches.models.ERROR_TYPE_CHOICES``, are their rows below). Each one needs its row in
    ``ERROR_KINDS``."""

    CLIENT_ERROR = "client_error"
    RATE_LIMITED = "rate_limited"
    SERVER_ERROR = "server_error"
    TIMEOUT = "timeout"
    CONNECTION_ERROR = "connection_error"
    QUOTA_IMPOSSIBLE = "quota_impossible"
    NO_PROVIDER = "no_provider"
    INVALID_RESPONSE = "invalid_response"
    GATEWAY_ERROR = "gateway_error"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    BUDGET_EXCEEDED = "budget_exceeded"
    # the provider is overloaded for every customer (Anthropic 529, Gemini 503 UNAVAILABLE): retried with
    # backoff and counted by the breaker, never a quota signal (no bucket pause, never counted as a 429)
    OVERLOADED = "overloaded"
    # the provider account's billing or spend limit (OpenAI insufficient_quota, Anthropic spend limits):
    # never retried there; the provider is paused until an operator clears it; the item falls back
    PROVIDER_QUOTA_EXHAUSTED = "provider_quota_exhausted"


# ---- error classes (the stats' errors_by_class keys, docs/contract.md §4, and the dashboards) ----------

CLASS_4XX = "4xx"
CLASS_5XX = "5xx"
CLASS_429 = "429"
CLASS_TIMEOUT = "timeout"
CLASS_CONNECTION = "connection"
CLASS_INVALID = "invalid_response"
CLASS_OTHER = "other"
CLASS_OVERLOADED = "overloaded"
CLASS_QUOTA_EXHAUSTED = "quota_exhausted"


@dataclass(frozen=True)
class ErrorClass:
    """A class of failures: the error types whose row names it, or (``status_from``/``status_to``) a
    status code in [from, to) whatever the type. Classes are tried in ``ERROR_CLASSES`` order."""

    key: str
    label: str
    status_from: int | None = None
    status_to: int | None = None


# In match order: the type rows come before the status rows (an OpenAI 429 ``insufficient_quota`` is
# billing, not rate; an Anthropic 529 is overload, not a 5xx of this account). ``other`` is the rest.
ERROR_CLASSES: tuple[ErrorClass, ...] = (
    ErrorClass(CLASS_QUOTA_EXHAUSTED, "provider quota exhausted (billing)"),
    ErrorClass(CLASS_OVERLOADED, "overloaded (provider-wide)"),
    ErrorClass(CLASS_429, "429 (rate limited)", 429, 430),
    ErrorClass(CLASS_TIMEOUT, "timeout"),
    ErrorClass(CLASS_CONNECTION, "connection"),
    ErrorClass(CLASS_5XX, "5xx (server)", 500, 600),
    ErrorClass(CLASS_4XX, "4xx (client)", 400, 500),
    ErrorClass(CLASS_INVALID, "invalid response"),
)
OTHER_LABEL = "other (gateway, quota, routing, budget, cancelled, expired)"

# ---- item statuses an error type ends an item with ------------------------------------------------------

FAILED, CANCELLED, EXPIRED = "failed", "cancelled", "expired"
ITEM_STATUSES = (FAILED, CANCELLED, EXPIRED)


@dataclass(frozen=True)
class ErrorKind:
    """What one error type (or interactive refusal) means and how every surface answers it.

    ``error_class``: its key in ``ERROR_CLASSES`` (or ``other``). ``retryable``: the attempt is tried
    again (retry.is_retryable_error); ``breaker_failure``: it counts against the provider's breaker
    (recording.py; 4xx, the item's own fault, and 429s are not health signals); ``backoff``: the name
    of its retry policy (``backoff.BACKOFF_POLICIES``; ``never`` exactly when not retryable).
    ``item_status``: an item ending with it is ``failed``, ``cancelled`` or ``expired``.
    ``status``, ``openai_type``, ``code``: the interactive lane's answer (HTTP status and OpenAI's
    ``{"error": {"type", "code"}}``), plain or as a stream's error frame. ``line_code``: the
    ``error.code`` of a ``/v1`` batch error line (None: the row is an interactive refusal, never in a
    batch file). ``provider_answer``: the error is a provider's HTTP answer, so a ``/v1`` line keeps it
    as ``response`` with the provider's status (OpenAI's Batch API does the same) when that status is
    known, its body's ``type`` the row's ``openai_type``. ``retry_after``: the interactive answer
    carries ``Retry-After``; ``no_retry``: it carries ``x-should-retry: false`` (the SDKs do not
    retry). ``param``: the request field the error is about."""

    name: str
    error_class: str
    retryable: bool
    breaker_failure: bool
    backoff: str
    item_status: str
    status: int
    openai_type: str
    code: str
    line_code: str | None
    provider_answer: bool = False
    retry_after: bool = False
    no_retry: bool = False
    param: str | None = None

    @property
    def label(self) -> str:
        """How the dashboards and the admin name it (the model's choices)."""
        return self.name.replace("_", " ").title()


# interactive refusals that are not an item's error type
QUEUE_TIMEOUT = "gateway_queue_timeout"  # docs/contract.md §6: the wait for quota passed the limit
TEAM_WAITING_LIMIT = "team_waiting_limit"  # the team has Team.max_waiting_calls calls waiting already

_SERVER = "server_error"
_INVALID = "invalid_request_error"
_RATE = "rate_limit_error"


def _provider_fault(
    name: str,
    error_class: str,
    status: int,
    *,
    backoff: str = STANDARD,
    provider_answer: bool = False,
    retry_after: bool = False,
) -> ErrorKind:
    """A transient fault at the provider: retried, a breaker failure, the item fails, a server error."""
    return ErrorKind(
        name,
        error_class,
        retryable=True,
        breaker_failure=True,
        backoff=backoff,
        item_status=FAILED,
        status=status,
        openai_type=_SERVER,
        code=name,
        line_code=name,
        provider_answer=provider_answer,
        retry_after=retry_after,
    )


def _final(
    name: str,
    status: int,
    openai_type: str,
    *,
    error_class: str = CLASS_OTHER,
    item_status: str = FAILED,
    code: str = "",
    line_code: str = "",
    provider_answer: bool = False,
    retry_after: bool = False,
    no_retry: bool = False,
    param: str | None = None,
) -> ErrorKind:
    """Never retried, no health signal; the codes are the name unless given."""
    return ErrorKind(
        name,
        error_class,
        retryable=False,
        breaker_failure=False,
        backoff=NEVER,
        item_status=item_status,
        status=status,
        openai_type=openai_type,
        code=code or name,
        line_code=line_code or name,
        provider_answer=provider_answer,
        retry_after=retry_after,
        no_retry=no_retry,
        param=param,
    )


def _refusal(name: str, item_status: str, *, retry_after: bool) -> ErrorKind:
    """An interactive refusal: a 429 of the gateway's own, never in a batch file (no line code)."""
    return ErrorKind(
        name,
        CLASS_OTHER,
        retryable=False,
        breaker_failure=False,
        backoff=NEVER,
        item_status=item_status,
        status=429,
        openai_type=_RATE,
        code=name,
        line_code=None,
        retry_after=retry_after,
    )


# In ErrorType's order (the model's choices follow it), then the interactive refusals.
ERROR_KINDS: dict[str, ErrorKind] = {
    row.name: row
    for row in (
        _final(ErrorType.CLIENT_ERROR, 400, _INVALID, error_class=CLASS_4XX, provider_answer=True),
        ErrorKind(
            ErrorType.RATE_LIMITED,
            CLASS_429,
            retryable=True,
            breaker_failure=False,  # this account's rate: the bucket's penalty, not the provider's health
            backoff=STANDARD,  # when the answer gives no believable Retry-After / x-ratelimit-reset
            item_status=FAILED,
            status=429,
            openai_type=_RATE,
            code=ErrorType.RATE_LIMITED,
            line_code=ErrorType.RATE_LIMITED,
            provider_answer=True,
            retry_after=True,
        ),
        _provider_fault(ErrorType.SERVER_ERROR, CLASS_5XX, 502, provider_answer=True),
        _provider_fault(ErrorType.TIMEOUT, CLASS_TIMEOUT, 504),
        _provider_fault(ErrorType.CONNECTION_ERROR, CLASS_CONNECTION, 502),
        _final(ErrorType.QUOTA_IMPOSSIBLE, 400, _INVALID, param="max_tokens"),
        _final(ErrorType.NO_PROVIDER, 503, _SERVER, retry_after=True),
        _provider_fault(ErrorType.INVALID_RESPONSE, CLASS_INVALID, 502),
        _final(ErrorType.GATEWAY_ERROR, 500, _SERVER),
        _final(ErrorType.CANCELLED, 502, _SERVER, item_status=CANCELLED, line_code="batch_cancelled"),
        _final(
            ErrorType.EXPIRED,
            429,
            _RATE,
            item_status=EXPIRED,
            code=QUEUE_TIMEOUT,
            line_code="batch_expired",
            retry_after=True,
        ),
        _final(ErrorType.BUDGET_EXCEEDED, 429, "insufficient_quota", no_retry=True),
        # load across all customers: the breaker moves items to the next provider; longer backoff
        _provider_fault(
            ErrorType.OVERLOADED,
            CLASS_OVERLOADED,
            503,
            backoff=PROVIDER_OVERLOAD,
            provider_answer=True,
            retry_after=True,
        ),
        # billing: never retried there (the provider is paused until an operator clears it)
        _final(
            ErrorType.PROVIDER_QUOTA_EXHAUSTED,
            503,
            _SERVER,
            error_class=CLASS_QUOTA_EXHAUSTED,
            provider_answer=True,
            retry_after=True,
        ),
        # the interactive lane's own refusals (never an item's end in a batch file)
        _refusal(QUEUE_TIMEOUT, EXPIRED, retry_after=True),
        _refusal(TEAM_WAITING_LIMIT, FAILED, retry_after=False),  # Team.max_waiting_calls
    )
}

# the error types (rows a batch item can end with: they have a /v1 line code), in the table's order
ERROR_TYPES: tuple[str, ...] = tuple(k for k, row in ERROR_KINDS.items() if row.line_code is not None)

# the engine's two columns as sets (retry.py, recording.py read them)
RETRYABLE: frozenset[str] = frozenset(k for k, row in ERROR_KINDS.items() if row.retryable)
BREAKER_FAILURES: tuple[str, ...] = tuple(k for k, row in ERROR_KINDS.items() if row.breaker_failure)

# an item's status without an error type of its own → the error type its /v1 line shows: an end
# status is its row's (``item_status``); pending: not sent before the batch ended; running: lost
UNFINISHED_ERROR_TYPES = {"pending": ErrorType.CANCELLED, "running": ErrorType.GATEWAY_ERROR}


def error_kind(name: str | None) -> ErrorKind:
    """The row of an error type or refusal; an unknown or empty name is a ``gateway_error``."""
    return ERROR_KINDS.get(name or "", ERROR_KINDS[ErrorType.GATEWAY_ERROR])


def error_type_of_status(status: str) -> str:
    """The error type of an item that ended with ``status`` but names no error type of its own: the
    error type whose row ends an item so (``cancelled``, ``expired``), an unfinished one's
    (``UNFINISHED_ERROR_TYPES``), else ``gateway_error``."""
    if status in UNFINISHED_ERROR_TYPES:
        return UNFINISHED_ERROR_TYPES[status]
    if status != FAILED:
        for name in ERROR_TYPES:
            if ERROR_KINDS[name].item_status == status:
                return name
    return ErrorType.GATEWAY_ERROR
