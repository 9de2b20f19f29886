import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from providers.adapters import provider_key
from providers.models import Provider, RoutingRule

EXAMPLE = {
    "providers": [
        {
            "name": "alpha",
            "base_url": "http://127.0.0.1:8900/alpha/v1",
            "model": "alpha-chat",
            "rpm": 60,
            "tpm": 100000,
            "max_concurrency": 6,
            "burst_seconds": 5,
            "timeout_seconds": 30,
            "max_retries": 3,
            "enabled": True,
            "api_key": "sk-alpha-secret",
        },
        {
            "name": "beta",
            "base_url": "https://beta.example/v1",
            "model": "beta-chat",
            "rpm": 30,
            "tpm": 60000,
            "max_concurrency": 3,
        },
    ],
    "routes": [
        {"route": "intent", "provider": "alpha", "priority": 0, "weight": 1},
        {"route": "intent", "provider": "beta", "priority": 1, "weight": 1},
    ],
}


def run(tmp_path, data, *args) -> str:
    path = tmp_path / "providers.json"
    path.write_text(json.dumps(data))
    out = StringIO()
    call_command("load_providers", str(path), *args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_load_twice_second_run_reports_no_changes(tmp_path):
    first = run(tmp_path, EXAMPLE)
    assert "created provider alpha" in first
    assert "created route intent → beta" in first
    assert "sk-alpha-secret" not in first
    assert run(tmp_path, EXAMPLE).strip() == "no changes"
    alpha = Provider.objects.get(name="alpha")
    assert (alpha.rpm, alpha.tpm, alpha.burst_seconds, provider_key(alpha)) == (
        60,
        100000,
        5.0,
        "sk-alpha-secret",
    )
    beta = Provider.objects.get(name="beta")
    assert (beta.burst_seconds, beta.timeout_seconds, beta.max_retries, beta.enabled) == (5.0, 30.0, 3, True)
    assert RoutingRule.objects.count() == 2


@pytest.mark.django_db
def test_update_reports_field_changes_and_hides_secrets(tmp_path):
    run(tmp_path, EXAMPLE)
    changed = json.loads(json.dumps(EXAMPLE))
    changed["providers"][0]["rpm"] = 120
    changed["providers"][0]["api_key"] = "sk-rotated"
    changed["routes"][1]["weight"] = 3
    out = run(tmp_path, changed)
    assert "updated provider alpha: rpm 60 → 120, api_key changed" in out
    assert "updated route intent → beta: weight 1 → 3" in out
    assert "sk-rotated" not in out and "sk-alpha-secret" not in out
    assert Provider.objects.get(name="alpha").rpm == 120


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (lambda d: d["providers"][0].update(rpm=0), "providers[0] (alpha).rpm"),
        (
            lambda d: d["providers"][1].update(base_url="ftp://beta.example/v1"),
            "providers[1] (beta).base_url",
        ),
        (lambda d: d["providers"][1].update(base_url="not a url"), "providers[1] (beta).base_url"),
        (lambda d: d["providers"][0].update(burst_seconds=0.5), "providers[0] (alpha).burst_seconds"),
        (lambda d: d["providers"][0].update(tpm="lots"), "providers[0] (alpha).tpm: must be int"),
        (lambda d: d["providers"][0].update(rpm=True), "providers[0] (alpha).rpm: must be int"),
        (lambda d: d["providers"][0].pop("model"), "providers[0] (alpha).model: is required"),
        (lambda d: d["providers"][0].update(max_concurrency=10**9), "providers[0] (alpha).max_concurrency"),
        (lambda d: d["routes"].append({"route": "x", "provider": "ghost"}), "routes[2] (x → ghost).provider"),
        (lambda d: d["routes"][0].update(weight=0), "routes[0] (intent → alpha).weight"),
        (lambda d: d["providers"].append(dict(d["providers"][0])), "providers[2] (alpha).name: duplicate"),
    ],
)
@pytest.mark.django_db
def test_invalid_file_is_rejected_whole_naming_provider_and_field(tmp_path, mutate, expected):
    run(tmp_path, EXAMPLE)
    before_providers = list(Provider.objects.order_by("name").values())
    before_rules = list(RoutingRule.objects.order_by("id").values())
    bad = json.loads(json.dumps(EXAMPLE))
    bad["providers"][1]["rpm"] = 45  # a valid change that must NOT be applied alongside the bad one
    mutate(bad)
    with pytest.raises(CommandError) as err:
        run(tmp_path, bad)
    assert expected in str(err.value)
    assert "nothing was changed" in str(err.value)
    assert list(Provider.objects.order_by("name").values()) == before_providers
    assert list(RoutingRule.objects.order_by("id").values()) == before_rules


