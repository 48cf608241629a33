"""Where checkpoints live: an interface and file-system stores.

Layout: ``ROOT/TOPOLOGY/CHECKPOINT_ID/TASK_ID`` (one file per task) plus
``ROOT/TOPOLOGY/CHECKPOINT_ID/_COMPLETE``, written last when the master declared the checkpoint
complete. A checkpoint without that marker is incomplete: never loaded, removed by ``gc`` once a
newer one completed.

Every file (state and marker) is framed: ``MAGIC(4) VERSION(1) LENGTH(8, big endian)
SHA256(32)`` then the data; a store given the topology secret (every daemon's) writes version 2,
whose header adds ``MAC(32)``: HMAC-SHA256 under the secret over the topology, the checkpoint
id, the file's name and the data, and refuses to load a file whose MAC does not match (a file
changed, or moved from another task or checkpoint, in a shared checkpoint folder would otherwise
be unpickled by a task). Each file is written atomically (temp file in the same folder, fsync,
``os.replace``, fsync of the folder), so a crash leaves either the old file or the new one, plus at
worst a ``.tmp-`` file that every listing ignores. A file whose frame does not check out (torn
write on a file system that broke the rules, bit rot, someone's edit) raises
:class:`CorruptCheckpointError`, never comes back as state.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import json
import os
import shutil
import struct
import tempfile
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from heron_py.checkpoint.failures import is_transient_errno
from heron_py.common.atomic import atomic_write_bytes, fsync_dir
from heron_py.common.container_layout import ContainerLayout
from heron_py.common.signing import CHECKPOINT_LABEL

MAGIC = b"HPCK"
VERSION = 1
SIGNED_VERSION = 2
_HEADER = struct.Struct(">4sBQ32s")
HEADER_SIZE = _HEADER.size  # 45
MAC_SIZE = 32
COMPLETE_MARKER = "_COMPLETE"

def checkpoint_key_beside(secret_file: Path, secret: bytes) -> bytes:
    """The checkpoint key a daemon finds beside its secret file (the executor writes it); the
    topology secret when there is none (a daemon started by hand)."""
    try:
        return ContainerLayout.beside(secret_file).checkpoint_key.read_bytes()
    except FileNotFoundError:
        return secret
TMP_PREFIX = ".tmp-"
# who besides the owner may write a topology's checkpoint folder: nobody (the group included)
_OTHERS_WRITE = 0o022
# the folders this store makes: the owner's to write, anyone's to read (as a umask of 022 makes them)
_FOLDER_MODE = 0o755
T = TypeVar("T")
DEFAULT_KEEP_LAST = 2


class CheckpointError(Exception):
    pass


class CorruptCheckpointError(CheckpointError):
    pass


class IncompleteCheckpointError(CheckpointError):
    pass


class TransientCheckpointError(CheckpointError):
    """A load failed for a reason a retry may cure (a stale NFS handle, EIO, too many open files,
    no memory, garbage collection renaming the checkpoint away mid-read): the master retries the
    same checkpoint instead of dropping it (heron_py/checkpoint/failures.py)."""


@dataclass(frozen=True)
class Marker:
    """What a complete checkpoint's ``_COMPLETE`` marker says: the tasks that stored state in it
    (those that reported a save with state, as the master counted them, not whatever files are
    in the folder: a stray file of an old run is never loaded, a missing one is an error) and
    the packing it was taken under (component → its task ids), so that a restore onto another
    packing splits each component's state over its new tasks (``heron_py.runtime.rescale``)
    instead of giving each task another task's state. ``packing`` is None in markers written
    before it was recorded."""

    tasks: frozenset[int]
    packing: Mapping[str, tuple[int, ...]] | None

    def encode(self) -> bytes:
        body: dict[str, object] = {"tasks": sorted(self.tasks)}
        if self.packing is not None:
            body["packing"] = {c: list(t) for c, t in sorted(self.packing.items())}
        return json.dumps(body).encode()

    @staticmethod
    def decode(body: bytes, where: str) -> Marker:
        try:
            raw = json.loads(body)
            tasks = frozenset(int(t) for t in raw["tasks"])
            packing = raw.get("packing")
            if packing is not None:
                packing = {str(c): tuple(int(t) for t in ids) for c, ids in packing.items()}
            return Marker(tasks, packing)
        except (ValueError, KeyError, TypeError, AttributeError):
            raise CorruptCheckpointError(f"checkpoint file {where}: expected {{\"tasks\": [ids], \"packing\": "
                                         f"{{component: [ids]}}}}, found {body[:80]!r}") from None


def packing_of(components: Mapping[int, str]) -> dict[str, tuple[int, ...]]:
    """Component → its task ids, from task id → component."""
    out: dict[str, list[int]] = {}
    for task, comp in sorted(components.items()):
        out.setdefault(comp, []).append(task)
    return {c: tuple(t) for c, t in out.items()}


class CheckpointStorage(ABC):
    """Checkpoint ids are ints > 0 (see ``coordinator``); task ids are ints >= 0."""

    @abstractmethod
    def save(self, topology: str, checkpoint_id: int, task_id: int, data: bytes) -> None:
        """Store one task's state; durable when this returns."""

    @abstractmethod
    def mark_complete(self, topology: str, checkpoint_id: int, stored: Iterable[int],
                      packing: Mapping[str, Sequence[int]]) -> None:
        """Every task saved (the master said so): make the checkpoint loadable. ``stored``: the
        tasks that reported saving state (each must have it here, or this raises
        IncompleteCheckpointError); ``packing``: component → task ids of the plan it was taken
        under."""

    @abstractmethod
    def marker(self, topology: str, checkpoint_id: int) -> Marker:
        """The marker of a complete checkpoint; IncompleteCheckpointError when it has none."""

    @abstractmethod
    def load(self, topology: str, checkpoint_id: int, task_id: int) -> bytes | None:
        """One task's state from a complete checkpoint; None when that task saved nothing in it.

        Raises IncompleteCheckpointError for a checkpoint not marked complete,
        CorruptCheckpointError for a file that fails its check and TransientCheckpointError for
        an error a retry may cure (after the store's own quick retries).
        """

    @abstractmethod
    def completed_ids(self, topology: str) -> list[int]:
        """Complete checkpoints, oldest first; with the key, only those whose marker is signed
        under it (``marker_verifies``)."""

    @abstractmethod
    def checkpoint_ids(self, topology: str) -> list[int]:
        """Every checkpoint with a folder, complete or not, oldest first (for the next first id)."""

    def gc(self, topology: str, keep_last: int = DEFAULT_KEEP_LAST, protect: Iterable[int] = ()) -> list[int]:
        """Keep the newest ``keep_last`` complete checkpoints, the incomplete ones newer than
        them (possibly under way) and every id in ``protect`` (the checkpoint the running tasks
        restored from); remove the rest. Returns the removed ids."""
        removed = self.gc_victims(topology, keep_last, protect)
        if removed:
            self.remove(topology, removed)
        return removed

    @abstractmethod
    def remove(self, topology: str, checkpoint_ids: list[int]) -> None:
        """Remove these checkpoints whole: a reader sees each one whole or gone, never its
        marker without its state. Used by ``gc`` and to discard a checkpoint whose marker
        landed after the master ruled it out (a loss reported while it was committing)."""

    @abstractmethod
    def delete_topology(self, topology: str) -> None:
        """Remove every checkpoint of the topology (it was killed)."""

    def gc_victims(self, topology: str, keep_last: int, protect: Iterable[int]) -> list[int]:
        """What ``gc`` removes, oldest first: every checkpoint older than the newest ``keep_last``
        complete ones except those in ``protect``. An incomplete checkpoint newer than the kept
        ones may still be under way; a protected one (the running tasks restored from it) may be
        older than them all."""
        if keep_last < 1:
            raise ValueError(f"gc of topology {topology!r}: keep_last must be >= 1, found {keep_last}")
        newest = self.completed_ids(topology)[-keep_last:]
        if not newest:
            return []
        kept = set(newest) | set(protect)
        return [c for c in self.checkpoint_ids(topology) if c not in kept and c < newest[0]]


