"""`make demo`'s providers are not held below their configured rates by their own headers (docs/quota.md
"Shared keys"): each simulated provider of examples/sim-kinds.json answers one request at rest, its
headers go through the gateway's wire format and remaining-quota reader (examples/providers.json's
limits, ``adaptive`` as configured), and the buckets' adjusted rates are at least the configured ones.

On the commit before this test, azure's 10 requests left in its 1-s window were read as 10 for the next
minute: an RPM allowance of 10 against the configured 600."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway_engine import wire
from gateway_engine.kinds import KINDS
from gateway_engine.quota.adaptive import AdaptiveCell
from gateway_engine.remaining import remaining_quota
from gateway_engine.routing import routing_table_from_config
from sim.config import load_config
from sim.kinds import adapter
from sim.limits import Charge, Limits

ROOT = Path(__file__).resolve().parents[2]
CEILING = 600.0
PROVIDERS = routing_table_from_config(json.loads((ROOT / "examples/providers.json").read_text())).providers
SIM = load_config(str(ROOT / "examples/sim-kinds.json"))


@pytest.mark.parametrize("name", sorted(PROVIDERS))
def test_no_demo_provider_is_held_below_its_configured_rate_by_its_headers_at_rest(name):
    gateway = PROVIDERS[name]
    cfg = SIM.providers[name]
    assert cfg.kind == gateway.kind
    limits = Limits(cfg, SIM.time_scale, 0.0)
    limits.take(Charge(requests=1, tokens=60, input_tokens=40, output_tokens=20), 0.0)  # one demo item
    sent = adapter(cfg, 60.0 / SIM.time_scale).headers(limits.state(0.0))
    headers = wire.for_kind(gateway.kind).rate_limit_headers({k.lower(): v for k, v in sent.items()})
    quota = remaining_quota(headers, gateway.kind, gateway.limits, ceiling=CEILING).checked(gateway.limits)
    if KINDS[gateway.kind].headers.followed:  # gemini and bedrock send none
        assert not quota.empty, (name, headers)  # something is followed: the check below is not vacuous
    cell = AdaptiveCell()
    cell.follow(0.0, (1e9, 1e9), gateway.limits, None, quota)
    view = cell.view(0.0, gateway.limits)
    for adjusted, configured in ((view.rpm, gateway.limits.rpm), (view.tpm, gateway.limits.tpm)):
        assert adjusted is None or adjusted >= configured * 0.999, (name, view, headers)
