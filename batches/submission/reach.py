"""Which providers an item can reach, and what each of them refuses in it: the per-provider half of
submission's validation (issue #21).

An item is checked against EVERY enabled provider its route can reach (any of them may serve it
after a fallback), or its explicit ``provider``: the params and message content each provider's kind
cannot take (``gateway_engine.wire.check_request``: a param the kind has no such thing for, a value
outside its range, a content part it cannot carry), each problem naming the field and the provider,
e.g. ``params.temperature: 1.5 is above 1 for provider 'claude' (kind anthropic)``. And whether any
of them can ever hold the item's token reservation (``quota_refusal``): an item none can hold would
fail ``quota_impossible`` with 0 attempts, so it is refused here, naming ``params.max_tokens`` (or
``messages`` for an input-token bucket).

Pure: the reachable providers are resolved once per submission from the routing table
(``Reach.of``, no query per item); a provider whose kind no wire format speaks is a configuration
error reported on the item's ``route`` / ``provider`` field (never a 500, never sent as OpenAI).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gateway_engine.items import EmbeddingInput, estimate_split
from gateway_engine.kinds import embeddings_api
from gateway_engine.quota import QuotaImpossible
from gateway_engine.quota.token_ask import TokenAsk
from gateway_engine.routing import ProviderConfig, RoutingTable
from gateway_engine.wire import KNOWN_KINDS, ParamProblem, check_request
from gateway_engine.wire.embeddings_check import check_embeddings, no_embeddings

# (field, message) of one refusal
Refusal = tuple[str, str]


@dataclass(frozen=True)
class Reach:
    """Per route the enabled providers its enabled rules point at (as stored: a provider whose URL
    moved to an unconfirmed origin still counts, as submission accepts items for it), per provider
    its config, and the providers whose kind is unknown with the sentence that says so."""

    routes: Mapping[str, tuple[ProviderConfig, ...]] = field(default_factory=dict)
    providers: Mapping[str, ProviderConfig] = field(default_factory=dict)
    broken: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, table: RoutingTable, enabled: Mapping[str, bool]) -> Reach:
        """From the routing table and each provider's stored ``enabled`` flag (one pass, no I/O)."""
        routes: dict[str, list[ProviderConfig]] = {}
        for rule in table.rules:
            config = table.providers.get(rule.provider)
            if rule.enabled and config is not None and enabled.get(rule.provider):
                reached = routes.setdefault(rule.route, [])
                if config not in reached:
                    reached.append(config)
        broken = {
            name: (
                f"provider {name!r} has kind {config.kind!r}, which no wire format speaks (known kinds: "
                f"{', '.join(KNOWN_KINDS)}): a provider configuration error an operator must fix"
            )
            for name, config in table.providers.items()
            if config.kind not in KNOWN_KINDS
        }
        return cls({r: tuple(c) for r, c in routes.items()}, dict(table.providers), broken)

    def refusals(
        self,
        route: str,
        provider: str,
        messages: list[Any],
        params: Mapping[str, Any],
        *,
        embedding_input: EmbeddingInput | None = None,
    ) -> list[Refusal]:
        """Everything some reachable provider refuses in the item ([]: every one can take it). An
        embeddings item (``embedding_input`` given): a provider whose kind serves no embeddings, the
        params its kind does not take, the input limits of one request (``wire.embeddings_check``)."""
        target = "route" if route else "provider"
        configs = self.routes.get(route, ()) if route else _one(self.providers.get(provider))
        out: list[Refusal] = []
        seen: set[Refusal] = set()
        for config in configs:
            if config.name in self.broken:
                found = [(target, self.broken[config.name])]
            elif embedding_input is None:
                found = [_named(p, config) for p in check_request(config, messages, params)]
            elif embeddings_api(config.kind) is None:
                found = [(target, no_embeddings(config))]
            else:
                found = [_named(p, config) for p in check_embeddings(config, embedding_input, params)]
            for refusal in found:
                if refusal not in seen:
                    seen.add(refusal)
                    out.append(refusal)
        impossible = quota_refusal(configs, messages, params, embedding_input=embedding_input)
        return out if impossible is None else [*out, impossible]


# how a quota refusal's message starts (the interactive lane answers it with the error type's row)
QUOTA_IMPOSSIBLE_PREFIX = "quota_impossible: "
# the item field a bucket too small for it is about (what QuotaImpossible's advice says to change)
_BUCKET_FIELDS = {"TPM": "params.max_tokens", "ITPM": "messages", "OTPM": "params.max_tokens"}


def quota_refusal(
    configs: tuple[ProviderConfig, ...],
    messages: list[Any],
    params: Mapping[str, Any],
    *,
    embedding_input: EmbeddingInput | None = None,
) -> Refusal | None:
    """A refusal when NO reachable provider's token buckets (TPM, ITPM, OTPM) can ever hold the item's
    reservation — the prompt estimate plus ``max_tokens`` (or the provider's ``default_max_tokens``),
    as the engine reserves it (``estimate_split``, ``TokenAsk``): it would fail ``quota_impossible``
    with 0 attempts. One provider that can hold it is enough (the engine falls back to it). An
    embeddings item reserves its input only (its field is ``input``)."""
    problems: list[QuotaImpossible] = []
    for config in configs:
        est_input, est_output = estimate_split(
            messages, params, config.default_max_tokens, embedding_input=embedding_input
        )
        try:
            TokenAsk(est_input + est_output, est_input, est_output).amounts(config.limits)
        except QuotaImpossible as exc:
            problems.append(exc)
            continue
        return None
    if not problems:
        return None
    field_name = "input" if embedding_input is not None else _BUCKET_FIELDS[problems[0].bucket]
    return field_name, QUOTA_IMPOSSIBLE_PREFIX + "; ".join(p.message for p in problems)


def _one(config: ProviderConfig | None) -> tuple[ProviderConfig, ...]:
    return () if config is None else (config,)


def _named(problem: ParamProblem, config: ProviderConfig) -> Refusal:
    """The problem as a refusal that surely names its provider (the wire formats' messages do; one that
    did not would leave the team guessing which of a route's providers refused)."""
    message = problem.message
    if repr(config.name) not in message:
        message = f"{message} (provider {config.name!r}, kind {config.kind})"
    return problem.field, message