def _file_mac(secret: bytes, binding: bytes, data: bytes) -> bytes:
    return hmac.new(secret, CHECKPOINT_LABEL + b"\0" + binding + b"\0" + data, hashlib.sha256).digest()


def encode_frame(data: bytes, secret: bytes | None = None, binding: bytes = b"") -> bytes:
    """A file's bytes: version 1 (sha256) without a secret; version 2 (sha256 and a MAC under the
    secret over ``binding``, which names the file's place, and the data) with one."""
    if secret is None:
        return _HEADER.pack(MAGIC, VERSION, len(data), hashlib.sha256(data).digest()) + data
    return (_HEADER.pack(MAGIC, SIGNED_VERSION, len(data), hashlib.sha256(data).digest())
            + _file_mac(secret, binding, data) + data)


def decode_frame(raw: bytes, where: str, secret: bytes | None = None, binding: bytes = b"") -> bytes:
    """Check ``raw``'s frame; ``where`` names the file in the error. With ``secret`` the file must
    be signed (version 2) under it for ``binding``; without one the checksum alone is checked (tools
    that read checkpoints, never a task that unpickles them)."""
    if len(raw) < HEADER_SIZE:
        raise CorruptCheckpointError(f"checkpoint file {where}: truncated header: expected {HEADER_SIZE} bytes, "
                                     f"found {len(raw)}")
    magic, version, length, digest = _HEADER.unpack_from(raw)
    expected = (SIGNED_VERSION,) if secret is not None else (VERSION, SIGNED_VERSION)
    if magic != MAGIC or version not in expected:
        want = " or ".join(str(v) for v in expected)
        raise CorruptCheckpointError(f"checkpoint file {where}: bad header: expected magic {MAGIC!r} version "
                                     f"{want}{' (signed under the topology secret)' if secret else ''}, found "
                                     f"magic {magic!r} version {version}")
    start = HEADER_SIZE + (MAC_SIZE if version == SIGNED_VERSION else 0)
    mac = raw[HEADER_SIZE:start]
    data = raw[start:]
    if len(data) != length:
        raise CorruptCheckpointError(f"checkpoint file {where}: truncated or padded: header says {length} bytes "
                                     f"of state, found {len(data)}")
    found = hashlib.sha256(data).hexdigest()
    if found != digest.hex():
        raise CorruptCheckpointError(f"checkpoint file {where}: checksum mismatch: header says sha256 "
                                     f"{digest.hex()}, found {found}")
    if secret is not None and not hmac.compare_digest(mac, _file_mac(secret, binding, data)):
        raise CorruptCheckpointError(f"checkpoint file {where}: its MAC does not match the topology secret (the "
                                     f"file was changed or moved from elsewhere after it was saved); refusing "
                                     f"to load it")
    return data


