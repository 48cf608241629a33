"""A network namespace for a test that needs a real partition: its loopback up, iptables usable
inside it, deleted afterwards (with every rule in it). Skips with the reason where the machine
cannot (not root, no ip/iptables, namespaces or iptables refused). ``blackhole`` drops a port's
TCP packets both ways (DROP, never REJECT: a partition answers nothing), ``heal`` lifts it."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest


def why_not(tools: tuple[str, ...] = ("ip", "iptables")) -> str | None:
    if os.geteuid() != 0:
        return f"needs root for a network namespace and iptables; running as uid {os.geteuid()}"
    for tool in tools:
        if shutil.which(tool) is None:
            return f"no `{tool}` command"
    return None


def run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(list(argv), text=True, capture_output=True, timeout=60)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} failed ({r.returncode}): {r.stdout}{r.stderr}")
    return r


@contextmanager
def network_namespace(prefix: str, tools: tuple[str, ...] = ("ip", "iptables")) -> Iterator[str]:
    """A fresh namespace named ``prefix`` + 8 hex digits, deleted on the way out."""
    why = why_not(tools)
    if why:
        pytest.skip(why)
    name = f"{prefix}{uuid.uuid4().hex[:8]}"
    r = run("ip", "netns", "add", name, check=False)
    if r.returncode != 0:
        pytest.skip(f"cannot create a network namespace (ip netns add {name}): {r.stderr.strip()}")
    try:
        run("ip", "netns", "exec", name, "ip", "link", "set", "lo", "up")
        probe = run("ip", "netns", "exec", name, "iptables", "-L", "-n", check=False)
        if probe.returncode != 0:
            pytest.skip(f"iptables does not work in a network namespace: {probe.stderr.strip()}")
        yield name
    finally:
        run("ip", "netns", "del", name, check=False)


def _rules(port: int) -> list[list[str]]:
    return [["INPUT", "-p", "tcp", "--dport", str(port), "-j", "DROP"],
            ["OUTPUT", "-p", "tcp", "--sport", str(port), "-j", "DROP"]]


def blackhole(ns: str, port: int) -> None:
    """Every TCP packet to or from ``port`` in ``ns`` dropped (loopback packets pass INPUT and
    OUTPUT)."""
    for rule in _rules(port):
        run("ip", "netns", "exec", ns, "iptables", "-I", *rule)


def heal(ns: str, port: int) -> None:
    """Every rule ``blackhole`` put on ``port`` removed (none left if it ran twice)."""
    for rule in _rules(port):
        while run("ip", "netns", "exec", ns, "iptables", "-C", *rule, check=False).returncode == 0:
            run("ip", "netns", "exec", ns, "iptables", "-D", *rule)
