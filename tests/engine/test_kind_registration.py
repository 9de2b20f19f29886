"""The guard against a half-registered provider kind: every kind of gateway_engine/kinds.py KINDS has a
wire module that streams with the framing and signs as its descriptor says, a simulator model
(sim/kind_config.py, the simulator's URL for it, its batch API where the gateway speaks one), the
Django model's choices and check constraints in the migrations, and nothing else lists kinds of its own.

How it fails: add a descriptor to KINDS without a wire module, a simulator kind or a migration (or
drop ``bedrock`` from sim/kind_config.KINDS, or set a kind's ``signed`` without a ``sign``), and the
test of that part names the kind."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from gateway_engine import kinds as kind_registry
from gateway_engine import provider_file
from gateway_engine.kinds import FRAMINGS, KINDS
from gateway_engine.wire import KNOWN_KINDS, for_kind, streaming_for_kind
from gateway_engine.wire.framing import framing_for
from sim import batch_config as sim_batches
from sim import kind_config as sim_kinds
from sim.testing import KIND_TAILS


def half_registered() -> dict[str, list[str]]:
    """{kind: what is missing} over KINDS (empty: every kind is whole)."""
    missing: dict[str, list[str]] = {}
    for name, descriptor in KINDS.items():
        gaps = missing.setdefault(name, [])
        if name not in KNOWN_KINDS:
            gaps.append("wire module (gateway_engine.wire.for_kind)")
        else:
            wire = for_kind(name)
            if not callable(getattr(streaming_for_kind(name), "stream_decoder", None)):
                gaps.append("stream decoder")
            if descriptor.signed != callable(getattr(wire, "sign", None)):
                gaps.append(f"signed={descriptor.signed} but the wire format's sign does not agree")
        if descriptor.framing not in FRAMINGS or framing_for(name).name != descriptor.framing:
            gaps.append(f"framing {descriptor.framing!r}")
        if name not in sim_kinds.KINDS or name not in sim_kinds.KIND_FORMS or name not in sim_kinds.KIND_KEYS:
            gaps.append("simulator kind (sim/kind_config.py KINDS, KIND_FORMS, KIND_KEYS)")
        if name not in KIND_TAILS:
            gaps.append("simulator URL (sim/testing.py KIND_TAILS)")
        if (descriptor.batch_api is not None) != (name in sim_batches.BATCH_KINDS):
            gaps.append("simulator batch API (sim/batch_config.py BATCH_KINDS) disagrees with batch_api")
        if descriptor.batch_api is None and not descriptor.why_no_batch_api:
            gaps.append("why_no_batch_api (batch_api is None: say why)")
        for field_name in (*descriptor.only_fields, *descriptor.required_fields):
            if field_name not in provider_file.PROVIDER_FIELDS:
                gaps.append(f"field {field_name!r} in provider_file.PROVIDER_FIELDS")
        if not gaps:
            del missing[name]
    return missing


def test_no_kind_is_half_registered():
    assert half_registered() == {}


def test_nothing_lists_kinds_of_its_own():
    assert KNOWN_KINDS == provider_file.PROVIDER_KINDS == tuple(sorted(KINDS))
    assert set(sim_kinds.KINDS) == set(KINDS), "the simulator's kinds are the engine's"


def test_a_descriptor_without_its_parts_is_caught(monkeypatch):
    """The guard fails for a kind added to KINDS alone (what forgetting the wire, the simulator and the
    why of a missing batch API looks like)."""
    extra = kind_registry.ProviderKind("mistral", kind_registry.KindHeaders("none", "none", "docs"))
    monkeypatch.setattr(kind_registry, "KINDS", {**KINDS, "mistral": extra})
    monkeypatch.setattr(__import__(__name__, fromlist=["KINDS"]), "KINDS", kind_registry.KINDS)
    gaps = half_registered()
    assert set(gaps) == {"mistral"}
    assert any("wire module" in g for g in gaps["mistral"])
    assert any("simulator kind" in g for g in gaps["mistral"])
    assert any("why_no_batch_api" in g for g in gaps["mistral"])


def test_a_descriptor_cannot_leave_out_what_its_headers_mean():
    """No silent default for the remaining-header meaning (forgetting it once turned ``adaptive`` off)."""
    with pytest.raises(TypeError, match="headers"):
        kind_registry.ProviderKind("mistral")  # type: ignore[call-arg]


def test_a_signed_kind_without_a_signer_is_caught(monkeypatch):
    import dataclasses

    kind = next(k for k, d in KINDS.items() if not d.signed)
    changed = {**KINDS, kind: dataclasses.replace(KINDS[kind], signed=True)}
    monkeypatch.setattr(__import__(__name__, fromlist=["KINDS"]), "KINDS", changed)
    assert "sign does not agree" in " ".join(half_registered()[kind])


@pytest.mark.django_db
def test_the_model_choices_and_constraints_are_the_descriptors_and_migrated():
    from providers.models import KIND_CONSTRAINTS, Provider

    choices = [value for value, _ in Provider._meta.get_field("kind").choices]
    assert choices == list(provider_file.PROVIDER_KINDS)
    names = {c.name for c in Provider._meta.constraints}
    assert {c.name for c in KIND_CONSTRAINTS} <= names
    assert len(KIND_CONSTRAINTS) == len(kind_registry.complete_kinds())
    out = io.StringIO()
    try:  # a changed choice list or constraint without its migration
        call_command("makemigrations", "providers", "--check", "--dry-run", stdout=out, stderr=out)
    except SystemExit:
        pytest.fail(f"the Provider model's kind choices/constraints need a migration:\n{out.getvalue()}")


def test_the_tests_that_run_every_kind_run_every_kind():
    """The end-to-end tests that go through each kind (interactive lane plain and streamed, the wire
    against the simulator) keep a kind list of their own (each kind's fields); a kind missing there fails
    here. The Celery batch across every kind reads KINDS itself (tests/scheduling/test_provider_kinds.py)."""
    from tests.interactive.test_sdk import KINDS as INTERACTIVE
    from tests.scheduling.test_provider_kinds import KINDS as CELERY
    from tests.sim.test_gateway_wire_against_sim import FORMS, GATEWAY

    assert {c["kind"] for c in INTERACTIVE.values()} == set(KINDS)
    assert set(GATEWAY) == set(FORMS) == set(KINDS)
    assert set(CELERY.values()) == set(KINDS)
