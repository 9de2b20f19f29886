"""Write-side operations on providers and routing rules: the provider-file loader.

The file's fields, types, defaults and bounds are gateway_engine.provider_file's one table (the engine
parses the same file with it); bounds are checked here by the models' validators, built from it. Keys
the table does not know (typos such as `burst_second`) are reported as warnings with the closest known
field, or refused with ``strict`` (``load_providers --strict``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from gateway_engine.errors import ApplicationError
from gateway_engine.provider_file import (
    CONTRACT_ONLY_PROVIDER_FIELDS,
    FILE_KEYS,
    KIND_CHECKED_FIELDS,
    PROVIDER_FIELDS,
    ROUTE_FIELDS,
    SECRET_FIELDS,
    defaults,
    given_values,
    kind_defaults,
    kind_errors,
    type_errors,
    unknown_keys,
)

from .models import Provider, RoutingRule, secret_env_name
from .secrets import reveal


class ProviderConfigError(ApplicationError):
    """The provider file is invalid. `errors` lists every problem, each naming where and which field;
    `warnings` the keys nothing reads (the loader found them before refusing the file)."""

    code = "invalid_provider_file"

    def __init__(self, errors: list[str], warnings: list[str] | None = None):
        self.errors = errors
        self.warnings = warnings or []
        super().__init__("invalid provider file:\n" + "\n".join(f"  - {e}" for e in errors))


@dataclass
class LoadReport:
    changes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # keys of the file nothing reads (ignored)

    @property
    def changed(self) -> bool:
        return bool(self.changes)


def _route_values(entry: dict) -> dict:
    """priority, weight and enabled of a route entry (the table's defaults where the file omits them)."""
    options = defaults(ROUTE_FIELDS)
    return {**options, **{k: v for k, v in given_values(entry, ROUTE_FIELDS).items() if k in options}}


def _validation_messages(where: str, exc: ValidationError) -> list[str]:
    if hasattr(exc, "error_dict"):
        return [f"{where}.{f}: {' '.join(m)}" for f, m in exc.message_dict.items()]
    return [f"{where}: {' '.join(exc.messages)}"]


def _diff(instance, values: dict) -> list[str]:
    changed = []
    for name, value in values.items():
        current = getattr(instance, name)
        if name in SECRET_FIELDS:  # stored sealed: compared as the key it opens to
            current = reveal(current)
        if current != value:
            if name in SECRET_FIELDS:
                changed.append(f"{name} changed")
            else:
                changed.append(f"{name} {current!r} → {value!r}")
            setattr(instance, name, value)
    return changed


def unread_keys(data: Any) -> list[str]:
    """Every key of the file that nothing reads, one sentence each with the closest known key:
    top level, provider entries and route entries (gateway_engine.provider_file.unknown_keys)."""
    if not isinstance(data, dict):
        return []
    found = unknown_keys("file", data, FILE_KEYS)
    providers = data.get("providers")
    for i, entry in enumerate(providers if isinstance(providers, list) else []):
        label = entry.get("name") if isinstance(entry, dict) and isinstance(entry.get("name"), str) else None
        where = f"providers[{i}]" + (f" ({label})" if label else "")
        found += unknown_keys(where, entry, PROVIDER_FIELDS, CONTRACT_ONLY_PROVIDER_FIELDS)
    routes = data.get("routes")
    for i, entry in enumerate(routes if isinstance(routes, list) else []):
        named = isinstance(entry, dict) and all(isinstance(entry.get(k), str) for k in ("route", "provider"))
        where = f"routes[{i}]" + (f" ({entry['route']} → {entry['provider']})" if named else "")
        found += unknown_keys(where, entry, ROUTE_FIELDS)
    return found


def _apply_provider_entry(instance: Provider, values: dict, allow_origin_change: bool) -> list[str]:
    """Apply the file's values to a stored provider; a moved origin stays unconfirmed unless allowed."""
    was_confirmed = instance.confirmed_origin or instance.origin
    changes = _diff(instance, values)
    if not instance.confirmed_origin:
        instance.confirmed_origin = was_confirmed
    if instance.origin != instance.confirmed_origin:
        if allow_origin_change:
            instance.confirm_origin()
            changes.append(f"origin {instance.origin} confirmed (--allow-origin-change)")
        else:
            changes.append(
                f"origin changed to {instance.origin}: provider DISABLED until confirmed "
                "(admin, or load_providers --allow-origin-change)"
            )
    return changes


def _plan_provider(
    i: int,
    entry: Any,
    existing: dict,
    env_names: dict,
    seen: set,
    allow_origin_change: bool,
    errors: list[str],
) -> tuple[Provider, list[str], bool] | None:
    """Check one provider entry; the instance to save, its changes and whether it is new, or None."""
    label = entry.get("name") if isinstance(entry, dict) and isinstance(entry.get("name"), str) else None
    where = f"providers[{i}]" + (f" ({label})" if label else "")
    problems = type_errors(where, entry, PROVIDER_FIELDS)
    if problems:
        errors.extend(problems)
        return None
    if label in seen:
        errors.append(f"{where}.name: duplicate provider name in file")
        return None
    seen.add(label)
    values = given_values(entry, PROVIDER_FIELDS)  # a key the file omits keeps the stored value
    env_name = secret_env_name(label)
    twin = env_names.get(env_name)
    if twin is not None and twin != label:
        errors.append(
            f"{where}.name: its secret variable {env_name} is the same as provider {twin!r}'s; "
            "choose a name that differs in letters or digits"
        )
        return None
    env_names[env_name] = label
    instance = existing.get(label)
    created = instance is None
    if created:
        instance = Provider(**{**kind_defaults(values.get("kind")), **values})
        changes = ["created"]
    else:
        changes = _apply_provider_entry(instance, values, allow_origin_change)
    # the kind's own fields first, on the values as they would be stored (the file's over the row's)
    problems = kind_errors(where, {name: getattr(instance, name) for name in KIND_CHECKED_FIELDS})
    if problems:
        errors.extend(problems)
        return None
    try:
        instance.full_clean()
    except ValidationError as exc:
        errors.extend(_validation_messages(where, exc))
        return None
    return instance, changes, created


def _plan_routes(
    routes_in: list, provider_names: set[str], errors: list[str]
) -> tuple[list[tuple[dict, str]], set[tuple[str, str]]]:
    """Check every route entry; the valid ones and the (route, provider) keys the file names."""
    planned_routes: list[tuple[dict, str]] = []
    route_keys: set[tuple[str, str]] = set()
    for i, entry in enumerate(routes_in):
        where = f"routes[{i}]"
        problems = type_errors(where, entry, ROUTE_FIELDS)
        if problems:
            errors.extend(problems)
            continue
        where = f"routes[{i}] ({entry['route']} → {entry['provider']})"
        if entry["provider"] not in provider_names:
            errors.append(f"{where}.provider: unknown provider {entry['provider']!r}")
            continue
        key = (entry["route"], entry["provider"])
        if key in route_keys:
            errors.append(f"{where}: duplicate (route, provider) pair in file")
            continue
        route_keys.add(key)
        probe = RoutingRule(route=entry["route"], **_route_values(entry))
        try:
            probe.full_clean(exclude=["provider"], validate_unique=False, validate_constraints=False)
        except ValidationError as exc:
            errors.extend(_validation_messages(where, exc))
            continue
        planned_routes.append((entry, where))
    return planned_routes, route_keys


def _save_providers(
    planned: list[tuple[Provider, list[str], bool]], existing: dict, report: LoadReport
) -> dict:
    """Save the providers that changed; every provider by name, as saved."""
    saved: dict[str, Provider] = dict(existing)
    for instance, changes, created in planned:
        if changes:
            instance.save()
            verb = "created provider" if created else "updated provider"
            detail = "" if created else ": " + ", ".join(changes)
            report.changes.append(f"{verb} {instance.name}{detail}")
        saved[instance.name] = instance
    return saved


def _save_routes(
    planned_routes: list[tuple[dict, str]],
    route_keys: set[tuple[str, str]],
    saved: dict[str, Provider],
    prune_routes: bool,
    report: LoadReport,
) -> None:
    """Create or update the file's routing rules; with ``prune_routes`` delete the ones it omits."""
    current = {(r.route, r.provider.name): r for r in RoutingRule.objects.select_related("provider")}
    for entry, _where in planned_routes:
        key = (entry["route"], entry["provider"])
        values = _route_values(entry)
        rule = current.get(key)
        if rule is None:
            RoutingRule.objects.create(route=key[0], provider=saved[key[1]], **values)
            report.changes.append(
                f"created route {key[0]} → {key[1]} (priority {values['priority']}, weight {values['weight']})"
            )
        else:
            changes = _diff(rule, values)
            if changes:
                rule.save()
                report.changes.append(f"updated route {key[0]} → {key[1]}: " + ", ".join(changes))
    if prune_routes:
        for key, rule in current.items():
            if key not in route_keys:
                rule.delete()
                report.changes.append(f"deleted route {key[0]} → {key[1]}")


def load_provider_config(
    data: Any, *, prune_routes: bool = False, allow_origin_change: bool = False, strict: bool = False
) -> LoadReport:
    """Validate the whole file, then upsert providers and routing rules in one transaction.

    Nothing is written unless every entry is valid. Returns what changed. A base_url that moves a
    provider to another origin (scheme://host:port) is saved, but the provider stays disabled until
    confirmed — here with ``allow_origin_change`` (``load_providers --allow-origin-change``) or by a
    superuser in the admin. Two providers whose GATEWAY_PROVIDER_SECRET_<NAME> collide are refused.
    Keys nothing reads are ignored and listed in ``report.warnings``; with ``strict`` they are errors.
    """
    if not isinstance(data, dict):
        raise ProviderConfigError(["file: must be a JSON object with a 'providers' list"])
    unread = unread_keys(data)
    providers_in = data.get("providers")
    routes_in = data.get("routes", [])
    errors: list[str] = [f"{problem} (refused by --strict)" for problem in unread] if strict else []
    if not isinstance(providers_in, list):
        errors.append("providers: must be a list")
        providers_in = []
    if not isinstance(routes_in, list):
        errors.append("routes: must be a list")
        routes_in = []

    existing = {p.name: p for p in Provider.objects.all()}
    env_names = {secret_env_name(name): name for name in existing}
    seen: set[str] = set()
    planned: list[tuple[Provider, list[str], bool]] = []
    for i, entry in enumerate(providers_in):
        plan = _plan_provider(i, entry, existing, env_names, seen, allow_origin_change, errors)
        if plan is not None:
            planned.append(plan)
    planned_routes, route_keys = _plan_routes(routes_in, set(existing) | seen, errors)

    if errors:
        raise ProviderConfigError(errors, [] if strict else unread)

    report = LoadReport(warnings=unread)
    with transaction.atomic():
        saved = _save_providers(planned, existing, report)
        _save_routes(planned_routes, route_keys, saved, prune_routes, report)
    return report
