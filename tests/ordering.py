"""The order in which `make test` hands test files to its pytest-xdist processes (``--dist loadfile``).

xdist gives a process one file at a time and the next file to whichever process is free first. By
default it queues the files by their number of tests, most first: the files holding one long test (the
multi-host system test, the failure-isolation test, the outage tests: 30–60 s each) then come last, and
the other process idles while the last of them runs. Here the files are queued longest first instead
(the longest-processing-time rule), so the long ones overlap each other and the files handed out last
are short ones; the tests and what they assert are unchanged, only the order of the files. The files
of a package with a package-scoped fixture are queued together (see ``longest_files_first``).

``SECONDS``: one file's seconds in one pytest process (setup, call and teardown of its tests), measured
2026-12-04 with ``-n 2 --dist loadfile`` per directory while other checkouts ran tests on the machine
(a quiet machine takes about half) — relative sizes are what matter. Files not listed (new ones, short ones) are estimated from their tests: a test
marked ``slow`` as ``SLOW_TEST_S``, any other as ``TEST_S``. Refresh the table from a run's JUnit XML:
``pytest -n 2 --dist loadfile --junitxml=run.xml`` then ``python -m tests.ordering run.xml``.

Only pytest-xdist processes reorder (a plain ``pytest`` run keeps the files in their usual order).
"""

from __future__ import annotations

import sys
from collections import defaultdict
from xml.etree import ElementTree

import pytest

SLOW_TEST_S = 10.0
TEST_S = 0.1
LISTED_FROM_S = 4.0  # the table lists files at least this long

SECONDS: dict[str, float] = {
    "tests/scheduling/test_warm_shutdown.py": 100,
    "tests/scheduling/test_outages.py": 75,
    "tests/scheduling/test_workers.py": 73,
    "tests/scheduling/test_provider_kinds.py": 70,
    "tests/scheduling/test_prefix_grouping.py": 70,
    "tests/dashboard/test_browser.py": 61,
    "tests/firsthour/test_single_process_submit.py": 58,
    "tests/provider_batches/test_workers.py": 57,
    "tests/interactive/test_fair_queue.py": 51,
    "tests/faults/test_isolation.py": 51,
    "tests/scheduling/test_redis_sentinel.py": 50,
    "tests/firsthour/test_make_up.py": 50,
    "tests/hardening/test_auth_throttle.py": 49,
    "tests/firsthour/test_commands.py": 49,
    "tests/firsthour/test_demo.py": 45,
    "tests/observability/test_metrics_default_dir.py": 45,
    "tests/interactive/test_langchain.py": 43,
    "tests/scheduling/test_default_pool.py": 42,
    "tests/test_settings_env.py": 42,
    "tests/system/test_multi_host.py": 41,
    "tests/engine/test_celery_workers.py": 40,
    "tests/limits/test_reload.py": 40,
    "tests/scheduling/test_redis_failover.py": 37,
    "tests/client/test_runnable.py": 33,
    "tests/firsthour/test_command_logs.py": 32,
    "tests/client/test_batch_options.py": 32,
    "tests/quota/test_multiprocess.py": 31,
    "tests/sim/test_sim_server.py": 31,
    "tests/client/test_example.py": 31,
    "tests/interactive/test_interactive_first.py": 31,
    "tests/scheduling/test_pause_workers.py": 31,
    "tests/limits/test_shared_keys.py": 30,
    "tests/scheduling/test_inprocess.py": 28,
    "tests/hardening/test_ingress.py": 27,
    "tests/architecture/test_defined_once.py": 26,
    "tests/sim/test_request_counts.py": 24,
    "tests/interactive/test_sdk.py": 22,
    "tests/sim/test_sdk_conformance.py": 22,
    "tests/client/test_gateway.py": 21,
    "tests/quota/test_adaptive_kinds.py": 21,
    "tests/hardening/test_production_settings.py": 21,
    "tests/sim/test_kinds_validation.py": 20,
    "tests/firsthour/test_single_process_guard.py": 20,
    "tests/test_load_providers.py": 19,
    "tests/dashboard/test_hostile_metadata.py": 18,
    "tests/quota/test_failover_errors.py": 17,
    "tests/faults/test_fault_suite.py": 17,
    "tests/system/test_openapi_guards.py": 17,
    "tests/webhooks/test_webhook_workers.py": 16,
    "tests/quota/test_buckets.py": 16,
    "tests/scheduling/test_place_unit.py": 16,
    "tests/openai/test_schema.py": 16,
    "tests/interactive/test_streaming.py": 16,
    "tests/observability/test_dashboard_prometheus.py": 15,
    "tests/api/test_schema.py": 15,
    "tests/system/test_post_to_rate_limited_provider.py": 15,
    "tests/scheduling/test_progress_snapshot_turn.py": 15,
    "tests/sim/test_streams.py": 15,
    "tests/cache/test_cache_workers.py": 14,
    "tests/limits/test_provider_side.py": 14,
    "tests/engine/test_batcher.py": 12,
    "tests/hardening/test_metrics_token.py": 12,
    "tests/provider_batches/test_fallbacks_inprocess.py": 12,
    "tests/quota/test_live_config.py": 12,
    "tests/observability/test_metrics_workers.py": 12,
    "tests/openai/test_blob_storage.py": 11,
    "tests/test_lint_types.py": 10,
    "tests/architecture/test_layers.py": 10,
    "tests/observability/test_otlp_export.py": 10,
    "tests/engine/test_token_before_lease.py": 10,
    "tests/provider_batches/test_route_inprocess.py": 10,
    "tests/dashboard/test_query_counts.py": 10,
    "tests/interactive/test_redis_outage.py": 10,
    "tests/engine/test_no_idle_token_holders.py": 9,
    "tests/openai/test_sdk_errors.py": 8,
    "tests/quota/test_leases.py": 8,
    "tests/engine/test_statements_per_item.py": 8,
    "tests/engine/test_parking.py": 7,
    "tests/limits/test_budget.py": 7,
    "tests/openai/test_sdk_cancel.py": 7,
    "tests/engine/test_batch_api_clients.py": 6,
    "tests/architecture/test_no_dead_readers.py": 6,
    "tests/openai/test_sdk_end_to_end.py": 6,
    "tests/providers/test_kinds.py": 6,
    "tests/hardening/test_csp.py": 6,
    "tests/sim/test_batch_apis.py": 6,
    "tests/hardening/test_stream_send.py": 6,
    "tests/cache/test_cache_execution.py": 6,
    "tests/providers/test_pauses.py": 6,
    "tests/dashboard/test_pages.py": 6,
    "tests/webhooks/test_webhooks.py": 6,
    "tests/sim/test_kinds_limits_faults.py": 5,
    "tests/quota/test_itpm_otpm.py": 5,
    "tests/teams/test_migration_from_batches.py": 5,
    "tests/interactive/test_schema_shapes.py": 5,
    "tests/architecture/test_private_access.py": 5,
    "tests/test_admin.py": 5,
    "tests/quota/test_pause.py": 5,
    "tests/interactive/test_disconnect.py": 5,
    "tests/quota/test_property.py": 5,
    "tests/api/test_submission.py": 4,
    "tests/api/test_input_polish.py": 4,
    "tests/openai/test_mapping.py": 4,
    "tests/engine/test_transports.py": 4,
}


