# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The ids of received tracked tuples, typed: the contract of tracked.py (its docstring and its
tests are this module's), compiled in its place by installation (heron_py.hotpath.TYPED).

A ``Root`` holds its four numbers as C fields (no Python int per id, no instance dict for the
ack value) and is allocated from a free list. The id arrays are ``array('Q')`` written through
their buffers; ``AckLog`` writes its records straight into its bodies' bytes."""

cimport cython
from cpython cimport array
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_SET_ITEM
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from libc.stdint cimport int64_t, uint64_t

import array as _array_mod

from heron_py.common.framing import ACK_ACK, ACK_INIT
from heron_py.acking.root_errors import ids_error

cdef extern from "Python.h":
    # a tuple subclass's tp_alloc (a heap type's is this one): the instance with n empty slots,
    # filled below as tuple.__new__(cls, items) fills it, without building ``items`` first
    object PyType_GenericAlloc(type t, Py_ssize_t n)

cdef int REC = 17  # framing.ACK_RECORD: kind u8, root u64, value u64, big-endian
cdef unsigned char K_ACK = ACK_ACK, K_INIT = ACK_INIT
GOLDEN, MIX1, MIX2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB  # splitmix64's, as in tracked.py
cdef uint64_t C_GOLDEN = 0x9E3779B97F4A7C15ULL, C_MIX1 = 0xBF58476D1CE4E5B9ULL, C_MIX2 = 0x94D049BB133111EBULL
cdef array.array Q_TEMPLATE = _array_mod.array("Q")
CREATED, ROOTS = 5, 6  # the fields of heron_py.api.tuple.HeronTuple read by index (as in tracked.py)
cdef Py_ssize_t C_CREATED = 5, C_ROOTS = 6


cdef inline uint64_t load64(const unsigned char* p) noexcept nogil:
    return ((<uint64_t>p[0] << 56) | (<uint64_t>p[1] << 48) | (<uint64_t>p[2] << 40) | (<uint64_t>p[3] << 32)
            | (<uint64_t>p[4] << 24) | (<uint64_t>p[5] << 16) | (<uint64_t>p[6] << 8) | <uint64_t>p[7])


cdef inline void store64(unsigned char* p, uint64_t v) noexcept nogil:
    cdef int i
    for i in range(8):
        p[7 - i] = <unsigned char>((v >> (8 * i)) & 0xFF)


@cython.freelist(1024)
cdef class Root:
    """The one root of a received tuple, with the tuple's own id and its ack value."""
    cdef public int64_t task
    cdef public uint64_t root
    cdef public uint64_t id
    cdef public uint64_t ack_val

    def __init__(self, int64_t task, uint64_t root, uint64_t id, uint64_t ack_val=0) -> None:
        self.task = task
        self.root = root
        self.id = id
        self.ack_val = ack_val

    def __len__(self) -> int:
        return 1

    def __getitem__(self, Py_ssize_t i):
        if i != 0 and i != -1:
            raise IndexError("Root index out of range (a Root holds one root)")
        return (self.task, self.root, self.id)

    def __iter__(self):
        return iter(((self.task, self.root, self.id),))

    def __eq__(self, other) -> bool:
        if type(other) is Root:
            o = <Root>other
            return self.task == o.task and self.root == o.root and self.id == o.id
        return isinstance(other, tuple) and other == ((self.task, self.root, self.id),)

    def __hash__(self) -> int:
        return hash(((self.task, self.root, self.id),))

    def __repr__(self) -> str:
        return f"(({self.task}, {self.root}, {self.id}),)"

    def __reduce__(self):
        return (Root, (self.task, self.root, self.id, self.ack_val))


cdef inline Root make_root(int64_t task, uint64_t root, uint64_t id):
    cdef Root r = Root.__new__(Root)
    r.task = <int64_t>task
    r.root = root
    r.id = id
    r.ack_val = 0
    return r


