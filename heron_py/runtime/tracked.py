"""The ids of received tracked tuples, from receive to ack, on typed values: the Python
reference of ``tracked.pyx``, which installation compiles in this module's place
(``heron_py.hotpath.TYPED``); ``HERON_PY_PURE=1`` runs this one. Both pass the same tests.

At least once, a tuple of the default stream with one root arrives as hot values with a flat
``array('Q')`` of (spout task, root id, tuple id) triples. Its ``roots`` is a ``Root``: the
triple and the anchor's ack value (the XOR of the edge ids its anchored children took) in one
object, where a Python tuple of one triple, three ints and an instance dict for the ack value
were five objects a tuple. A ``Root`` reads as heronpy's ``roots``: a sequence of one
(spout task, root id, tuple id) triple.

The three steps on the hot path:

* ``roots_of(ids)``: the triples of a received batch's id array as ``Root`` objects;
* ``anchor(ids, root, edges)``: an anchored emit's copy: a fresh edge id (``Edges``) XORed
  into the anchor's ack value, the copy's triple (spout task, root id, edge) appended to the
  destination's id array;
* ``AckLog``: the acks since the last flush, written as ACK_BATCH bodies per spout task
  (framing.ACK_RECORD records, kind ACK_ACK), consecutive acks of one root merged into one
  record (a count task gets a sentence's words one after another); a spout's inits too.

Edge ids come from ``Edges``, splitmix64 over a 64-bit state seeded once per emitter from its
random source: a draw is a few C operations where ``getrandbits`` was a Python call per id, and
the sequence is the same in both implementations (the tests compare them draw for draw). What
XOR acking needs of an id is that a set of them XORs to zero only when it is empty, which any
64-bit generator of this quality gives (Storm draws them from java.util.Random).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from heron_py.acking.root_errors import ids_error
from heron_py.api.tuple import TrackedTuple
from heron_py.common.framing import ACK_ACK, ACK_INIT, ACK_RECORD

MASK = (1 << 64) - 1
GOLDEN, MIX1, MIX2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
# the fields of a received tuple (heron_py.api.tuple.HeronTuple) these paths read by index
CREATED, ROOTS = 5, 6


class Root:
    """The one root of a received tuple, with the tuple's own id and its ack value."""

    __slots__ = ("ack_val", "id", "root", "task")

    def __init__(self, task: int, root: int, id: int, ack_val: int = 0) -> None:
        self.task = task
        self.root = root
        self.id = id
        self.ack_val = ack_val

    # heronpy's ``roots``: a sequence of (spout task, root id, tuple id) triples
    def __len__(self) -> int:
        return 1

    def __getitem__(self, i: int) -> tuple[int, int, int]:
        if i not in (0, -1):
            raise IndexError("Root index out of range (a Root holds one root)")
        return (self.task, self.root, self.id)

    def __iter__(self) -> Iterator[tuple[int, int, int]]:
        return iter(((self.task, self.root, self.id),))

    def __eq__(self, other: object) -> bool:
        if type(other) is Root:
            return (self.task, self.root, self.id) == (other.task, other.root, other.id)
        return isinstance(other, tuple) and other == ((self.task, self.root, self.id),)

    def __hash__(self) -> int:
        return hash(((self.task, self.root, self.id),))

    def __repr__(self) -> str:
        return f"(({self.task}, {self.root}, {self.id}),)"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Root, (self.task, self.root, self.id, self.ack_val))


def roots_of(ids: Any) -> list[Root]:
    """A ``Root`` per (spout task, root id, tuple id) triple of a flat id array."""
    if len(ids) % 3:
        raise ValueError(ids_error(len(ids)))
    it = iter(ids)
    return [Root(t, r, i) for t, r, i in zip(it, it, it, strict=True)]


def received_roots(triples: tuple[tuple[int, int, int], ...]) -> Any:
    """A received row's roots as its tuple's ``roots``: a ``Root`` for one triple, else the
    triples as they are (none: untracked; several: an emit anchored to several roots)."""
    if len(triples) == 1:
        t, r, i = triples[0]
        return Root(t, r, i)
    return triples


def ids_of(task: int, root: int, edge: int) -> array[int]:
    """The id array of a destination's first tracked copy from a spout."""
    return array("Q", (task, root, edge))


class Edges:
    """Nonzero 64-bit edge ids: splitmix64 from a seed."""

    __slots__ = ("state",)

    def __init__(self, seed: int) -> None:
        self.state = seed & MASK

    def draw(self) -> int:
        while True:
            self.state = z = (self.state + GOLDEN) & MASK
            z = ((z ^ (z >> 30)) * MIX1) & MASK
            z = ((z ^ (z >> 27)) * MIX2) & MASK
            z ^= z >> 31
            if z:
                return z


def new_ids(root: Root, edges: Edges) -> array[int]:
    """The id array of a destination's first anchored copy (``anchor`` then adds to it)."""
    edge = edges.draw()
    root.ack_val ^= edge
    return array("Q", (root.task, root.root, edge))


