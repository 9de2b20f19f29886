"""The provider-batch fields (docs/provider_batches.md): defaults by kind, ``batch_api`` refused on a
gemini provider naming the field (the engine's parser, the loader, the model's clean), Azure's
``batch_deployment`` required with it; the ``provider_batch`` option refused naming the field."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from batches.submission.errors import SubmissionError
from batches.submission.options import batch_options
from gateway_engine.provider_batch_choice import goes_to_batch_api
from gateway_engine.provider_file import batch_limits, kind_errors
from gateway_engine.routing import ProviderConfig
from providers.models import Provider
from providers.services import ProviderConfigError, load_provider_config

BASE = {
    "name": "p",
    "base_url": "https://x.example/v1",
    "model": "m",
    "rpm": 60,
    "tpm": 1000,
    "max_concurrency": 2,
}


def test_defaults_follow_the_kind():
    oa = batch_limits("openai", {"batch_api": True})
    an = batch_limits("anthropic", {"batch_api": True})
    assert (oa.max_requests, oa.max_bytes, oa.price_factor, oa.turnaround_seconds, oa.min_window_seconds) == (
        50_000, 200 * 1024 * 1024, 0.5, 86_400, 86_400)  # fmt: skip
    assert (an.max_requests, an.max_bytes) == (100_000, 256 * 1024 * 1024)
    own = batch_limits("openai", {"batch_api": True, "batch_turnaround_seconds": 3600})
    assert own.min_window_seconds == 3600  # defaults to the turnaround


def test_batch_api_on_gemini_is_refused_naming_the_field():
    assert kind_errors("providers[0]", {"kind": "gemini", "batch_api": True}) == [
        "providers[0].batch_api: kind gemini has no batch API the gateway speaks (the gateway does not speak "
        "Gemini's batch mode) (kinds: anthropic, azure_openai, openai)"
    ]
    with pytest.raises(ValueError, match=r"batch_api: kind gemini"):
        ProviderConfig.from_dict({**BASE, "kind": "gemini", "batch_api": True})
    az = {"kind": "azure_openai", "api_version": "2024-10-21", "batch_api": True}
    assert kind_errors("p", az) == [
        "p.batch_deployment: required with batch_api for kind azure_openai (the Global-Batch deployment)"
    ]
    assert kind_errors("p", {**az, "batch_deployment": "gpt-4o-batch"}) == []
    assert kind_errors("p", {"kind": "openai", "batch_deployment": "x"}) == [
        "p.batch_deployment: only for kind azure_openai, not for kind openai"
    ]


@pytest.mark.django_db
def test_the_loader_and_the_model_refuse_batch_api_on_gemini():
    with pytest.raises(ProviderConfigError) as refused:
        load_provider_config(
            {
                "providers": [
                    {**BASE, "kind": "gemini", "base_url": "https://g.example/v1beta", "batch_api": True}
                ]
            }
        )
    assert any("providers[0] (p).batch_api: kind gemini" in e for e in refused.value.errors)
    assert not Provider.objects.exists()
    with pytest.raises(ValidationError) as invalid:
        Provider(**{**BASE, "kind": "gemini", "batch_api": True}).full_clean()
    assert set(invalid.value.message_dict) == {"batch_api"}
    report = load_provider_config({"providers": [{**BASE, "batch_api": True, "batch_max_requests": 500}]})
    assert not report.warnings  # the batch fields are read, not "unsupported"
    assert Provider.objects.get().batch_limits.max_requests == 500


def test_the_option_is_checked_and_auto_needs_a_long_enough_window():
    with pytest.raises(SubmissionError) as refused:
        batch_options(None, "24h", provider_batch="sometimes")
    assert [e.field for e in refused.value.errors] == ["provider_batch"]
    config = ProviderConfig.from_dict({**BASE, "batch_api": True, "batch_min_window_seconds": 3600})
    plain = ProviderConfig.from_dict(BASE)
    assert goes_to_batch_api("auto", 3600, config) and not goes_to_batch_api("auto", 3599, config)
    assert not goes_to_batch_api("auto", None, config) and goes_to_batch_api("always", None, config)
    assert not goes_to_batch_api("never", 86_400, config) and not goes_to_batch_api("auto", 86_400, plain)


@pytest.mark.django_db
def test_the_admin_refuses_batch_api_on_gemini_naming_the_field(client):
    from django.urls import reverse

    from tests.factories import login_superuser

    login_superuser(client)
    form = {**BASE, "name": "gem", "kind": "gemini", "base_url": "https://g.example/v1beta", "batch_api": "on",
            "burst_seconds": 5, "timeout_seconds": 30, "max_retries": 3, "enabled": "on",
            "routes-TOTAL_FORMS": 0, "routes-INITIAL_FORMS": 0}  # fmt: skip
    response = client.post(reverse("admin:providers_provider_add"), form)
    assert response.status_code == 200  # the form again, with the error on its field
    assert "kind gemini has no batch API" in response.content.decode()
    assert not Provider.objects.exists()
    form.pop("batch_api")
    assert client.post(reverse("admin:providers_provider_add"), form).status_code == 302
    assert Provider.objects.get().batch_price_factor == 0.5
