"""Shared pieces of the benchmarks: the seed workload, simulator settings, the quota floor, reporting,
and running the gateway's pieces (a scratch database, gunicorn, free ports).

docs/seed.md §4 workload: every user message needs three answers from three providers —
intent (alpha), sentiment (beta) and summary (local). A user request is done when all three are back.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import platform
import random
import re
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_SIM = ROOT / "examples" / "sim.json"

# route -> (provider, max_tokens, instruction)
ROUTES: dict[str, tuple[str, int, str]] = {
    "intent": ("alpha", 16, "Classify the intent of this customer message in one or two words."),
    "sentiment": ("beta", 8, "Answer positive, neutral or negative: the sentiment of this message."),
    "summary": ("local", 120, "Summarise this customer message in one sentence."),
}
TAG_RE = r"\[(u\d+)\]"  # the simulator traces requests by this tag in the message

_SUBJECTS = [
    "my order", "the invoice", "the mobile app", "your delivery driver", "the refund", "the new plan",
    "the login page", "the support chat", "the warranty", "the premium subscription", "the price change",
    "the replacement part", "my account", "the checkout", "the tracking number",
]  # fmt: skip
_PROBLEMS = [
    "arrived two days late and the box was damaged",
    "charges me twice every month since the update",
    "keeps crashing when I open the settings screen",
    "was great, thank you for the quick help",
    "has not been processed although I sent everything you asked for",
    "is confusing, I cannot find where to change my address",
    "works fine now, but it took three calls to get it fixed",
    "is much better than the old one, well done",
    "says my card is invalid but the bank says it is fine",
    "was cancelled without any notice and nobody answers my emails",
]  # fmt: skip
_ASKS = [
    "Can you tell me what happens next?", "I would like a refund.", "Please call me back.",
    "Just wanted to say thanks.", "How do I fix this myself?", "Is there a discount for the trouble?",
    "What are my options?", "",
]  # fmt: skip


def user_messages(n: int, seed: int = 7) -> list[str]:
    """n deterministic customer messages, each tagged "[u{i}]" (i from 1)."""
    rng = random.Random(seed)
    out = []
    for i in range(1, n + 1):
        text = f"[u{i}] Hello, {rng.choice(_SUBJECTS)} {rng.choice(_PROBLEMS)}. {rng.choice(_ASKS)}".strip()
        if rng.random() < 0.3:
            text += f" I have been a customer for {rng.randint(1, 12)} years and this is order #{rng.randint(10000, 99999)}."
        out.append(text)
    return out


def seed_items(n_users: int, seed: int = 7) -> list[dict]:
    """Gateway ITEMs (docs/contract.md §4): u{i}-intent, u{i}-sentiment, u{i}-summary for each user message."""
    items = []
    for i, text in enumerate(user_messages(n_users, seed), start=1):
        for route, (_provider, max_tokens, instruction) in ROUTES.items():
            items.append(
                {
                    "custom_id": f"u{i}-{route}",
                    "route": route,
                    "query": f"{instruction}\n\n{text}",
                    "params": {"max_tokens": max_tokens},
                }
            )
    return items


def item_user(custom_id: str) -> str:
    return custom_id.rsplit("-", 1)[0]


def write_jsonl(items: list[dict], path: Path) -> None:
    path.write_text("".join(json.dumps(it, ensure_ascii=False) + "\n" for it in items))


# --- simulator settings -----------------------------------------------------------------------------


def bench_sim_config(time_scale: float, errors: bool = True, trace: bool = True) -> dict:
    """examples/sim.json's providers at another time_scale.

    The provider buckets hold 1.3 real seconds of traffic at any scale (the gateway's own bucket holds
    1 s: Provider.burst_seconds >= 1), so burst_seconds (simulated) = 1.3 x time_scale.
    """
    raw = json.loads(EXAMPLE_SIM.read_text())
    raw.pop("comment", None)
    raw["time_scale"] = time_scale
    for p in raw["providers"].values():
        p["burst_seconds"] = round(1.3 * time_scale, 6)
        if not errors:
            p.pop("error_rate_500", None)
    if trace:
        raw["trace_tag_regex"] = TAG_RE
    return raw


# the simulator's route tail per provider kind (docs/sim.md): the gateway's base_url is {sim}/{name}{tail}
KIND_TAILS = {"openai": "/v1", "anthropic": "/v1", "gemini": "/v1beta", "azure_openai": ""}


def with_kinds(sim_cfg: dict, kinds: list[str]) -> dict:
    """The simulator config with its providers (in file order) speaking ``kinds`` (issue #21)."""
    names = list(sim_cfg["providers"])
    if len(kinds) != len(names) or any(k not in KIND_TAILS for k in kinds):
        raise SystemExit(f"--kinds: give {len(names)} of {', '.join(KIND_TAILS)} (for {', '.join(names)})")
    for name, kind in zip(names, kinds, strict=True):
        sim_cfg["providers"][name]["kind"] = kind
    return sim_cfg


def gateway_providers(sim_cfg: dict, sim_base_url: str, **overrides) -> dict:
    """A providers file (docs/contract.md §3) matching the simulator: real rates, 1 s burst, same
    concurrency, each provider of the simulator's kind for it."""
    scale = sim_cfg["time_scale"]
    providers = []
    for name, p in sim_cfg["providers"].items():
        kind = p.get("kind", "openai")
        entry = {
            "name": name,
            "kind": kind,
            "base_url": f"{sim_base_url}/{name}{KIND_TAILS[kind]}",
            "model": p.get("model", f"{name}-chat"),
            "rpm": int(p["rpm"] * scale),
            "tpm": int(p["tpm"] * scale),
            "max_concurrency": p["max_concurrency"],
            "burst_seconds": 1,
            "timeout_seconds": 30,
            "max_retries": 3,
            "enabled": True,
        }
        entry.update(overrides)
        providers.append(entry)
    routes = [
        {"route": route, "provider": provider, "priority": 0, "weight": 1}
        for route, (provider, _m, _i) in ROUTES.items()
    ]
    return {"providers": providers, "routes": routes}


def estimate_prompt_tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4))