def anchor(ids: array[int], root: Root, edges: Edges) -> None:
    """An anchored copy: a fresh edge XORed into the anchor's ack value; the copy's triple
    (spout task, root id, edge) appended to its destination's id array."""
    edge = edges.draw()
    root.ack_val ^= edge
    ids.extend((root.task, root.root, edge))


def add_ids(ids: array[int], task: int, root: int, edge: int) -> None:
    """A spout's tracked copy: its triple appended to its destination's id array."""
    ids.extend((task, root, edge))


class AckLog:
    """The acks recorded since the last ``drain``, as ACK_BATCH bodies per spout task."""

    __slots__ = ("_last", "_last_root", "_last_task", "_n", "bodies")

    def __init__(self) -> None:
        self.bodies: dict[int, bytearray] = {}
        self._last: bytearray | None = None  # the body holding the last record
        self._last_task = -1
        self._last_root = -1
        self._n = 0

    def __len__(self) -> int:
        """How many records the bodies hold."""
        return self._n

    def add(self, root: Root) -> None:
        """The ack of a tuple with one root: its id XOR its ack value."""
        self._record(root.task, root.root, root.id ^ root.ack_val)

    def add_triples(self, triples: Iterable[tuple[int, int, int]], ack_val: int) -> None:
        """The ack of a tuple with any roots: per root, its id XOR the tuple's ack value."""
        for task, root, value in triples:
            self._record(task, root, value ^ ack_val)

    def ack(self, tup: TrackedTuple) -> None:
        """The ack of a received tuple, its ack value as it is now (an emit anchored to it later
        changes nothing the ack carried; as in Storm, that child's edge is never acked and the
        tree times out): its Root, or each of its roots; an untracked tuple adds nothing."""
        if not isinstance(tup, tuple) or len(tup) <= ROOTS:  # the typed twin reads the slot unchecked
            raise TypeError(f"ack: expected a received tuple, found {type(tup).__name__}")
        roots = tup[ROOTS]
        if type(roots) is Root:
            self.add(roots)
        elif roots:
            self.add_triples(roots, tup.ack_val)

    def add_init(self, task: int, root: int, value: int) -> None:
        """A spout's new root: its copies' ids XORed, to the task's tracker (never merged)."""
        self._append(task, ACK_INIT, root, value)
        self._last = None

    def _record(self, task: int, root: int, value: int) -> None:
        last = self._last
        if last is not None and root == self._last_root and task == self._last_task:
            at = len(last) - 8
            prev = int.from_bytes(last[at:], "big")
            last[at:] = (prev ^ value).to_bytes(8, "big")
            return
        self._append(task, ACK_ACK, root, value)
        self._last_task, self._last_root = task, root

    def _append(self, task: int, kind: int, root: int, value: int) -> None:
        body = self.bodies.get(task)
        if body is None:
            body = self.bodies[task] = bytearray()
        body += ACK_RECORD.pack(kind, root & MASK, value & MASK)
        self._last = body
        self._n += 1

    def drain(self) -> dict[int, bytearray]:
        """The bodies per spout task, in the order their tasks were first acked; empties the log."""
        out = self.bodies
        self.bodies = {}
        self._last = None
        self._n = 0
        return out


def deliver(process: Callable[[Any], Any], cls: type, component: str, src: int, created: float,
            vals: list[Any], ids: Any) -> None:
    """``process`` of each default-stream value of a received batch, as a ``cls`` tuple (a
    TrackedTuple) whose roots is the ``Root`` of the value's id triple."""
    new = tuple.__new__
    for v, root in zip(vals, roots_of(ids), strict=False):  # lengths checked on load
        process(new(cls, (None, component, "default", src, v, created, root)))


class BoltAck:
    """A bolt's ``ack`` (bound in place of heronpy's when the bolt does not override it): a
    received tracked tuple is counted in the task's metrics (1 in ``every`` also timed: its
    process latency, as Storm samples at topology.stats.sample.rate) and its roots go into the
    ack log; any other tuple goes to ``slow``, heronpy's whole ack path."""

    __slots__ = ("clock", "every", "log", "metrics", "slow", "tracked")

    def __init__(self, log: AckLog, metrics: Any, every: int, slow: Callable[[Any], Any], tracked: Any,
                 clock: Callable[[], float]) -> None:
        self.log, self.metrics, self.every = log, metrics, every
        self.slow, self.tracked, self.clock = slow, tracked, clock

    def ack(self, tup: TrackedTuple) -> None:
        if type(tup) is not self.tracked:
            self.slow(tup)
            return
        m = self.metrics
        n = m.acked
        m.acked = n + 1
        if not n % self.every:
            m.process_ms_total += (self.clock() - tup[CREATED]) * 1000.0
            m.process_samples += 1
        self.log.ack(tup)
