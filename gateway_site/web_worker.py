"""The gunicorn worker class of the documented web server: uvicorn's HTTP server running the ASGI
application (gateway_site.asgi) in each gunicorn worker process — gunicorn.conf.py selects it.

Why gunicorn around uvicorn rather than ``uvicorn --workers``: gunicorn's hooks keep Prometheus'
multiprocess mode exact (``post_fork`` drops live gauges a dead process with the same pid left,
``child_exit`` marks an exited worker dead; uvicorn's own supervisor has no such hooks), ``kill -HUP``
replaces the workers gracefully, and SIGTERM gives requests and streams in progress gunicorn's
``graceful_timeout``. Written here rather than taken from ``uvicorn.workers`` (deprecated since uvicorn
0.30) so the server's options are the gateway's own:

* ``proxy_headers=False``: uvicorn does not rewrite the client address from ``X-Forwarded-For`` (by default
  it would for 127.0.0.1, whatever ``GATEWAY_TRUSTED_PROXIES`` says); the application resolves it itself,
  believing the header only from the listed proxies (gateway_site/security.py).
* ``timeout_graceful_shutdown``: uvicorn stops waiting for open requests and streams 5 s before gunicorn's
  ``graceful_timeout`` ends, so the lifespan shutdown (the interactive call log flushed, connections
  closed) still runs before gunicorn would kill the process.

Imported by the gunicorn master (it loads the worker class): no Django here.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from typing import Any

from gunicorn.arbiter import Arbiter
from gunicorn.workers.base import Worker
from uvicorn.config import Config
from uvicorn.server import Server

SHUTDOWN_MARGIN_SECONDS = 5


class ASGIWorker(Worker):
    """A gunicorn worker serving an ASGI callable with uvicorn (auto loop and HTTP implementation)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name, source in (("uvicorn.error", self.log.error_log), ("uvicorn.access", self.log.access_log)):
            logger = logging.getLogger(name)
            logger.handlers = source.handlers
            logger.setLevel(source.level)
            logger.propagate = False
        options: dict[str, Any] = {
            "app": None,
            "log_config": None,
            "proxy_headers": False,
            "timeout_keep_alive": self.cfg.keepalive,
            "timeout_notify": self.timeout,
            "callback_notify": self.callback_notify,
            "limit_max_requests": self.max_requests or None,
            "timeout_graceful_shutdown": max(1, int(self.cfg.graceful_timeout) - SHUTDOWN_MARGIN_SECONDS),
            "access_log": bool(self.cfg.accesslog),
        }
        if self.cfg.settings["backlog"].value:
            options["backlog"] = self.cfg.settings["backlog"].value
        self.config = Config(**options)

    def init_signals(self) -> None:
        # uvicorn's Server installs its own SIGTERM/SIGINT handlers; gunicorn's would swallow them
        for sig in self.SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGUSR1, self.handle_usr1)
        signal.siginterrupt(signal.SIGUSR1, False)

    async def _serve(self) -> None:
        self.config.app = self.wsgi  # gunicorn loaded the application (gateway_site.asgi:application)
        server = Server(config=self.config)
        asyncio.get_running_loop().add_signal_handler(signal.SIGQUIT, self.handle_exit, signal.SIGQUIT, None)
        await server.serve(sockets=self.sockets)
        if not server.started:
            sys.exit(Arbiter.WORKER_BOOT_ERROR)

    def run(self) -> None:
        with asyncio.Runner(loop_factory=self.config.get_loop_factory()) as runner:
            runner.run(self._serve())

    async def callback_notify(self) -> None:
        self.notify()
