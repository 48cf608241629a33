"""A test of the quickstart topology with heron_py.testing, as you would write one for yours:

    pip install pytest                  # once: heron-py does not install it
    python -m pytest examples/quickstart
"""
from collections import Counter

from word_count import SENTENCES, build

from heron_py.testing import run_in_process


def test_every_word_reaches_the_count_bolt_once():
    # one process, the real plans, groupings and batching; the spout stops after 1000 sentences
    result = run_in_process(build(), capture=["count"])
    words = Counter(tup[0] for tup in result.values("count"))
    expected = Counter(w for i in range(1000) for w in SENTENCES[i % len(SENTENCES)].split())
    assert words == expected