def atomic_write(path: Path, payload: bytes) -> None:
    """Write ``payload`` to ``path`` so a reader or a crash sees the old or the new file, whole
    (heron_py.common.atomic, with this store's temporary prefix, which its sweeps know)."""
    atomic_write_bytes(path, payload, prefix=TMP_PREFIX)


class LocalFsStorage(CheckpointStorage):
    """Checkpoints in a folder of this host (one host, or tests).

    ``load`` retries a transient error ``retries`` times itself (after 0.05 s, 0.1 s, ...: an
    NFS blip or a burst of open files passes without a round of restores); then it raises
    :class:`TransientCheckpointError` and the master retries with a longer backoff.
    """

    def __init__(self, root: str | os.PathLike[str], *, retries: int = 2, retry_delay_s: float = 0.05,
                 sleep: Callable[[float], None] = time.sleep, secret: bytes | None = None) -> None:
        """``secret``: the topology secret; with it files are signed and checked (every daemon
        passes it), and a topology folder another user owns or may write is refused."""
        self.root = Path(root)
        self._secret = secret
        self._checked: set[str] = set()
        self._retries = retries
        self._retry_delay_s = retry_delay_s
        self._sleep = sleep

    def save(self, topology: str, checkpoint_id: int, task_id: int, data: bytes) -> None:
        folder = self._checkpoint_dir(topology, checkpoint_id)
        _check_id("task id", task_id, 0)
        if (folder / COMPLETE_MARKER).exists():
            raise CheckpointError(f"checkpoint {checkpoint_id} of topology {topology!r}: already complete, "
                                  f"task {task_id} cannot save into it")
        self._make_dirs(folder)
        atomic_write(folder / str(task_id), encode_frame(data, self._secret,
                                                         _binding(topology, checkpoint_id, str(task_id))))

    def mark_complete(self, topology: str, checkpoint_id: int, stored: Iterable[int],
                      packing: Mapping[str, Sequence[int]]) -> None:
        folder = self._checkpoint_dir(topology, checkpoint_id)
        tasks = frozenset(stored)
        missing = sorted(t for t in tasks if not (folder / str(t)).is_file())
        if missing:
            raise IncompleteCheckpointError(f"checkpoint {checkpoint_id} of topology {topology!r}: cannot mark "
                                            f"complete, task(s) {missing} reported saving state but {folder} has "
                                            f"none for them")
        self._make_dirs(folder)  # a checkpoint of stateless tasks only has a folder for its marker
        # the marker lists the tasks, so a file that went missing later is an error, not "no state"
        marker = Marker(tasks, {c: tuple(t) for c, t in packing.items()})
        atomic_write(folder / COMPLETE_MARKER, encode_frame(marker.encode(), self._secret,
                                                            _binding(topology, checkpoint_id, COMPLETE_MARKER)))

    def load(self, topology: str, checkpoint_id: int, task_id: int) -> bytes | None:
        return self._retrying(lambda: self._load_once(topology, checkpoint_id, task_id),
                              f"checkpoint {checkpoint_id} of topology {topology!r}", f"task {task_id}'s state")

    def marker(self, topology: str, checkpoint_id: int) -> Marker:
        return self._retrying(lambda: self._marker_once(topology, checkpoint_id),
                              f"checkpoint {checkpoint_id} of topology {topology!r}", "its complete marker")

    def _retrying(self, read: Callable[[], T], where: str, what: str) -> T:
        """``read``, retried ``retries`` times on a transient error; then TransientCheckpointError."""
        attempt = 0
        while True:
            try:
                return read()
            except TransientCheckpointError:
                if attempt >= self._retries:
                    raise
            except MemoryError:
                if attempt >= self._retries:
                    raise TransientCheckpointError(f"{where}: out of memory reading {what}") from None
            except OSError as e:
                if not is_transient_errno(e.errno):
                    raise
                if attempt >= self._retries:
                    raise TransientCheckpointError(f"{where}: {what}: {errno.errorcode.get(e.errno or 0, '?')} "
                                                   f"{e.strerror} ({e.filename})") from None
            attempt += 1
            self._sleep(self._retry_delay_s * attempt)

    def _load_once(self, topology: str, checkpoint_id: int, task_id: int) -> bytes | None:
        folder = self._checkpoint_dir(topology, checkpoint_id)
        _check_id("task id", task_id, 0)
        if task_id not in self._marker_once(topology, checkpoint_id).tasks:
            return None
        path = folder / str(task_id)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            if not (folder / COMPLETE_MARKER).exists():
                # garbage collection renamed the whole checkpoint away between the marker and the
                # file: a retry finds it gone for good (incomplete) or, on a racing listing, whole
                raise TransientCheckpointError(f"checkpoint {checkpoint_id} of topology {topology!r}: removed "
                                                f"while task {task_id}'s state was being read (garbage "
                                                f"collection of old checkpoints)") from None
            raise CorruptCheckpointError(f"checkpoint file {path}: missing, but the complete marker lists "
                                         f"task {task_id}") from None
        return decode_frame(raw, str(path), self._secret, _binding(topology, checkpoint_id, str(task_id)))

    def completed_ids(self, topology: str) -> list[int]:
        top = self._topology_dir(topology)
        return [c for c in self.checkpoint_ids(topology) if self._complete(topology, c, top / str(c) / COMPLETE_MARKER)]

    def _complete(self, topology: str, checkpoint_id: int, marker: Path) -> bool:
        if self._secret is None:
            return marker.is_file()
        try:
            raw = marker.read_bytes()
        except (FileNotFoundError, IsADirectoryError):
            return False
        return marker_verifies(raw, str(marker), self._secret, topology, checkpoint_id)

    def checkpoint_ids(self, topology: str) -> list[int]:
        top = self._topology_dir(topology)
        if not top.is_dir():
            return []
        return sorted(int(p.name) for p in top.iterdir() if p.name.isdigit() and p.is_dir())

    def remove(self, topology: str, checkpoint_ids: list[int]) -> None:
        for c in checkpoint_ids:
            folder = self._checkpoint_dir(topology, c)
            if folder.exists():
                self._remove(folder)

    def delete_topology(self, topology: str) -> None:
        top = self._topology_dir(topology)
        if top.exists():
            self._remove(top)

    def _remove(self, path: Path) -> None:
        # rename first (atomic) so a crash mid-delete never leaves a half checkpoint under its id
        grave = path.parent / f"{TMP_PREFIX}gone-{path.name}-{uuid.uuid4().hex}"
        os.replace(path, grave)
        fsync_dir(path.parent)
        shutil.rmtree(grave)

    def _marker_once(self, topology: str, checkpoint_id: int) -> Marker:
        folder = self._checkpoint_dir(topology, checkpoint_id)
        marker = folder / COMPLETE_MARKER
        try:
            raw = marker.read_bytes()
        except FileNotFoundError:
            raise IncompleteCheckpointError(f"checkpoint {checkpoint_id} of topology {topology!r}: not complete "
                                            f"(no {COMPLETE_MARKER} in {folder}); only complete checkpoints "
                                            f"are loaded") from None
        body = decode_frame(raw, str(marker), self._secret, _binding(topology, checkpoint_id, COMPLETE_MARKER))
        return Marker.decode(body, str(marker))

    def _make_dirs(self, folder: Path) -> None:
        # new folders' entries must be durable too, or a crash can lose a whole checkpoint folder
        missing = [p for p in (self.root, folder.parent, folder) if not p.exists()]
        self.root.mkdir(parents=True, exist_ok=True)  # the root is the operator's: the umask's mode
        for p in (folder.parent, folder):
            # an explicit mode, not the umask's: a umask of 002 would make them group-writable,
            # which _check_private refuses (and which would let the group swap files in)
            p.mkdir(mode=_FOLDER_MODE, exist_ok=True)
        for p in missing:
            fsync_dir(p.parent)

    def _topology_dir(self, topology: str) -> Path:
        if not topology or topology in (".", "..") or "/" in topology or "\\" in topology \
                or topology.startswith(".") or "\0" in topology:
            raise ValueError(f"checkpoint storage: bad topology name {topology!r}: expected a plain file name "
                             f"not starting with '.'")
        top = self.root / topology
        if self._secret is not None and topology not in self._checked:
            _check_private(top)
            self._checked.add(topology)
        return top

    def _checkpoint_dir(self, topology: str, checkpoint_id: int) -> Path:
        _check_id("checkpoint id", checkpoint_id, 1)
        return self._topology_dir(topology) / str(checkpoint_id)