def quota_floor(sim_cfg: dict, items: list[dict]) -> dict:
    """The fastest any client could finish `items` under the simulator's limits (real seconds).

    Per provider p with n requests, T charged tokens (prompt + max_tokens), bucket capacities C and
    real refill rates r: the last request cannot be admitted before (n - C_req) / r_req, nor before
    (T - C_tok) / r_tok; with concurrency c and mean latency L, n requests need at least n·L / c.
    Add one median latency for the last answer. t_min is the max over providers.
    """
    scale = sim_cfg["time_scale"]
    per: dict[str, dict] = {}
    for it in items:
        provider = ROUTES[it["route"]][0]
        d = per.setdefault(provider, {"n": 0, "tokens": 0})
        d["n"] += 1
        d["tokens"] += estimate_prompt_tokens(it["query"]) + it["params"]["max_tokens"]
    out = {}
    for name, d in per.items():
        p = sim_cfg["providers"][name]
        burst = p.get("burst_seconds", 5.0)
        r_req = p["rpm"] * scale / 60
        c_req = max(1.0, p["rpm"] / 60 * burst)
        r_tok = p["tpm"] * scale / 60
        c_tok = p["tpm"] / 60 * burst
        median = p.get("median_ms", 200) / 1000 / scale
        mean = median * math.exp(p.get("sigma", 0) ** 2 / 2)
        floors = {
            "rpm": max(0.0, (d["n"] - c_req) / r_req),
            "tpm": max(0.0, (d["tokens"] - c_tok) / r_tok),
            "concurrency": d["n"] * mean / p.get("max_concurrency", 10**9),
        }
        binding = max(floors, key=floors.get)
        out[name] = {"n": d["n"], "floor_s": floors[binding] + median, "binding": binding, **floors}
    t_min = max(v["floor_s"] for v in out.values())
    return {"t_min": t_min, "providers": out}


# --- measuring ---------------------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    k = (len(values) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def user_latencies_from_trace(rows: list[dict], n_routes: int = 3) -> dict:
    """Per user request (tag), from the simulator's trace:

    - service: first request of the user's three reaching a provider -> last 200 answer leaving it
    - done: batch start (simulator reset) -> last 200 answer
    Users without three 200 answers are not complete and are left out.
    """
    first: dict[str, float] = {}
    last_ok: dict[str, float] = {}
    oks: dict[str, int] = {}
    for r in rows:
        tag = r["tag"]
        if tag is None:
            continue
        first[tag] = min(first.get(tag, math.inf), r["arrival_s"])
        if r["status"] == 200:
            oks[tag] = oks.get(tag, 0) + 1
            last_ok[tag] = max(last_ok.get(tag, 0.0), r["done_s"])
    complete = [t for t, n in oks.items() if n >= n_routes]
    service = [last_ok[t] - first[t] for t in complete]
    done = [last_ok[t] for t in complete]
    return {
        "users_complete": len(complete),
        "service_p50": pct(service, 0.5),
        "service_p95": pct(service, 0.95),
        "done_p50": pct(done, 0.5),
        "done_p95": pct(done, 0.95),
    }


