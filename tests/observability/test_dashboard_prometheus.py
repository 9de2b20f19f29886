"""The Grafana dashboard names only exported metrics; a real Prometheus scrapes /metrics and runs every
panel's query."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import httpx
import pytest
import yaml
from django.test import override_settings
from prometheus_client import generate_latest

from batches import tasks
from observability.views import metrics_registry
from tests.factories import make_batch
from tests.factories import work_item as q
from tests.servers import free_port

from .helpers import metric_names, samples, value

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "batch-gateway.json"
SCRAPE_CONFIG = ROOT / "deploy" / "prometheus" / "prometheus.yml"
METRIC_RE = re.compile(r"\bgateway_[a-z0-9_]+")
TOKEN = "scrape-token-3b9f"

SIM = {
    "providers": {
        "alpha": {"median_ms": 5, "status_script": [429, 500], "completion_tokens": 4},
        "gamma": {"median_ms": 5, "fixed_status": 400},
    }
}

pytestmark = pytest.mark.django_db(transaction=True)


def dashboard_queries() -> list[str]:
    data = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for panel in data["panels"] for t in panel.get("targets", [])]
    exprs += [v["definition"] for v in data["templating"]["list"] if v.get("definition")]
    return exprs


@pytest.fixture
def ran_batch(sim_server, make_provider, team, redis_sync):
    """One eager batch in this process: every metric family gets series."""
    sim = sim_server(SIM)
    make_provider("alpha", base_url=sim.provider_url("alpha"), rpm=60_000, burst_seconds=1, max_concurrency=3,
                  timeout_seconds=5, price_prompt_per_million="1", price_completion_per_million="2")  # fmt: skip
    make_provider("gamma", base_url=sim.provider_url("gamma"), rpm=60_000, burst_seconds=1, timeout_seconds=5)
    items = [q(f"a{i}", provider="alpha", max_tokens=4) for i in range(10)] + [q("g0", provider="gamma")]
    # what /metrics sums accumulates over the test session (this process's registry, and the run's
    # multiprocess directory that earlier tests' workers wrote to): tests compare increases
    before = samples(generate_latest(metrics_registry()).decode())
    tasks.start_batch.delay(str(make_batch(team, items).id))
    return sim, before


def test_metrics_token_required_when_set(client):
    with override_settings(GATEWAY_METRICS_TOKEN=TOKEN):
        assert client.get("/metrics").status_code == 403
        assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
        ok = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert ok.status_code == 200 and ok["Content-Type"].startswith("text/plain")
    assert "gateway_scrape_errors" in ok.content.decode()


def test_every_grafana_panel_names_only_exported_metrics(ran_batch, client):
    exported = metric_names(client.get("/metrics").content.decode())
    queries = dashboard_queries()
    assert len(queries) >= 20
    used = {name for expr in queries for name in METRIC_RE.findall(expr)}
    assert used, "no gateway_ metric in the dashboard"
    assert used - exported == set(), f"panels query metrics /metrics does not export: {used - exported}"
    # the dashboard covers the seed's four troubleshooting steps, in order
    rows = [p["title"] for p in json.loads(DASHBOARD.read_text())["panels"] if p["type"] == "row"]
    assert [r.split(".")[0] for r in rows] == ["1", "2", "3", "4"]


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_prometheus_scrapes_the_gateway_and_runs_every_panel_query(ran_batch, live_server, tmp_path, team):
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("the prometheus binary is not installed (scripts/ensure_prometheus.sh installs Debian's)")
    sim, before = ran_batch
    counted = sim.counters()["providers"]
    make_batch(team, [q(f"wait{i}", provider="alpha") for i in range(3)])  # queued, not started
    # the shipped scrape config, pointed at this test's server and token
    config = yaml.safe_load(SCRAPE_CONFIG.read_text())
    job = config["scrape_configs"][0]
    host = live_server.url.split("//", 1)[1]
    job["static_configs"] = [{"targets": [host]}]
    (tmp_path / "token").write_text(TOKEN)
    job["authorization"]["credentials_file"] = str(tmp_path / "token")
    config["global"]["scrape_interval"] = "1s"
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    proc = subprocess.Popen(
        [binary, f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=open(tmp_path / "prometheus.log", "wb"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    api = f"http://127.0.0.1:{port}/api/v1"

    def query(expr: str) -> dict:
        r = httpx.get(f"{api}/query", params={"query": expr}, timeout=10)
        body = r.json()
        assert body["status"] == "success", (expr, body)
        return body["data"]

    try:
        with override_settings(GATEWAY_METRICS_TOKEN=TOKEN):
            deadline = time.monotonic() + 60
            samples_seen = []
            while time.monotonic() < deadline:
                try:
                    samples_seen = query("count_over_time(gateway_leases_max[1m])")["result"]
                except (httpx.HTTPError, ValueError, AssertionError):
                    samples_seen = []
                if samples_seen and min(float(s["value"][1]) for s in samples_seen) >= 3:
                    break
                time.sleep(0.5)
            assert samples_seen, (tmp_path / "prometheus.log").read_text()[-3000:]
            targets = httpx.get(f"{api}/targets", timeout=10).json()["data"]["activeTargets"]
            assert [t["health"] for t in targets] == ["up"], targets

            # what Prometheus stored equals what the simulator counted
            for provider in ("alpha", "gamma"):
                got = query(f'sum(gateway_provider_requests_total{{provider="{provider}"}})')["result"]
                earlier = value(before, "gateway_provider_requests_total", provider=provider)
                assert float(got[0]["value"][1]) - earlier == counted[provider]["requests"], provider
            got = query('sum(gateway_provider_requests_total{provider="alpha",outcome="429"})')["result"]
            earlier = value(before, "gateway_provider_requests_total", provider="alpha", outcome="429")
            assert float(got[0]["value"][1]) - earlier == counted["alpha"]["rate_limited_429"] == 1
            queued = query("sum(gateway_queue_items)")["result"]
            assert float(queued[0]["value"][1]) == 3
            leases = query('gateway_leases_max{provider="alpha"}')["result"]
            assert float(leases[0]["value"][1]) == 3

            # every panel query is valid PromQL for this Prometheus; gauges return data
            for expr in dashboard_queries():
                if expr.startswith("label_values("):
                    continue
                concrete = expr.replace("$provider", ".*").replace("$__rate_interval", "1m")
                data = query(concrete)
                if "rate(" not in concrete and "histogram_quantile" not in concrete:
                    assert data["result"], f"no data for {expr}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def test_single_process_metrics_count_the_in_process_batch(ran_batch, client):
    sim, before = ran_batch
    m = samples(client.get("/metrics").content.decode())
    counted = sim.counters()["providers"]

    def grew(name: str, **labels) -> float:
        return value(m, name, **labels) - value(before, name, **labels)

    assert grew("gateway_provider_requests_total", provider="gamma", outcome="4xx") == 1
    assert grew("gateway_provider_requests_total", provider="alpha") == counted["alpha"]["requests"] == 12
    assert grew("gateway_provider_requests_total", provider="alpha", outcome="5xx") == 1
    assert (
        grew("gateway_provider_tokens_total", provider="alpha", kind="completion")
        == counted["alpha"]["billed_completion_tokens"]
    )
    assert grew("gateway_items_total", status="failed") == 1
    assert grew("gateway_provider_cost_total", provider="alpha") == pytest.approx(
        (counted["alpha"]["billed_prompt_tokens"] * 1 + counted["alpha"]["billed_completion_tokens"] * 2)
        / 1e6
    )
