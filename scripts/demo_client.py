"""The demo's REST client: submit a JSONL batch, show progress, print the batch object.

Usage: demo_client.py --web URL --key KEY --file batch.jsonl [--sim URL] [--timeout S] [--key-file PATH]
--key-file: write the key there first (mode 0600, no trailing newline: tools that read a key file as is,
like code passing it to the openai SDK, would otherwise send an invalid header — "Connection error").
Exit 0 only if the batch completed and success_count equals the number of items.
Progress: on a terminal one line redrawn in place; otherwise (a log, CI, `| tee`) a plain line at most
every PROGRESS_EVERY seconds and whenever the status changes, so the log stays readable.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import sys
import threading
import time
from datetime import datetime

import httpx

TERMINAL = {"completed", "failed", "cancelled", "expired"}
PROGRESS_EVERY = 3.0  # seconds between progress lines when stdout is not a terminal


class Progress:
    """Redraws one line on a TTY; prints a new line every few seconds (or on a status change) otherwise."""

    def __init__(self, interactive: bool, every: float = PROGRESS_EVERY):
        self.interactive = interactive
        self.every = every
        self.last_text = ""
        self.last_status = ""
        self.last_print = float("-inf")
        self.open_line = False

    def show(self, text: str, status: str, now: float) -> None:
        if text == self.last_text:
            return
        if self.interactive:
            print("\r" + text, end="", flush=True)
            self.open_line = True
        elif status != self.last_status or now - self.last_print >= self.every:
            print(text, flush=True)
            self.last_print = now
        self.last_text, self.last_status = text, status

    def finish(self, final_text: str | None = None) -> None:
        if self.interactive:
            if self.open_line:
                print()
        elif final_text and final_text != self.last_text:
            print(final_text, flush=True)
        self.open_line = False


def write_key_file(path: str, key: str) -> None:
    """The key alone, without a trailing newline, readable only by its owner."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(key.strip())
    os.chmod(path, 0o600)  # an existing file keeps its mode through O_CREAT


def kinds_of(path: str | None) -> dict[str, str]:
    """{provider: kind} from the provider file (kind defaults to openai, docs/contract.md §3)."""
    if not path:
        return {}
    with open(path, encoding="utf-8") as f:
        return {p["name"]: p.get("kind", "openai") for p in json.load(f)["providers"]}


def openai_shaped(response: object) -> bool:
    """Whether a RESULT response is an OpenAI chat.completion: what every app reads, whatever the kind."""
    if not isinstance(response, dict) or response.get("object") != "chat.completion":
        return False
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return False
    message = choices[0].get("message") or {}
    usage = response.get("usage") or {}
    return (
        isinstance(message.get("content"), str)
        and isinstance(choices[0].get("finish_reason"), str)
        and all(isinstance(usage.get(k), int) for k in ("prompt_tokens", "completion_tokens", "total_tokens"))
    )


def side_by_side(client: httpx.Client, results_url: str, stats: dict, kinds: dict[str, str]) -> bool:
    """Per provider (and its kind): requests, latency, errors, tokens, and one answer as apps read it.
    True if every successful RESULT's response has the same OpenAI chat.completion shape."""
    rows: dict[str, dict] = {}
    bad = 0
    with client.stream("GET", results_url, params={"format": "jsonl"}) as r:
        for line in r.iter_lines():
            if not line.strip():
                continue
            res = json.loads(line)
            row = rows.setdefault(
                res.get("provider") or "-",
                {"ok": 0, "failed": 0, "prompt": 0, "completion": 0, "cached": 0, "sample": None},
            )
            if not res.get("ok"):
                row["failed"] += 1
                continue
            row["ok"] += 1
            usage = res.get("usage") or {}
            row["prompt"] += usage.get("prompt_tokens") or 0
            row["completion"] += usage.get("completion_tokens") or 0
            row["cached"] += ((usage.get("prompt_tokens_details") or {}).get("cached_tokens")) or 0
            if not openai_shaped(res.get("response")):
                bad += 1
            elif row["sample"] is None:
                choice = res["response"]["choices"][0]
                row["sample"] = (choice["finish_reason"], choice["message"]["content"])
    per = stats.get("providers") or {}
    print("\nProviders side by side (one OpenAI answer shape for every kind):")
    print(
        f"  {'provider':<8} {'kind':<12} {'requests':>8} {'ok':>4} {'failed':>6} {'avg ms':>7} {'p95 ms':>7} "
        f"{'429s':>4} {'prompt':>7} {'cached':>6} {'compl.':>6}  sample answer (finish_reason: content)"
    )
    for name in sorted(set(rows) | set(per)):
        row, st = rows.get(name, {}), per.get(name, {})
        finish, content = row.get("sample") or ("-", "")
        content = " ".join(str(content).split())[:40]
        print(
            f"  {name:<8} {kinds.get(name, '?'):<12} {st.get('request_count', 0):>8} {row.get('ok', 0):>4} "
            f"{row.get('failed', 0):>6} {st.get('avg_latency_ms', 0):>7} {st.get('p95_latency_ms', 0):>7} "
            f"{st.get('rate_limited_count', 0):>4} {row.get('prompt', 0):>7} {row.get('cached', 0):>6} "
            f"{row.get('completion', 0):>6}  {finish}: {content}"
        )
    total = sum(r["ok"] for r in rows.values())
    print(
        f"  {total - bad} of {total} successful responses are OpenAI chat.completion objects"
        + ("" if not bad else f" — {bad} ARE NOT")
    )
    return bad == 0