def _binding(topology: str, checkpoint_id: int, name: str) -> bytes:
    return f"{topology}/{checkpoint_id}/{name}".encode()


def marker_verifies(raw: bytes, where: str, secret: bytes, topology: str, checkpoint_id: int) -> bool:
    """Whether a complete marker's bytes are signed under ``secret`` for this checkpoint. A
    store that holds the key lists a checkpoint as complete only then: whoever may write the
    storage (and not the key) could otherwise declare a checkpoint complete, and a reader of
    ``completed_ids`` (the master choosing what to restore) would act on it."""
    try:
        decode_frame(raw, where, secret, _binding(topology, checkpoint_id, COMPLETE_MARKER))
    except CorruptCheckpointError:
        return False
    return True


def _check_private(top: Path) -> None:
    """A topology's checkpoint folder in a shared root (a sticky /tmp-like folder, an NFS share)
    must be ours and writable by us alone: someone who made it first, or may write into it, could
    swap files in (their MACs would then fail, but a restore would have nothing to load)."""
    import stat

    try:
        st = os.lstat(top)
    except FileNotFoundError:
        return  # made by us when the first task saves (``_make_dirs``: writable by us alone)
    # a group's members are other users too: group write lets them swap files in as world write does
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & _OTHERS_WRITE:
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a folder"
        raise CheckpointError(f"checkpoint folder {top}: expected a folder of user {os.geteuid()} that no other "
                              f"user may write, found {kind} of user {st.st_uid} with mode "
                              f"{stat.S_IMODE(st.st_mode):o}; refusing to use it (choose another "
                              f"heron_py.checkpoint.root, or fix its owner and mode)")