@pytest.mark.django_db
def test_bad_rpm_in_fresh_db_exits_nonzero_via_manage_py(tmp_path, migrated_sqlite):
    import subprocess
    import sys
    from pathlib import Path

    bad = json.loads(json.dumps(EXAMPLE))
    bad["providers"][0]["rpm"] = 0
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    root = Path(__file__).resolve().parent.parent
    db = migrated_sqlite(tmp_path / "x.sqlite3")  # a fresh database after `manage.py migrate` (conftest.py)
    env = {"PATH": "/usr/bin:/bin", "DATABASE_URL": f"sqlite:///{db}"}
    result = subprocess.run(
        [sys.executable, "manage.py", "load_providers", str(path)],
        cwd=root,
        capture_output=True,
        text=True,
        env=env,
    )
    assert result.returncode != 0
    assert "providers[0] (alpha).rpm" in result.stderr


@pytest.mark.django_db
def test_not_json_is_a_clear_error(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text("{nope")
    with pytest.raises(CommandError, match="not valid JSON"):
        call_command("load_providers", str(path))
    with pytest.raises(CommandError, match="no such file"):
        call_command("load_providers", str(tmp_path / "missing.json"))


@pytest.mark.django_db
def test_prune_routes_deletes_rules_not_in_file(tmp_path):
    run(tmp_path, EXAMPLE)
    fewer = json.loads(json.dumps(EXAMPLE))
    fewer["routes"] = fewer["routes"][:1]
    assert "no changes" in run(tmp_path, fewer)
    out = run(tmp_path, fewer, "--prune-routes")
    assert "deleted route intent → beta" in out
    assert list(RoutingRule.objects.values_list("route", "provider__name")) == [("intent", "alpha")]


@pytest.mark.django_db
def test_env_secret_overrides_database_key(make_provider, monkeypatch):
    p = make_provider("my-prov", api_key="db-key")
    assert p.secret_env_name == "GATEWAY_PROVIDER_SECRET_MY_PROV"
    assert provider_key(p) == "db-key"
    monkeypatch.setenv("GATEWAY_PROVIDER_SECRET_MY_PROV", "env-key")
    assert provider_key(p) == "env-key"


# ---- one table of the provider file's fields (gateway_engine.provider_file) ----------------------------


def _model_field_bounds(model, name):
    """(minimum, maximum) a model field enforces: its Min/MaxValueValidators, the database's integer
    range included (0 for positive fields)."""
    from django.core.validators import MaxValueValidator, MinValueValidator

    validators = model._meta.get_field(name).validators
    lows = [v.limit_value for v in validators if isinstance(v, MinValueValidator)]
    highs = [v.limit_value for v in validators if isinstance(v, MaxValueValidator)]
    return (max(lows) if lows else None), (min(highs) if highs else None)


@pytest.mark.parametrize(
    ("model", "spec_name"), [(Provider, "PROVIDER_FIELDS"), (RoutingRule, "ROUTE_FIELDS")]
)
def test_model_defaults_and_bounds_are_the_tables(model, spec_name):
    from gateway_engine import provider_file

    spec = getattr(provider_file, spec_name)
    for name, f in spec.items():
        if name in ("route", "provider") and model is RoutingRule:
            continue  # the rule's route slug and its foreign key
        field = model._meta.get_field(name)
        if f.required:
            assert not field.has_default(), name
        else:
            assert field.get_default() == f.default, name
        if f.minimum is not None or f.maximum is not None:
            assert _model_field_bounds(model, name) == (f.minimum, f.maximum), name


def _contract_text() -> str:
    from pathlib import Path

    return (Path(__file__).resolve().parent.parent / "docs" / "contract.md").read_text(encoding="utf-8")


def _contract_provider_file() -> dict:
    import re

    text = _contract_text()
    section = text[text.index("Provider file format") :]
    return json.loads(re.search(r"```json\n(.*?)```", section, re.S).group(1))


def test_contract_example_names_every_field_with_the_tables_defaults():
    from gateway_engine.provider_file import PROVIDER_FIELDS, ROUTE_FIELDS

    data = _contract_provider_file()
    entry = data["providers"][0]
    # the provider-adapter fields (#21) are the contract's table of optional fields, not the example's
    adapter_fields = {"kind", "deployment", "api_version", "itpm", "otpm", "adaptive"}  # + shared keys (#24)
    adapter_fields |= {"region", "aws_access_key_id"}  # kind bedrock (#37)
    # and so are the provider-batch fields (#23: the contract's three and the documented extensions)
    adapter_fields |= {name for name in PROVIDER_FIELDS if name.startswith("batch_")}
    assert set(entry) == set(PROVIDER_FIELDS) - adapter_fields
    for name, f in PROVIDER_FIELDS.items():
        if not f.required and name not in ("api_key", *adapter_fields):
            assert entry[name] == f.default, name
    table = _contract_text()[_contract_text().index("Provider fields added by") :]
    for name in adapter_fields:
        assert f"`{name}`" in table.split("## 4.")[0], name
    for route in data["routes"]:
        assert set(route) <= set(ROUTE_FIELDS) and {"route", "provider"} <= set(route)


@pytest.mark.django_db
def test_engine_and_loader_read_one_file_alike(tmp_path):
    """The same file through the engine's parser and through load_providers → rows → adapters gives
    the same ProviderConfig and rules: the defaults of omitted keys included."""
    from dataclasses import replace

    from gateway_engine.routing import routing_table_from_config
    from providers.adapters import routing_table_from_models

    data = _contract_provider_file()
    minimal = {k: data["providers"][0][k] for k in ("base_url", "model", "rpm", "tpm", "max_concurrency")}
    data["providers"].append({**minimal, "name": "beta"})  # every optional key omitted
    data["routes"].append({"route": "other", "provider": "beta"})
    run(tmp_path, data)
    engine = routing_table_from_config(data)
    loaded = routing_table_from_models(Provider.objects.all(), RoutingRule.objects.select_related("provider"))
    assert set(loaded.providers) == set(engine.providers) == {"alpha", "beta"}
    for name, config in engine.providers.items():
        stored = loaded.providers[name]
        # the adapter adds the settings' jitter margin to the limits; everything else is the file's
        stored = replace(stored, limits=replace(stored.limits, margin_seconds=0.0))
        assert stored == config and stored.api_key == config.api_key, name
    assert sorted(loaded.rules, key=repr) == sorted(engine.rules, key=repr)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("rpm", True, ".rpm: must be int, got bool True"),
        ("tpm", "lots", ".tpm: must be int, got str 'lots'"),
        ("burst_seconds", "5", ".burst_seconds: must be int or float"),
        ("enabled", 1, ".enabled: must be bool"),
        ("model", None, ".model: is required"),
        ("rpm", 0, ".rpm"),
        ("tpm", 10**10, ".tpm"),
        ("max_concurrency", 10**9, ".max_concurrency"),
        ("burst_seconds", 0.5, ".burst_seconds"),
        ("timeout_seconds", 0.01, ".timeout_seconds"),
        ("max_retries", 21, ".max_retries"),
        ("max_retries", -1, ".max_retries"),
    ],
)
@pytest.mark.django_db
def test_engine_and_loader_refuse_the_same_provider_entries(tmp_path, field, value, message):
    from gateway_engine.routing import ProviderConfig

    entry = dict(EXAMPLE["providers"][0])
    if value is None:
        entry.pop(field)
    else:
        entry[field] = value
    with pytest.raises(ValueError) as engine_err:
        ProviderConfig.from_dict(entry, "providers[0]")
    assert message in str(engine_err.value)
    with pytest.raises(CommandError) as loader_err:
        run(tmp_path, {"providers": [entry]})
    assert message in str(loader_err.value)


