"""One spout task's roots at the XOR tracker (heron_py.acking.tracker), pure: the live roots,
each with the XOR of its tree's ids not yet acked, and the roots resolved by a fail or a timeout
(remembered, so the rest of their tree's records do not make them live again), both in
generations: a new root joins the newest, ``rotate`` drops the oldest, and the live roots it
drops have timed out.

One contract, two implementations. This file is the reference, in Python: a dict (a set for the
resolved roots) per generation. ``roots.pyx`` is the typed one (Cython: open addressing over a C
array of 64-bit keys with a generation number per entry, the records read and the results
written as bytes, no Python object per root or record), which installation compiles in this
file's place (``heron_py.hotpath.TYPED``). The unit tests run both over the same record streams.

``apply`` takes an ACK_BATCH body (``framing.ACK_RECORD``: kind, root, value) and appends an
ACK_RESULT record (``framing.RESULT_RECORD``: outcome, root) per root it resolves, in order.
"""

from __future__ import annotations

from heron_py.acking.root_errors import body_error, check_buckets, shrink_error
from heron_py.common.framing import (
    ACK_ACK,
    ACK_FAIL,
    ACK_INIT,
    ACK_RECORD,
    RESULT_ACKED,
    RESULT_FAILED,
    RESULT_RECORD,
)


class RootTable:
    """The newest generation is bucket 0. A live root is never among the resolved ones."""

    def __init__(self, buckets: int) -> None:
        check_buckets(buckets)
        self._live: list[dict[int, int]] = [{} for _ in range(buckets)]
        self._done: list[set[int]] = [set() for _ in range(buckets)]

    @property
    def buckets(self) -> int:
        return len(self._live)

    @property
    def live(self) -> int:
        """Roots neither acked, failed nor timed out."""
        return sum(len(b) for b in self._live)

    def live_in(self, bucket: int) -> int:
        return len(self._live[bucket])

    def roots(self) -> list[int]:
        """The live roots (tests and tools)."""
        return [r for b in self._live for r in b]

    def resolved(self) -> list[int]:
        """The roots remembered as failed or timed out (tests and tools)."""
        return [r for d in self._done for r in d]

    def apply(self, body: bytes | memoryview, results: bytearray) -> list[int]:
        """One ACK_BATCH body: an INIT or an ACK XORs its value into the root's entry (creating
        it), a FAIL resolves the root; each root resolved is appended to ``results``. Returns
        the record kinds it did not know (those records are skipped)."""
        if len(body) % ACK_RECORD.size:
            raise ValueError(body_error(len(body)))
        live, done = self._live, self._done
        unknown: list[int] = []
        pack = RESULT_RECORD.pack
        for kind, root, value in ACK_RECORD.iter_unpack(body):
            if kind in (ACK_ACK, ACK_INIT):
                # a live root is never in done: look there first, it is where nearly all records go
                for bucket in live:
                    old = bucket.get(root)
                    if old is not None:
                        v = old ^ value
                        if v == 0:
                            del bucket[root]
                            results += pack(RESULT_ACKED, root)
                        else:
                            bucket[root] = v
                        break
                else:
                    if value and not any(root in d for d in done):
                        live[0][root] = value
            elif kind == ACK_FAIL:
                if self.fail(root):
                    results += pack(RESULT_FAILED, root)
            else:
                unknown.append(kind)
        return unknown

    def fail(self, root: int) -> bool:
        """Resolves ``root`` as failed; False when it was resolved already. A fail for a root
        never seen (its init still on the way) fails it too."""
        if any(root in d for d in self._done):
            return False
        for bucket in self._live:
            if bucket.pop(root, None) is not None:
                break
        self._done[0].add(root)
        return True

    def _drop_oldest(self) -> list[int]:
        self._done.pop()
        expired = list(self._live.pop())
        self._done[0].update(expired)
        return expired

    def rotate(self) -> list[int]:
        """A new newest generation, the oldest dropped: its live roots (returned) timed out and
        are remembered as resolved."""
        self._live.insert(0, {})
        self._done.insert(0, set())
        return self._drop_oldest()

    def grow(self) -> None:
        """A new newest generation, none dropped."""
        self._live.insert(0, {})
        self._done.insert(0, set())

    def shrink(self) -> list[int]:
        """The oldest generation dropped, none added (at least 2 stay); as ``rotate``, its live
        roots timed out."""
        if len(self._live) <= 2:
            raise ValueError(shrink_error(len(self._live)))
        return self._drop_oldest()
