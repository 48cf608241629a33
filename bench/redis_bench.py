"""The RedisStreamSpout's entries/s against a bare redis-py consumer-group loop, on the same
redis-server and the same stream (issue 38's goal: >= 0.7x). The lead runs it:

    .venv/bin/python bench/redis_bench.py [--entries 200000]
    .venv/bin/python bench/redis_bench.py --rev REV [--reps 3]   # A/B: the spout at REV vs this tree

With ``--rev`` the spout runs ``--reps`` times on each side, alternating which goes first (each run
on a group of its own over the same entries), beside a bare loop per pair: A is the engine and
connector at a git revision (a worktree, as ``bench/ab.py --rev`` makes it), B this tree.

It XADDs the entries once, times a bare loop until all are read and acknowledged, then runs a topology
RedisStreamSpout (par 1, ATLEAST_ONCE, so every entry is XACKed on its ack) -> a counting bolt
on the local scheduler, on a second group of the same stream, and times from its first read
until the group has read every entry and none is pending (submit and start are not counted).

The bare loop is held to what the spout must do, so the ratio is the engine's cost: a client
built as the spout builds its own (``ServerConfig.client``: the same options), the spout's
default XREADGROUP COUNT (``redis.batch.size``), each entry's id and value decoded to str (the
spout emits str), and every entry XACKed, one XACK per read (the spout sends one XACK per loop
for all acks that came in). Both read with redis-py as it is: with hiredis (redis-py's C
parser, in the ``[redis]`` extra) when it is installed, else redis-py's Python parser. The
output names which."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from connector_common import ab_against_bare, add_ab_args, topology_head  # noqa: E402

from tests.redis_server import RedisServer  # noqa: E402

TOPOLOGY = topology_head("from heron_py.connectors.redis import RedisStreamSpout") + '''
b = TopologyBuilder("redis_bench")
spout = RedisStreamSpout.spec(name="redis", par=1, config={"redis.url": sys.argv[1], "redis.stream": "bench",
    "redis.group": sys.argv[2], "redis.create.group": True})
b.add_spec(spout)
b.add_bolt("count", Count, par=1, inputs={spout: Grouping.SHUFFLE})
b.set_config({"topology.stmgrs": 1, "topology.reliability.mode": "ATLEAST_ONCE",
              "topology.max.spout.pending": 5000})
b.build_and_submit()
'''


def fill(client: Any, n: int) -> None:
    payload = "x" * 80
    for start in range(0, n, 5000):
        pipe = client.pipeline(transaction=False)
        for i in range(start, min(n, start + 5000)):
            pipe.xadd("bench", {"value": f"entry {i} {payload}"})
        pipe.execute()


def spout_options(url: str) -> tuple[Any, int]:
    """A client built as the spout builds its own, and the spout's default XREADGROUP COUNT."""
    from heron_py.connectors.redis.config import stream_spout_config

    cfg = stream_spout_config({"redis.url": url, "redis.stream": "bench"}, "redis bench", "bare", "c")
    return cfg.server.client(), cfg.batch


def bare(url: str, n: int, group: str = "bare") -> float:
    """The bare loop's entries/s."""
    client, count = spout_options(url)
    client.xgroup_create("bench", group, id="0")
    got, t0 = 0, time.perf_counter()
    while got < n:
        resp = client.xreadgroup(group, "c", {"bench": ">"}, count=count)
        entries = (next(iter(resp.values())) if isinstance(resp, dict) else resp[0][1]) if resp else []
        if entries:
            # the spout's work on an entry's data: its id and its value as str
            rows = [[raw_id.decode("ascii"), fields[b"value"].decode("utf-8")] for raw_id, fields in entries]
            client.xack("bench", group, *[e[0] for e in entries])
            got += len(rows)
    client.close()
    return n / (time.perf_counter() - t0)


def parser_name() -> str:
    from redis.utils import HIREDIS_AVAILABLE

    return "hiredis, in both loops" if HIREDIS_AVAILABLE else "redis-py's Python parser, in both loops"


def _group(client: Any, name: str) -> dict[str, Any] | None:
    for g in client.xinfo_groups("bench"):
        if g["name"] in (name.encode(), name):
            return dict(g)
    return None


def spout(server: RedisServer, home: Path, n: int, group: str = "spout", python: str = sys.executable) -> float:
    """The spout's entries/s on a group of its own, the topology submitted by ``python``'s CLI
    (another interpreter runs another checkout: ``--rev``)."""
    client = server.client()
    f = home / "redis_bench_topology.py"
    f.write_text(TOPOLOGY)
    env = {**os.environ, "HERON_PY_HOME": str(home)}
    env.pop("PYTHONPATH", None)
    cli = [python, "-m", "heron_py.cli.main"]
    # cwd: the interpreter must not import the tree it is started from (another checkout)
    p = subprocess.run([*cli, "submit", "local", str(f), server.url, group], env=env, cwd=home,
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"redis bench: submit failed:\n{p.stdout}\n{p.stderr}")
    try:
        while True:
            g = _group(client, group)
            if g is not None and (g.get("entries-read") or 0) > 0:
                t0, r0 = time.perf_counter(), int(g["entries-read"])
                break
            time.sleep(0.005)
        while True:
            g = _group(client, group)
            if g is not None and g.get("lag") == 0 and g.get("pending") == 0:
                return (n - r0) / (time.perf_counter() - t0)
            time.sleep(0.02)
    finally:
        subprocess.run([*cli, "kill", "local", "redis_bench"], env=env, cwd=home, capture_output=True)


def redis_version() -> str:
    import redis

    return str(redis.__version__)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--entries", type=int, default=200_000)
    add_ab_args(ap)
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="redis_bench"))
    server = RedisServer(home / "redis", appendonly=False)
    try:
        client = server.client()
        fill(client, args.entries)
        print(f"redis-py {redis_version()}, reply parser: {parser_name()}")
        if args.rev:
            ab(server, home, args.entries, args.rev, args.reps)
            return
        b = bare(server.url, args.entries)
        s = spout(server, home, args.entries)
        print(f"| entries | bare redis-py XREADGROUP/XACK loop (entries/s) | RedisStreamSpout at least once "
              f"(entries/s) | ratio |\n|---|---|---|---|\n| {args.entries} | {b:,.0f} | {s:,.0f} | {s / b:.2f}x |")
    finally:
        server.stop()


def ab(server: RedisServer, home: Path, n: int, rev: str, reps: int) -> None:
    ab_against_bare(rev, reps, f"{n} entries per run", lambda rep: bare(server.url, n, group=f"bare{rep}"),
                    lambda side, rep, python: spout(server, home, n, group=f"{side}{rep}", python=python))


if __name__ == "__main__":
    main()
