"""The providers page's "rate" block: per provider, whether it follows its remaining-quota headers
(``adaptive``, and which of them, gateway_engine/remaining.py ``HEADER_SEMANTICS``), whether it has the
provider-batch route (``batch_api``), and what — if anything — holds it below its configured rate now:
its own headers (shared keys), a Retry-After, a provider pause or the breaker, each with its cause."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway_engine.remaining import adaptive_status


@dataclass(frozen=True)
class RateStatus:
    name: str
    adaptive: str  # "on: follows tokens (requests: …)", "off (configured)", "off: …"
    batch_api: bool
    below: tuple[str, ...]  # why it runs below its configured rate now (empty: nothing holds it)


def rate_status(provider: Any, row: dict[str, Any]) -> RateStatus:
    """``provider``: the Provider row; ``row``: its providers-page row (dashboard/provider_rows.py)."""
    return RateStatus(
        name=provider.name,
        adaptive=adaptive_status(provider.kind, bool(provider.adaptive)),
        batch_api=bool(provider.batch_api),
        below=tuple(_below(provider, row)),
    )


def _below(provider: Any, row: dict[str, Any]) -> list[str]:
    out = []
    if not provider.enabled:
        out.append("disabled: nothing is sent to it")
    q = row.get("quota")
    for dim, adjusted, configured, outside in (
        ("RPM", getattr(q, "adjusted_rpm", None), provider.rpm, getattr(q, "outside_rpm", 0.0)),
        ("TPM", getattr(q, "adjusted_tpm", None), provider.tpm, getattr(q, "outside_tpm", 0.0)),
    ):
        if adjusted is not None and adjusted < configured:
            note = f"; outside use about {outside:.0f}/min" if outside else ""
            out.append(
                f"its headers: {dim} held at {adjusted:.0f}/min of the configured {configured}/min "
                f"until their reset (shared key{note})"
            )
    if getattr(q, "paused_until_ms", 0):
        out.append("a 429's Retry-After: no request until it has passed")
    pause = row.get("pause")
    if pause is not None:
        message = getattr(pause, "message", "")
        out.append(f"paused ({getattr(pause, 'reason', '')}{': ' + message if message else ''})")
    breaker = row.get("breaker")
    if breaker in ("open", "half_open"):
        detail = row.get("breaker_detail") or ""
        out.append(f"breaker {breaker.replace('_', '-')}{': ' + detail if detail else ''}")
    return out