def bar(done: int, total: int, width: int = 30) -> str:
    filled = int(width * done / total) if total else width
    return "[" + "#" * filled + "." * (width - filled) + "]"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--web", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--file", required=True)
    ap.add_argument("--sim", default=None, help="simulator base URL, to print what the providers saw")
    ap.add_argument("--timeout", type=float, default=150.0)
    ap.add_argument("--key-file", default=None, help="write the API key to this file (no trailing newline)")
    ap.add_argument(
        "--providers", default=None, help="the provider file loaded: its kinds head the side-by-side table"
    )
    args = ap.parse_args()
    if args.key_file:
        write_key_file(args.key_file, args.key)

    body = open(args.file, "rb").read()
    n_items = sum(1 for line in body.splitlines() if line.strip())
    auth = {"Authorization": f"Bearer {args.key}"}
    api = f"{args.web}/api/v1/batches"
    client = httpx.Client(headers=auth, timeout=30)
    deadline = time.monotonic() + args.timeout

    # In single-process mode the batch may run inside the POST request (eager Celery), so submit from a
    # thread and watch the newest batch meanwhile.
    box: dict = {}

    def submit():
        try:
            box["response"] = httpx.post(
                api,
                content=body,
                headers={**auth, "Content-Type": "application/jsonl"},
                timeout=args.timeout,
            )
        except httpx.HTTPError as exc:
            box["error"] = exc

    print(f"POST {api}  ({n_items} items, Content-Type: application/jsonl)")
    t0 = time.monotonic()
    sender = threading.Thread(target=submit, daemon=True)
    sender.start()

    batch_id = None
    progress = Progress(interactive=sys.stdout.isatty())
    line = None
    batch = None
    while time.monotonic() < deadline:
        if "error" in box:
            progress.finish()
            print(f"submission failed: {box['error']}", file=sys.stderr)
            return 1
        resp = box.get("response")
        if resp is not None and batch_id is None:
            if resp.status_code != 201:
                text = resp.text
                if "html" in resp.headers.get("content-type", ""):  # Django's debug page: show the title
                    m = re.search(r"<title>(.*?)</title>", text, re.S)
                    text = html.unescape(m.group(1).strip()) if m else text[:300]
                progress.finish()
                print(f"submission refused: HTTP {resp.status_code}: {text[:2000]}", file=sys.stderr)
                return 1
            batch_id = resp.json()["id"]
        try:
            if batch_id:
                r = client.get(f"{api}/{batch_id}")
            else:
                r = client.get(api, params={"limit": 1})
        except httpx.HTTPError:
            time.sleep(0.3)
            continue
        if r.status_code == 200:
            data = r.json()
            if batch_id is None:
                results = data.get("results") or []
                batch = results[0] if results else None
            else:
                batch = data
        if batch:
            counts = batch.get("request_counts") or {}
            done = (counts.get("completed") or 0) + (counts.get("failed") or 0)
            total = counts.get("total") or n_items
            line = (
                f"{bar(done, total)} {done}/{total}  status={batch['status']:<9} "
                f"ok={counts.get('completed', 0)} failed={counts.get('failed', 0)}  {time.monotonic() - t0:5.1f}s"
            )
            progress.show(line, batch["status"], time.monotonic())
            if batch_id and batch["status"] in TERMINAL:
                break
        time.sleep(0.5)
    progress.finish(line)
    if batch is None or batch.get("status") not in TERMINAL:
        print(f"batch did not finish within {args.timeout:.0f} s", file=sys.stderr)
        return 1

    print("\nBatch report (GET /api/v1/batches/{id}):")
    print(json.dumps(batch, indent=2, ensure_ascii=False))
    if args.sim:
        try:
            counters = httpx.get(f"{args.sim}/_sim/counters", timeout=10).json()
            print("\nWhat the simulated providers saw (GET /_sim/counters):")
            for name, c in counters["providers"].items():
                print(
                    f"  {name:<7} requests={c['requests']:<4} ok={c['ok']:<4} 429s={c['rate_limited_429']:<3} "
                    f"5xx={c['status_5xx']:<3} max_in_flight={c['max_in_flight']:<3} "
                    f"max/minute={c['max_accepted_per_minute']:<4} billed={c['billed_tokens']} "
                    f"delivered={c['delivered_tokens']} shape_rejections={c.get('shape_rejections', 0)}"
                )
        except httpx.HTTPError:
            pass
    stats = batch.get("stats") or {}
    shape_ok = side_by_side(client, f"{api}/{batch_id}/results", stats, kinds_of(args.providers))
    ok = batch["status"] == "completed" and stats.get("success_count") == n_items and shape_ok
    print(
        f"\nstatus={batch['status']} success_count={stats.get('success_count')} of {n_items} items "
        f"in {time.monotonic() - t0:.1f} s -> {'OK' if ok else 'NOT OK'}"
    )
    print(f"batch duration (created_at -> completed_at, the gateway's own clock): {batch_duration(batch)}")
    return 0 if ok else 1


def batch_duration(batch: dict) -> str:
    """The batch's own duration from its timestamps ("?" if the gateway did not report them)."""
    start, end = batch.get("created_at"), batch.get("completed_at")
    if not start or not end:
        return "?"
    seconds = (
        datetime.fromisoformat(end.replace("Z", "+00:00"))
        - datetime.fromisoformat(start.replace("Z", "+00:00"))
    ).total_seconds()
    return f"{seconds:.1f} s"


if __name__ == "__main__":
    sys.exit(main())
