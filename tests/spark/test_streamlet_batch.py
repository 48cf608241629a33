"""The same Streamlet word count gives identical results streaming (local scheduler) and on
PySpark (`heron-py batch`), both equal to a plain Python count."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from heron_py.testing import run_local
from tests.spark.test_batch import _cli

pytestmark = [pytest.mark.spark, pytest.mark.integration]

PROGRAM = Path(__file__).resolve().parent / "streamlet_word_count.py"
WORDS = ["storm", "heron", "flux", "stream", "bolt", "spout", "tuple", "window"]


def test_streamlet_word_count_streaming_equals_batch(heron_home: Path, tmp_path: Path) -> None:
    text = tmp_path / "lines.txt"
    lines = [" ".join(WORDS[(i * 3 + j) % len(WORDS)] for j in range(1 + i % 5)) for i in range(300)]
    text.write_text("\n".join(lines) + "\n")
    want = Counter(w for line in lines for w in line.split())

    def pairs(received: dict) -> dict[str, int]:
        # what "pairs" receives: (KeyedWindow, count), a KeyedWindow captured as its repr
        windows = (r["values"][0] for r in received.get("pairs", []))
        return {re.search(r"key: (\w+),", kw).group(1): n for kw, n in windows}

    run = run_local(PROGRAM, ["swc", str(text)], home=heron_home, name="swc", capture=["pairs"],
                    until=lambda r: sum(pairs(r).values()) == sum(want.values()), timeout=60)
    streamed = pairs(run.received)

    out = tmp_path / "pairs.jsonl"
    # the source's spout runs the flat_map and map (fusion): the input's lines go through them
    p = _cli(heron_home, "batch", "--input", f"lines__flatmap-1__map-1={text}", "--output", f"pairs:output={out}",
             str(PROGRAM), "swc", str(text))
    assert p.returncode == 0, p.stdout + p.stderr
    rows = [json.loads(line) for part in sorted(out.glob("part-*")) for line in part.read_text().splitlines()]
    # Spark writes a Python tuple value as a struct {"_1": ..., "_2": ...}
    batched = {row["_output_"]["_1"]: row["_output_"]["_2"] for row in rows}
    assert streamed == batched == dict(want)
