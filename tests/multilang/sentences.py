"""The test sentences: sentence ``i`` is the same in the test, the topology file and the
multilang subprocesses (they import this file from their working directory)."""

WORDS = ["the", "cow", "jumped", "over", "moon", "an", "apple", "a", "day", "keeps", "doctor", "away"]


def sentence(i):
    return " ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(1 + i % 6))