def roots_of(ids) -> list:
    """A ``Root`` per (spout task, root id, tuple id) triple of a flat id array."""
    cdef array.array a
    cdef Py_ssize_t i, n
    cdef unsigned long long* p
    cdef list out
    n = len(ids)
    if n % 3:
        raise ValueError(ids_error(n))
    if type(ids) is not array.array or (<array.array>ids).ob_descr.typecode != b"Q":
        it = iter(ids)
        return [Root(t, r, i) for t, r, i in zip(it, it, it, strict=True)]
    a = <array.array>ids
    p = a.data.as_ulonglongs
    out = [None] * (n // 3)
    for i in range(n // 3):
        out[i] = make_root(<int64_t>p[3 * i], p[3 * i + 1], p[3 * i + 2])
    return out


def received_roots(triples):
    """A received row's roots as its tuple's ``roots``: a ``Root`` for one triple, else the
    triples as they are (none: untracked; several: an emit anchored to several roots)."""
    if len(triples) == 1:
        t, r, i = triples[0]
        return Root(t, r, i)
    return triples


cdef inline void put3(array.array ids, uint64_t a, uint64_t b, uint64_t c) except *:
    cdef Py_ssize_t n = len(ids)
    array.resize_smart(ids, n + 3)
    cdef unsigned long long* p = ids.data.as_ulonglongs
    p[n] = a
    p[n + 1] = b
    p[n + 2] = c


cdef class Edges:
    """Nonzero 64-bit edge ids: splitmix64 from a seed."""
    cdef public uint64_t state

    def __init__(self, seed) -> None:
        self.state = <uint64_t>(seed & 0xFFFFFFFFFFFFFFFF)

    cdef inline uint64_t _draw(self) noexcept:
        cdef uint64_t z
        while True:
            self.state += C_GOLDEN
            z = self.state
            z = (z ^ (z >> 30)) * C_MIX1
            z = (z ^ (z >> 27)) * C_MIX2
            z ^= z >> 31
            if z:
                return z

    def draw(self) -> int:
        return self._draw()


def new_ids(Root root, Edges edges) -> array.array:
    """The id array of a destination's first anchored copy (``anchor`` then adds to it)."""
    cdef uint64_t edge = edges._draw()
    root.ack_val ^= edge
    cdef array.array ids = array.clone(Q_TEMPLATE, 0, False)
    put3(ids, <uint64_t>root.task, root.root, edge)
    return ids


def ids_of(uint64_t task, uint64_t root, uint64_t edge) -> array.array:
    """The id array of a destination's first tracked copy from a spout."""
    cdef array.array ids = array.clone(Q_TEMPLATE, 0, False)
    put3(ids, task, root, edge)
    return ids


def anchor(array.array ids, Root root, Edges edges) -> None:
    """An anchored copy: a fresh edge XORed into the anchor's ack value; the copy's triple
    (spout task, root id, edge) appended to its destination's id array."""
    cdef uint64_t edge = edges._draw()
    root.ack_val ^= edge
    put3(ids, <uint64_t>root.task, root.root, edge)


def add_ids(array.array ids, uint64_t task, uint64_t root, uint64_t edge) -> None:
    """A spout's tracked copy: its triple appended to its destination's id array."""
    put3(ids, task, root, edge)


cdef class AckLog:
    """The acks recorded since the last ``drain``, as ACK_BATCH bodies per spout task."""
    cdef public dict bodies
    cdef bytearray _last
    cdef int64_t _last_task
    cdef uint64_t _last_root
    cdef Py_ssize_t _n

    def __init__(self) -> None:
        self.bodies = {}
        self._last = None
        self._n = 0

    def __len__(self) -> int:
        return self._n

    cdef unsigned char* _append(self, int64_t task) except NULL:
        """Room for one more record at the end of the task's body."""
        cdef Py_ssize_t size
        body = self.bodies.get(task)
        if body is None:
            body = bytearray()
            self.bodies[task] = body
        size = PyByteArray_GET_SIZE(body)
        PyByteArray_Resize(body, size + REC)
        self._last = <bytearray>body
        self._n += 1
        return <unsigned char*>PyByteArray_AS_STRING(body) + size

    def add_init(self, int64_t task, uint64_t root, uint64_t value) -> None:
        """A spout's new root: its copies' ids XORed, to the task's tracker (never merged)."""
        cdef unsigned char* p = self._append(task)
        p[0] = K_INIT
        store64(p + 1, root)
        store64(p + 9, value)
        self._last = None

    cdef inline void _record(self, int64_t task, uint64_t root, uint64_t value) except *:
        cdef bytearray last = self._last
        cdef unsigned char* p
        if last is not None and root == self._last_root and task == self._last_task:
            p = <unsigned char*>PyByteArray_AS_STRING(last) + PyByteArray_GET_SIZE(last) - 8
            store64(p, load64(p) ^ value)
            return
        p = self._append(task)
        p[0] = K_ACK
        store64(p + 1, root)
        store64(p + 9, value)
        self._last_task = task
        self._last_root = root

    def add(self, Root root) -> None:
        """The ack of a tuple with one root: its id XOR its ack value."""
        self._record(root.task, root.root, root.id ^ root.ack_val)

    def add_triples(self, triples, uint64_t ack_val) -> None:
        """The ack of a tuple with any roots: per root, its id XOR the tuple's ack value."""
        cdef uint64_t v
        for task, root, value in triples:
            v = value
            self._record(task, root, v ^ ack_val)

    def ack(self, tup) -> None:
        """The ack of a received tuple, its ack value as it is now: its Root, or each of its
        roots; an untracked tuple adds nothing."""
        # checked here (a TrackedTuple is a tuple subclass): _ack reads the slot unchecked
        if not isinstance(tup, tuple) or len(tup) <= C_ROOTS:
            raise TypeError(f"ack: expected a received tuple, found {type(tup).__name__}")
        self._ack(<tuple>tup)

    cdef inline void _ack(self, tuple tup) except *:
        cdef Root r
        roots = tup[C_ROOTS]
        if type(roots) is Root:
            r = <Root>roots
            self._record(r.task, r.root, r.id ^ r.ack_val)
        elif roots:
            self.add_triples(roots, tup.ack_val)

    def drain(self) -> dict:
        """The bodies per spout task, in the order their tasks were first acked; empties the log."""
        out = self.bodies
        self.bodies = {}
        self._last = None
        self._n = 0
        return out




cdef inline void put(object tup, Py_ssize_t i, object item):
    Py_INCREF(item)
    PyTuple_SET_ITEM(tup, i, item)


def deliver(process, type cls, str component, src, created, list vals, ids) -> None:
    """``process`` of each default-stream value of a received batch, as a ``cls`` tuple (a
    TrackedTuple) whose roots is the ``Root`` of the value's id triple."""
    cdef list roots = roots_of(ids)
    cdef Py_ssize_t i, n = min(len(vals), len(roots))
    for i in range(n):
        tup = PyType_GenericAlloc(cls, 7)
        put(tup, 0, None)
        put(tup, 1, component)
        put(tup, 2, "default")
        put(tup, 3, src)
        put(tup, 4, vals[i])
        put(tup, 5, created)
        put(tup, 6, roots[i])
        process(tup)


cdef class BoltAck:
    """A bolt's ``ack`` (bound in place of heronpy's when the bolt does not override it): a
    received tracked tuple is counted in the task's metrics (1 in ``every`` also timed: its
    process latency, as Storm samples at topology.stats.sample.rate) and its roots go into the
    ack log; any other tuple goes to ``slow``, heronpy's whole ack path."""
    cdef public AckLog log
    cdef public object metrics, slow, tracked, clock
    cdef public long long every

    def __init__(self, AckLog log, metrics, long long every, slow, tracked, clock) -> None:
        self.log, self.metrics, self.every = log, metrics, every
        self.slow, self.tracked, self.clock = slow, tracked, clock

    def ack(self, tup) -> None:
        if type(tup) is not self.tracked:
            self.slow(tup)
            return
        m = self.metrics
        n = m.acked
        m.acked = n + 1
        if not n % self.every:
            m.process_ms_total += (self.clock() - (<tuple>tup)[C_CREATED]) * 1000.0
            m.process_samples += 1
        self.log._ack(<tuple>tup)  # a TrackedTuple: its type was checked above
