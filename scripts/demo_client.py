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
                    f"  {name:<6} requests={c['requests']:<4} ok={c['ok']:<4} 429s={c['rate_limited_429']:<3} "
                    f"5xx={c['status_5xx']:<3} max_in_flight={c['max_in_flight']:<3} "
                    f"max/minute={c['max_accepted_per_minute']:<4} billed={c['billed_tokens']} "
                    f"delivered={c['delivered_tokens']}"
                )
        except httpx.HTTPError:
            pass
    stats = batch.get("stats") or {}
    ok = batch["status"] == "completed" and stats.get("success_count") == n_items
    print(
        f"\nstatus={batch['status']} success_count={stats.get('success_count')} of {n_items} items "
        f"in {time.monotonic() - t0:.1f} s -> {'OK' if ok else 'NOT OK'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