def configure(config: pytest.Config) -> None:
    """On the xdist controller: keep the files in the order the processes collected them (ours)."""
    if getattr(config.option, "dist", "no") in ("loadfile", "loadscope") and hasattr(
        config.option, "loadscopereorder"
    ):
        config.option.loadscopereorder = False


def estimate(path: str, items: list[pytest.Item]) -> float:
    if path in SECONDS:
        return SECONDS[path]
    return sum(SLOW_TEST_S if item.get_closest_marker("slow") else TEST_S for item in items)


def package_fixture_home(items: list[pytest.Item]) -> str | None:
    """The directory of a package-scoped fixture these tests use (tests/client's ``stack``), if any."""
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        for defs in info.name2fixturedefs.values() if info else ():
            for fixturedef in defs:
                if fixturedef.scope == "package":
                    return fixturedef.baseid
    return None


def longest_files_first(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Group the collected tests by file, longest file first; inside a file the order stays as it was.

    The files of a package whose package-scoped fixture they use stay next to each other (the package
    as one block, placed by its total): a process that runs another file between two of them tears the
    fixture down and starts it again (tests/client's uvicorn and worker: one start per file, not one
    per process). Only in an xdist process (the controller queues the files in the order its processes
    collected them)."""
    if not hasattr(config, "workerinput"):
        return
    by_file: dict[str, list[pytest.Item]] = defaultdict(list)
    for item in items:
        by_file[item.nodeid.split("::", 1)[0]].append(item)
    seconds = {path: estimate(path, tests) for path, tests in by_file.items()}
    blocks: dict[str, list[str]] = defaultdict(list)
    for path, tests in by_file.items():
        blocks[package_fixture_home(tests) or path].append(path)
    order = sorted(blocks.values(), key=lambda paths: -sum(seconds[p] for p in paths))  # stable
    items[:] = [
        item for paths in order for path in sorted(paths, key=lambda p: -seconds[p]) for item in by_file[path]
    ]


def table(junit_paths: list[str]) -> dict[str, float]:
    """Seconds per file from JUnit XML reports (pytest's default: each test's setup + call + teardown)."""
    seconds: dict[str, float] = defaultdict(float)
    for junit in junit_paths:
        for case in ElementTree.parse(junit).iter("testcase"):
            seconds[_file_of(case.get("classname", ""))] += float(case.get("time") or 0)
    return dict(seconds)


def _file_of(classname: str) -> str:
    """``tests.scheduling.test_outages`` or ``tests.api.test_read.TestX`` → ``tests/…/test_….py``."""
    parts = classname.split(".")
    while parts and parts[-1][:1].isupper():  # a test class
        parts.pop()
    return "/".join(parts) + ".py"


if __name__ == "__main__":  # pragma: no cover - a maintenance command
    rows = sorted(table(sys.argv[1:]).items(), key=lambda kv: -kv[1])
    print("SECONDS: dict[str, float] = {")
    for path, s in rows:
        if s >= LISTED_FROM_S:
            print(f'    "{path}": {s:.0f},')
    print("}")