def _check_id(what: str, value: int, lowest: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < lowest:
        raise ValueError(f"checkpoint storage: {what} must be an int >= {lowest}, found {value!r}")


class SharedDirStorage(LocalFsStorage):
    """Checkpoints in a folder every host of the topology mounts at the same path (a cluster's
    shared home over NFS, say), so a task restarted on another host finds its state.

    Same files and layout as :class:`LocalFsStorage`; it relies on the shared file system making
    ``os.replace`` atomic within a folder and ``fsync`` durable on the server (NFS's close-to-open
    consistency gives both). The folder must exist and be writable: it is a mount, so creating it
    here would hide a missing mount behind a local folder.
    """

    def __init__(self, root: str | os.PathLike[str], *, secret: bytes | None = None) -> None:
        """``secret``: the topology's checkpoint key, as for :class:`LocalFsStorage` (files
        signed and checked, the topology folder's owner and mode checked)."""
        super().__init__(root, secret=secret)
        if not self.root.is_dir():
            raise CheckpointError(f"shared checkpoint folder {self.root}: expected an existing folder shared by "
                                  f"the hosts, found none")
        # os.access lies on some network file systems: try a real write
        try:
            fd, probe = tempfile.mkstemp(dir=self.root, prefix=f"{TMP_PREFIX}probe.")
            os.close(fd)
            os.unlink(probe)
        except OSError as e:
            raise CheckpointError(f"shared checkpoint folder {self.root}: expected a writable folder, "
                                  f"found {e.strerror}") from None


def checkpoint_root(home: Path, root_setting: str) -> Path:
    """Where a topology's checkpoints live: ``heron_py.checkpoint.root``, else checkpoints/ under
    the heron home (on Slurm the home is shared by every host, so a task restarted on another
    host finds its state)."""
    return Path(root_setting) if root_setting else home / "checkpoints"