def sim_summary(counters: dict) -> dict:
    t = counters["totals"]
    billed, delivered = t["billed_tokens"], t["delivered_tokens"]
    return {
        "requests": t["requests"],
        "429s": t["rate_limited_429"],
        "5xx": t["status_5xx"],
        "billed": billed,
        "delivered": delivered,
        "waste_pct": 100.0 * (billed - delivered) / billed if billed else 0.0,
        "max_in_flight": {n: p["max_in_flight"] for n, p in counters["providers"].items()},
        "max_per_minute": {n: p["max_accepted_per_minute"] for n, p in counters["providers"].items()},
    }


def provider_requests(counts: dict[str, dict[str, int]], batches: list[dict]) -> dict:
    """What the providers saw per custom id against what the gateway counted (issue #19).

    counts: the simulator's request counts ({provider: {X-Request-ID: requests}}, SimHandle.request_counts;
    the gateway sends the item's custom_id there). batches: the finished batches (their stats).
    - requests: every request that reached a provider; ids: distinct custom ids among them
    - duplicates: requests beyond one per custom id, across providers (sum of max(0, n - 1)); legitimate
      retries (after a 429/5xx/timeout) are in it too, hence
    - gateway_retries: the batches' stats retry_count sum; gateway_requests: their request_count sum
      (HTTP attempts the gateway counted); unaccounted = requests - gateway_requests
    """
    per_id: dict[str, int] = {}
    for by_id in counts.values():
        for rid, n in by_id.items():
            per_id[rid] = per_id.get(rid, 0) + n
    provs = [v for b in batches for v in ((b.get("stats") or {}).get("providers") or {}).values()]
    gw_requests = sum(int(v.get("request_count") or 0) for v in provs)
    requests = sum(per_id.values())
    return {
        "requests": requests,
        "ids": len(per_id),
        "no_id": per_id.get("", 0),
        "duplicates": sum(max(0, n - 1) for n in per_id.values()),
        "max_per_id": max(per_id.values(), default=0),
        "gateway_requests": gw_requests,
        "gateway_retries": sum(int(v.get("retry_count") or 0) for v in provs),
        "unaccounted": requests - gw_requests,
    }


def fmt_provider_requests(d: dict) -> str:
    """One report phrase for provider_requests()."""
    return (
        f"provider requests {d['requests']} for {d['ids']} custom ids: {d['duplicates']} beyond one per id "
        f"(max {d['max_per_id']} for one id; gateway retries {d['gateway_retries']}); the batches' stats count "
        f"{d['gateway_requests']} requests ({d['unaccounted']:+d} not counted)"
    )


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


# --- reporting ---------------------------------------------------------------------------------------


def machine() -> str:
    cores = os.cpu_count()
    ram = ""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                ram = f"{int(line.split()[1]) / 1024 / 1024:.0f} GiB RAM"
    except OSError:
        pass
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cores} cores ({cpu}), {ram}, Python {platform.python_version()}, {platform.system()} {platform.release()}"


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def command_line(script: str, argv: list[str] | None = None) -> str:
    """How this bench was run, for its report: `.venv/bin/python bench/x.py ARGS` (argv: main()'s own,
    None = the command line's)."""
    return " ".join([".venv/bin/python", script, *(argv if argv is not None else sys.argv[1:])])


def run_meta(command: str, **extra) -> dict:
    """When, where and how a result was measured (saved with the rows, rendered by report_header); the
    load average (1/5/15 min) at the end of the run: the machine is shared."""
    return {"date": utc_now(), "commit": git_rev(), "machine": machine(), "command": command,
            "loadavg": load_average(), **extra}  # fmt: skip


SHARED_MACHINE = "other engineers' test suites and benchmarks were running on the same 2 cores at the time"


def report_header(title: str, meta: dict, machine_note: str = "") -> list[str]:
    """The first lines of a docs/benchmarks.md section: title, date and commit, machine, command."""
    return [
        f"## {title}",
        "",
        f"- date: {meta['date']}; commit {meta['commit']}",
        f"- machine: {meta['machine']}" + (f"; {machine_note}" if machine_note else ""),
        f"- command: `{meta['command']}`",
    ]


def add_output_args(ap) -> None:
    """--out (the docs file a section is written to) and --no-write (print only)."""
    ap.add_argument("--out", default=str(ROOT / "docs" / "benchmarks.md"))
    ap.add_argument("--no-write", action="store_true")


def save_and_publish(json_path: Path, meta: dict, rows: list, args, marker: str, text: str) -> None:
    """Save the rows with their meta to `json_path`; write `text` as the `marker` section of args.out
    unless args.no_write."""
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    if not args.no_write:
        replace_section(Path(args.out), marker, text)
        print(f"wrote {args.out}")