@pytest.mark.parametrize(
    ("field", "value"), [("priority", 1001), ("priority", -1), ("weight", 0), ("weight", "1")]
)
@pytest.mark.django_db
def test_engine_and_loader_refuse_the_same_route_entries(tmp_path, field, value):
    from gateway_engine.routing import routing_table_from_config

    data = json.loads(json.dumps(EXAMPLE))
    data["routes"][0][field] = value
    with pytest.raises(ValueError, match=rf"routes\[0\]\.{field}"):
        routing_table_from_config(data)
    with pytest.raises(CommandError, match=rf"routes\[0\]( \(intent → alpha\))?\.{field}"):
        run(tmp_path, data)


# --- keys nothing reads (#28) -------------------------------------------------------------------------
# Before: a typo was ignored in silence — `"burst_second": 5`, `"max_retry": 0` or a top-level "route"
# gave "no changes" and exit 0, and the provider kept the default burst, retries or routes.


def run_both(tmp_path, data, *args) -> tuple[str, str]:
    path = tmp_path / "providers.json"
    path.write_text(json.dumps(data))
    out, err = StringIO(), StringIO()
    call_command("load_providers", str(path), *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def with_typos() -> dict:
    data = json.loads(json.dumps(EXAMPLE))
    data["providers"][0]["burst_second"] = 5
    data["providers"][1]["max_retry"] = 0
    data["route"] = [{"route": "intent", "provider": "beta"}]
    data["routes"][0]["wieght"] = 2
    return data


@pytest.mark.django_db
def test_unknown_keys_are_named_with_the_closest_known_key_and_the_rest_loads(tmp_path):
    run(tmp_path, EXAMPLE)
    out, err = run_both(tmp_path, with_typos())
    assert out.strip() == "no changes"  # the contract's "extra keys allowed": still loaded, not refused
    for expected in (
        "providers[0] (alpha): `burst_second`: unknown field — did you mean `burst_seconds`?",
        "providers[1] (beta): `max_retry`: unknown field — did you mean `max_retries`?",
        "file: `route`: unknown field — did you mean `routes`?",
        "routes[0] (intent → alpha): `wieght`: unknown field — did you mean `weight`?",
    ):
        assert expected in err, err
    assert "4 key(s)" in err and "--strict" in err


@pytest.mark.django_db
def test_strict_refuses_unknown_keys_and_stores_nothing(tmp_path):
    with pytest.raises(CommandError) as refused:
        run_both(tmp_path, with_typos(), "--strict")
    message = str(refused.value)
    assert "nothing was changed" in message
    assert "`burst_second`: unknown field — did you mean `burst_seconds`? (refused by --strict)" in message
    assert "`route`: unknown field — did you mean `routes`?" in message
    assert not Provider.objects.exists() and not RoutingRule.objects.exists()
    out, err = run_both(tmp_path, EXAMPLE, "--strict")  # a clean file loads as without --strict
    assert "created provider alpha" in out and err == ""


@pytest.mark.django_db
def test_keys_without_a_close_match_list_the_known_ones_and_the_contracts_fields_load_silently(tmp_path):
    data = json.loads(json.dumps(EXAMPLE))
    data["providers"][0]["zzz"] = 1
    data["providers"][0]["adaptive"] = False  # docs/contract.md §3, implemented since #24
    data["providers"][0]["comment"] = "a note"  # free text: allowed everywhere without a warning
    data["comment"] = "a note"
    _, err = run_both(tmp_path, data)
    assert "providers[0] (alpha): `zzz`: unknown field (known: name, base_url, model, rpm," in err
    assert "`adaptive`" not in err  # implemented since #24
    assert "`batch_api`" not in err  # implemented since #23
    assert "`kind`" not in err  # implemented since #21
    assert "comment" not in err


@pytest.mark.django_db
def test_errors_and_unknown_keys_are_both_reported(tmp_path):
    data = with_typos()
    data["providers"][0]["rpm"] = 0
    path = tmp_path / "providers.json"
    path.write_text(json.dumps(data))
    err = StringIO()
    with pytest.raises(CommandError, match=r"providers\[0\] \(alpha\)\.rpm"):
        call_command("load_providers", str(path), stdout=StringIO(), stderr=err)
    assert "did you mean `burst_seconds`?" in err.getvalue()


@pytest.mark.django_db
def test_the_shipped_and_contract_files_have_no_unknown_keys(tmp_path):
    from pathlib import Path

    from gateway_engine.kinds import KINDS

    shipped = json.loads((Path(__file__).resolve().parent.parent / "examples" / "providers.json").read_text())
    assert {p["kind"] for p in shipped["providers"]} == set(KINDS)  # one of each kind
    for data in (shipped, _contract_provider_file()):
        # each file on its own; the contract example routes to a "beta" it does not list: left out
        Provider.objects.all().delete()
        data = json.loads(json.dumps(data))
        named = {p["name"] for p in data["providers"]}
        data["routes"] = [r for r in data["routes"] if r["provider"] in named]
        _, err = run_both(tmp_path, data, "--strict")
        assert err == ""


def test_the_engine_warns_about_unknown_keys_too():
    """CrossProviderBatcher.from_config / ProviderConfig.from_dict: a ProviderFileWarning per key, the
    entry still parsed (gateway_engine stays Django-free: the warning comes from provider_file)."""
    from gateway_engine.provider_file import ProviderFileWarning
    from gateway_engine.routing import ProviderConfig, routing_table_from_config

    entry = {**EXAMPLE["providers"][0], "burst_second": 5}
    with pytest.warns(
        ProviderFileWarning, match="`burst_second`: unknown field — did you mean `burst_seconds`"
    ):
        config = ProviderConfig.from_dict(entry, "providers[0]")
    assert config.limits.burst_seconds == 5.0
    data = json.loads(json.dumps(EXAMPLE))
    data["routes"][0]["prio"] = 1
    with pytest.warns(
        ProviderFileWarning, match=r"routes\[0\]: `prio`: unknown field — did you mean `priority`"
    ):
        routing_table_from_config(data)
