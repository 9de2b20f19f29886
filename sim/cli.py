"""Command line shared by ``python -m sim`` and ``manage.py run_simulator``."""

from __future__ import annotations

import argparse
import asyncio
import signal

from sim.config import ConfigError, load_config
from sim.server import serve


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="simulator JSON config (e.g. examples/sim.json)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8900, help="0 = any free port")
    parser.add_argument("--time-scale", type=float, default=None, help="override the file's time_scale")
    parser.add_argument("--duration", type=float, default=None, help="stop after this many seconds")


def run(config: str, host: str, port: int, time_scale: float | None = None, duration=None) -> None:
    cfg = load_config(config)
    if time_scale is not None:
        from dataclasses import replace

        if time_scale <= 0:
            raise ConfigError("--time-scale: must be > 0")
        cfg = replace(cfg, time_scale=time_scale)

    async def main():
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, task.cancel)
            except (NotImplementedError, RuntimeError):
                pass
        try:
            await serve(cfg, host, port, duration)
        except asyncio.CancelledError:
            pass

    asyncio.run(main())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sim", description="OpenAI-compatible provider simulator")
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        run(args.config, args.host, args.port, args.time_scale, args.duration)
    except ConfigError as exc:
        parser.exit(2, f"error: {exc}\n")
    return 0