def git_rev() -> str:
    """The short HEAD commit, with " + working tree" when tracked files outside bench/, sim/ and docs/ (the
    harness and the report) have uncommitted changes: the measured code is then not exactly that commit."""
    try:
        rev = subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True).strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"
    try:
        dirty = subprocess.check_output(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench", ":!sim", ":!docs"],
            cwd=ROOT, text=True,
        ).strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        dirty = ""
    return rev + (" + working tree" if dirty else "")


def replace_section(path: Path, marker: str, body: str, header: str = "# Benchmarks\n") -> None:
    """Replace the text between <!-- {marker}:begin --> and <!-- {marker}:end --> (append if absent)."""
    begin, end = f"<!-- {marker}:begin -->", f"<!-- {marker}:end -->"
    text = path.read_text() if path.exists() else header
    block = f"{begin}\n{body.rstrip()}\n{end}"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _m: block, text)
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    path.write_text(text)


def fmt_s(v: float | None, digits: int = 2) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def mean(values):
    return statistics.fmean(values) if values else None


def peak_burst(arrivals: list[float], rate: float) -> float:
    """max over windows [a_j, a_i] of (requests in the window − rate × window length), exact, O(n).

    A client that obeys a bucket of capacity C and refill ``rate`` never exceeds C here (as seen at
    its own clock); the provider sees this value at arrival times.
    """
    best, best_prefix = -math.inf, -math.inf
    for i, a in enumerate(sorted(arrivals)):
        best_prefix = max(best_prefix, rate * a - i)
        best = max(best, (i + 1) - rate * a + best_prefix)
    return best


def burst_report(trace: list[dict], sim_cfg: dict, gateway: dict) -> str:
    """Per provider: peak burst at the simulator vs the gateway's and the simulator's bucket capacity."""
    scale = sim_cfg["time_scale"]
    parts = []
    for p in gateway["providers"]:
        name = p["name"]
        s = sim_cfg["providers"][name]
        arrivals = [r["arrival_s"] for r in trace if r["provider"] == name and r["status"] != 429]
        if not arrivals:
            continue
        rate = s["rpm"] * scale / 60
        burst = peak_burst(arrivals, rate)
        gw_cap = max(1.0, p["rpm"] / 60 * p["burst_seconds"])
        sim_cap = max(1.0, s["rpm"] / 60 * s.get("burst_seconds", 5.0))
        parts.append(f"{name} {burst:.1f} (gateway bucket {gw_cap:.0f}, provider bucket {sim_cap:.0f})")
    return "peak burst seen by the provider (requests − rate × window): " + ", ".join(parts)


# --- running the gateway's pieces --------------------------------------------------------------------


def free_port() -> int:
    """A port that was free a moment ago (bind port 0, read it, close)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ensure_database(url: str) -> None:
    """Create the PostgreSQL database `url` names if it is missing (anything else: nothing to do)."""
    if not url.startswith("postgres"):
        return
    import psycopg

    name = url.rsplit("/", 1)[1].split("?")[0]
    admin_url = url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def setup_django(default_database_url: str, **env: str) -> None:
    """This process as a Django client of a scratch database (DATABASE_URL, else the default; created
    and migrated if needed), single-process settings without Redis; `env` sets more variables first."""
    os.environ.setdefault("DATABASE_URL", default_database_url)
    os.environ.pop("REDIS_URL", None)
    os.environ["GATEWAY_SINGLE_PROCESS"] = "1"  # PostgreSQL without Redis: settings refuse it otherwise
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway_site.settings.local")
    ensure_database(os.environ["DATABASE_URL"])
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


@contextmanager
def gunicorn_server(timeout_s: int, wait_s: float, **env: str) -> Iterator[tuple[subprocess.Popen, str]]:
    """gunicorn with 1 sync worker on a free port (this environment plus `env`, DEBUG off), up and
    answering /healthz: yields (its process, its base URL); stopped afterwards (SIGTERM, SIGKILL after
    15 s). Celery gets an in-memory broker nobody reads: a batch's engine hand-off is queued, never run.
    Exits the bench if it does not answer within `wait_s` s."""
    import httpx

    port = free_port()
    full_env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "gateway_site.settings.local",
        "DJANGO_DEBUG": "0",
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "CELERY_BROKER_URL": "memory://",
        "CELERY_TASK_ALWAYS_EAGER": "0",
        "GATEWAY_SINGLE_PROCESS": "1",  # PostgreSQL without Redis: settings refuse it otherwise
        **env,
    }
    full_env.pop("REDIS_URL", None)
    gunicorn = str(Path(sys.executable).parent / "gunicorn")
    cmd = [gunicorn, "gateway_site.wsgi:application", "--bind", f"127.0.0.1:{port}", "--workers", "1",
           "--timeout", str(timeout_s), "--log-level", "warning"]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=ROOT, env=full_env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit("gunicorn did not come up")
            time.sleep(0.2)
        yield proc, base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
