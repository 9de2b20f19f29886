"""Hosts of their own on this machine, for tests of what crosses a network (issue "Several hosts"): one
network namespace per host, each with one veth link into a bridge in the test's own namespace, which
takes the bridge's first address (so the test reaches every host, and every host reaches the others).

    with Network(["db", "web-a", "web-b"]) as net:
        net.ip("db")                       # 10.X.Y.2
        net.popen("db", ["redis-server", ...], log)   # a process inside the host's namespace

Needs root and iproute2 (``ip netns``); ``Network.available()`` says why not, for a loud skip. Every
name is suffixed with a per-run tag, so two runs on one machine never share a link.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from pathlib import Path


def _run(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True, text=True, timeout=30)


class Network:
    def __init__(self, hosts: list[str], subnet: str | None = None) -> None:
        self.tag = secrets.token_hex(2)
        self.hosts = list(hosts)
        self.subnet = subnet or f"10.{secrets.randbelow(200) + 20}.{secrets.randbelow(250) + 1}"
        self.bridge = f"gwb{self.tag}"
        self.made: list[str] = []
        self.procs: list[subprocess.Popen] = []

    @staticmethod
    def available() -> str:
        """'' when namespaces can be made here, else why not."""
        if os.geteuid() != 0:
            return "network namespaces need root"
        if shutil.which("ip") is None:
            return "iproute2 (ip) is not installed"
        probe = f"gwprobe{secrets.token_hex(2)}"
        out = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
        if out.returncode != 0:
            return f"ip netns add failed: {out.stderr.strip()}"
        subprocess.run(["ip", "netns", "del", probe], capture_output=True)
        return ""

    def ns(self, host: str) -> str:
        return f"gw{self.tag}-{host}"

    def ip(self, host: str) -> str:
        return f"{self.subnet}.{self.hosts.index(host) + 2}"

    @property
    def gateway_ip(self) -> str:
        return f"{self.subnet}.1"

    def __enter__(self) -> Network:
        try:
            _run("ip", "link", "add", self.bridge, "type", "bridge")
            self.made.append("bridge")
            _run("ip", "addr", "add", f"{self.gateway_ip}/24", "dev", self.bridge)
            _run("ip", "link", "set", self.bridge, "up")
            for n, host in enumerate(self.hosts):
                ns, outer = self.ns(host), f"gv{self.tag}{n}"
                _run("ip", "netns", "add", ns)
                self.made.append(ns)
                _run("ip", "link", "add", outer, "type", "veth", "peer", "name", "eth0", "netns", ns)
                _run("ip", "link", "set", outer, "master", self.bridge, "up")
                _run("ip", "netns", "exec", ns, "ip", "addr", "add", f"{self.ip(host)}/24", "dev", "eth0")
                _run("ip", "netns", "exec", ns, "ip", "link", "set", "eth0", "up")
                _run("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
                _run("ip", "netns", "exec", ns, "ip", "route", "add", "default", "via", self.gateway_ip)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def popen(self, host: str, argv: list[str], log: Path, *, env: dict | None = None, cwd=None,
              user: str | None = None) -> subprocess.Popen:  # fmt: skip
        """``argv`` inside ``host``'s namespace (as ``user`` when given), output to ``log``."""
        prefix = ["ip", "netns", "exec", self.ns(host)]
        if user:
            prefix += ["runuser", "-u", user, "--"]
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                prefix + argv, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.procs.append(proc)
        return proc

    def run(self, host: str, argv: list[str], *, env: dict | None = None, cwd=None, user: str | None = None,
            timeout: float = 300) -> str:  # fmt: skip
        prefix = ["ip", "netns", "exec", self.ns(host)] + (["runuser", "-u", user, "--"] if user else [])
        out = subprocess.run(prefix + argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
        if out.returncode != 0:
            raise RuntimeError(
                f"{host}: {' '.join(argv)} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}"
            )
        return out.stdout

    def __exit__(self, *exc) -> None:
        import signal

        for proc in reversed(self.procs):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for proc in reversed(self.procs):
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        for name in reversed(self.made):
            if name == "bridge":
                subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)
            else:
                subprocess.run(["ip", "netns", "del", name], capture_output=True)
