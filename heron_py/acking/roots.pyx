# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""One spout task's roots at the XOR tracker, typed: the contract of roots.py (its docstring
and its tests are this module's), compiled in its place by installation (heron_py.hotpath.TYPED).

A table is open addressing with linear probing over one C array of entries (root, value,
generation, used), hashed by Fibonacci multiplication, at most half full, deleted by backward
shift (no tombstones). A generation is a number: an entry's bucket is its age, the newest
generation's number less its own (unsigned, so wrapping is harmless). Dropping the oldest
generation rebuilds the table without it (once per rotation: every T/2 seconds in the stream
manager). The records are read from the body's bytes and the results written into the
bytearray's buffer, so a record costs no Python object unless it resolves a root that has to
be handed back as a Python int (a timeout's list)."""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from libc.stdint cimport uint8_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free

from heron_py.common.framing import ACK_ACK, ACK_FAIL, ACK_INIT, RESULT_ACKED, RESULT_FAILED

# the reference's messages, so both implementations refuse alike
from heron_py.acking.root_errors import body_error, check_buckets, shrink_error

cdef uint64_t FIB = 0x9E3779B97F4A7C15ULL
cdef size_t MIN_BITS = 6  # 64 entries
cdef int REC = 17  # framing.ACK_RECORD: kind u8, root u64, value u64, big-endian
cdef int RES = 9  # framing.RESULT_RECORD: outcome u8, root u64
cdef uint8_t K_INIT = ACK_INIT, K_ACK = ACK_ACK, K_FAIL = ACK_FAIL
cdef uint8_t R_ACKED = RESULT_ACKED, R_FAILED = RESULT_FAILED


cdef struct Entry:
    uint64_t key
    uint64_t val
    uint32_t gen
    uint8_t used


cdef inline uint64_t load64(const unsigned char* p) noexcept nogil:
    return ((<uint64_t>p[0] << 56) | (<uint64_t>p[1] << 48) | (<uint64_t>p[2] << 40) | (<uint64_t>p[3] << 32)
            | (<uint64_t>p[4] << 24) | (<uint64_t>p[5] << 16) | (<uint64_t>p[6] << 8) | <uint64_t>p[7])


cdef inline void store_result(char* p, uint8_t outcome, uint64_t root) noexcept nogil:
    cdef int i
    p[0] = <char>outcome
    for i in range(8):
        p[8 - i] = <char>((root >> (8 * i)) & 0xFF)


cdef class _Table:
    cdef Entry* slots
    cdef size_t bits, mask, n

    def __cinit__(self) -> None:
        self.slots = NULL
        self.n = 0
        self._alloc(MIN_BITS)

    def __dealloc__(self) -> None:
        free(self.slots)

    cdef void _alloc(self, size_t bits) except *:
        cdef Entry* slots = <Entry*>calloc(<size_t>1 << bits, sizeof(Entry))
        if slots == NULL:
            raise MemoryError()
        self.slots = slots
        self.bits = bits
        self.mask = (<size_t>1 << bits) - 1

    cdef inline size_t home(self, uint64_t key) noexcept nogil:
        return <size_t>((key * FIB) >> (64 - self.bits))

    cdef inline Entry* find(self, uint64_t key) noexcept nogil:
        cdef size_t i = self.home(key)
        cdef Entry* e
        while True:
            e = &self.slots[i]
            if not e.used:
                return NULL
            if e.key == key:
                return e
            i = (i + 1) & self.mask

    cdef void _place(self, uint64_t key, uint64_t val, uint32_t gen) noexcept nogil:
        cdef size_t i = self.home(key)
        while self.slots[i].used:
            i = (i + 1) & self.mask
        self.slots[i].key = key
        self.slots[i].val = val
        self.slots[i].gen = gen
        self.slots[i].used = 1
        self.n += 1

    cdef void put(self, uint64_t key, uint64_t val, uint32_t gen) except *:
        """``key`` must be absent."""
        if (self.n + 1) * 2 > self.mask + 1:
            self._rebuild(self.bits + 1, 0, 0, None)
        self._place(key, val, gen)

    cdef void remove(self, Entry* e) noexcept nogil:
        """Backward-shift deletion: each later entry of the run that may move into the hole
        (its home is not cyclically within (hole, its slot]) does, and leaves a hole behind."""
        cdef size_t hole = e - self.slots
        cdef size_t j = hole
        cdef size_t k
        while True:
            j = (j + 1) & self.mask
            if not self.slots[j].used:
                break
            k = self.home(self.slots[j].key)
            if (j > hole and (k <= hole or k > j)) or (j < hole and k <= hole and k > j):
                self.slots[hole] = self.slots[j]
                hole = j
        self.slots[hole].used = 0
        self.n -= 1

    cdef void _rebuild(self, size_t bits, uint32_t newest, uint32_t keep, list dropped) except *:
        """Into 2**bits slots; with ``keep`` > 0, only the entries younger than ``keep``
        generations (newest - gen < keep); the keys of the others are appended to ``dropped``."""
        cdef Entry* old = self.slots
        cdef size_t size = self.mask + 1
        cdef size_t i
        self._alloc(bits)
        self.n = 0
        for i in range(size):
            if old[i].used:
                if keep and <uint32_t>(newest - old[i].gen) >= keep:
                    if dropped is not None:
                        dropped.append(old[i].key)
                else:
                    self._place(old[i].key, old[i].val, old[i].gen)
        free(old)

    cdef list drop_from(self, uint32_t newest, uint32_t keep):
        """Drops the entries ``keep`` or more generations old; returns their keys. The table is
        sized again for what stays (a spike's memory is given back)."""
        cdef list dropped = []
        cdef size_t stay = 0
        cdef size_t i
        cdef size_t bits = MIN_BITS
        for i in range(self.mask + 1):
            if self.slots[i].used and <uint32_t>(newest - self.slots[i].gen) < keep:
                stay += 1
        while (<size_t>1 << bits) < stay * 4:
            bits += 1
        self._rebuild(bits, newest, keep, dropped)
        return dropped

    cdef size_t count_age(self, uint32_t newest, uint32_t age) noexcept nogil:
        cdef size_t i, c = 0
        for i in range(self.mask + 1):
            if self.slots[i].used and <uint32_t>(newest - self.slots[i].gen) == age:
                c += 1
        return c

    cdef list keys(self):
        cdef size_t i
        return [self.slots[i].key for i in range(self.mask + 1) if self.slots[i].used]


cdef class RootTable:
    """The newest generation is bucket 0. A live root is never among the resolved ones."""

    cdef _Table _live
    cdef _Table _done
    cdef uint32_t _newest
    cdef uint32_t _buckets

    def __init__(self, int buckets) -> None:
        check_buckets(buckets)
        self._live = _Table()
        self._done = _Table()
        self._newest = 0
        self._buckets = buckets

    @property
    def buckets(self) -> int:
        return self._buckets

    @property
    def live(self) -> int:
        """Roots neither acked, failed nor timed out."""
        return self._live.n

    def live_in(self, int bucket) -> int:
        return self._live.count_age(self._newest, bucket)

    def roots(self) -> list:
        """The live roots (tests and tools)."""
        return self._live.keys()

    def resolved(self) -> list:
        """The roots remembered as failed or timed out (tests and tools)."""
        return self._done.keys()

    def apply(self, const unsigned char[::1] body, bytearray results) -> list:
        """One ACK_BATCH body: an INIT or an ACK XORs its value into the root's entry (creating
        it), a FAIL resolves the root; each root resolved is appended to ``results``. Returns
        the record kinds it did not know (those records are skipped)."""
        cdef Py_ssize_t size = body.shape[0]
        if size % REC:
            raise ValueError(body_error(size))
        cdef Py_ssize_t nrec = size // REC
        cdef Py_ssize_t start = PyByteArray_GET_SIZE(results)
        # room for a result per record; trimmed to what was written
        PyByteArray_Resize(results, start + nrec * RES)
        cdef char* out = PyByteArray_AS_STRING(results) + start
        cdef Py_ssize_t written = 0
        cdef list unknown = []
        cdef const unsigned char* p = &body[0] if size else NULL
        cdef Py_ssize_t r
        cdef uint8_t kind
        cdef uint64_t root, value, v
        cdef Entry* e
        cdef _Table live = self._live
        cdef _Table done = self._done
        for r in range(nrec):
            kind = p[0]
            root = load64(p + 1)
            value = load64(p + 9)
            p += REC
            if kind == K_ACK or kind == K_INIT:
                e = live.find(root)
                if e != NULL:
                    v = e.val ^ value
                    if v == 0:
                        live.remove(e)
                        store_result(out + written, R_ACKED, root)
                        written += RES
                    else:
                        e.val = v
                elif value != 0 and done.find(root) == NULL:
                    live.put(root, value, self._newest)
            elif kind == K_FAIL:
                if self._fail(root):
                    store_result(out + written, R_FAILED, root)
                    written += RES
            else:
                unknown.append(kind)
        PyByteArray_Resize(results, start + written)
        return unknown

    cdef bint _fail(self, uint64_t root) except -1:
        if self._done.find(root) != NULL:
            return False
        cdef Entry* e = self._live.find(root)
        if e != NULL:
            self._live.remove(e)
        self._done.put(root, 1, self._newest)
        return True

    def fail(self, root: int) -> bool:
        """Resolves ``root`` as failed; False when it was resolved already. A fail for a root
        never seen (its init still on the way) fails it too."""
        return self._fail(root)

    cdef list _drop_oldest(self):
        """Drops every entry of age ``buckets`` or more (after the newest moved or the count
        went down); the live ones dropped are remembered as resolved in the newest generation."""
        self._done.drop_from(self._newest, self._buckets)
        cdef list expired = self._live.drop_from(self._newest, self._buckets)
        cdef uint64_t root
        for root in expired:
            self._done.put(root, 1, self._newest)
        return expired

    def rotate(self) -> list:
        """A new newest generation, the oldest dropped: its live roots (returned) timed out and
        are remembered as resolved."""
        self._newest += 1
        return self._drop_oldest()

    def grow(self) -> None:
        """A new newest generation, none dropped."""
        self._newest += 1
        self._buckets += 1

    def shrink(self) -> list:
        """The oldest generation dropped, none added (at least 2 stay); as ``rotate``, its live
        roots timed out."""
        if self._buckets <= 2:
            raise ValueError(shrink_error(self._buckets))
        self._buckets -= 1
        return self._drop_oldest()
