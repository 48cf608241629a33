"""What a failed checkpoint or a failed restore means: pure rules, no I/O, no clock.

- :class:`CheckpointFailureManager` counts checkpoints that failed in a row (aborted at their
  timeout, by a failure of the topology while under way, or because their ``_COMPLETE`` marker
  could not be made durable). At ``topology.stateful.max.consecutive.failures`` the topology's
  checkpoint state says so (status, the web page, the ``__checkpoint-failing`` metric) and the
  master logs the reasons. Flink's CheckpointFailureManager is the model; unlike Flink we do not
  fail the job: a stream keeps flowing, only its state is at risk, and the operator decides.
- :func:`is_transient_load_error` sorts a task's restore error: a transient one (a stale NFS
  handle, EIO, too many open files, no memory, the storage's gc race) is retried on the same
  checkpoint with :func:`backoff_secs`; only a permanent one (a corrupt or incomplete checkpoint,
  state the serializer cannot read) makes the restore fall back to an older checkpoint.
"""

from __future__ import annotations

import errno
from collections import deque
from dataclasses import dataclass

# errnos that say "try again" rather than "this checkpoint is bad": NFS (ESTALE, ETIMEDOUT),
# the disk or its controller (EIO), process or system limits (EMFILE, ENFILE, ENOMEM, EAGAIN)
TRANSIENT_ERRNOS = frozenset({errno.ESTALE, errno.EIO, errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EAGAIN,
                              errno.EINTR, errno.ETIMEDOUT, errno.EBUSY, errno.ENOSPC})

# a task reports its restore error as "TypeName: message" (heron_py/runtime/stateful.py); these
# type names are transient whatever the message says
TRANSIENT_TYPES = frozenset({"TransientCheckpointError", "MemoryError", "BlockingIOError", "InterruptedError",
                             "TimeoutError"})


def is_transient_errno(code: int | None) -> bool:
    return code is not None and code in TRANSIENT_ERRNOS


def is_transient_load_error(error: str) -> bool:
    """True for a task's restore error that a retry of the same checkpoint may cure.

    A bare ``OSError: [Errno N] ...`` (a storage without our own wrapping) is transient when N
    is; anything else (corrupt, incomplete, undecodable state, a user's ``init_state`` raising)
    is permanent for that checkpoint.
    """
    kind, _, message = error.partition(":")
    kind = kind.strip()
    if kind in TRANSIENT_TYPES:
        return True
    if kind in ("OSError", "IOError"):
        message = message.strip()
        if message.startswith("[Errno "):
            number = message[len("[Errno "):].split("]", 1)[0]
            return number.isdigit() and is_transient_errno(int(number))
    return False


def backoff_secs(attempt: int, initial_secs: float, max_secs: float) -> float:
    """Delay before retry ``attempt`` (1 = the first retry): doubling from ``initial_secs``,
    capped at ``max_secs`` so a long outage is still retried every ``max_secs``."""
    if attempt < 1:
        raise ValueError(f"backoff: attempt must be >= 1, found {attempt}")
    return float(min(max_secs, initial_secs * 2 ** min(attempt - 1, 30)))


@dataclass(frozen=True)
class FailureVerdict:
    """What one more failure (or a success) changed."""

    consecutive: int
    tripped: bool  # this failure reached the limit (reported once per streak)
    recovered: bool  # a success ended a streak that had reached the limit


class CheckpointFailureManager:
    """Counts checkpoints failed in a row; keeps the newest reasons for the log and status."""

    def __init__(self, max_consecutive: int, keep_reasons: int = 5) -> None:
        if isinstance(max_consecutive, bool) or not isinstance(max_consecutive, int) or max_consecutive < 1:
            raise ValueError(f"checkpoint failure manager: max_consecutive must be an int >= 1, "
                             f"found {max_consecutive!r}")
        self.max_consecutive = max_consecutive
        self.consecutive = 0
        self.total = 0
        self._reasons: deque[str] = deque(maxlen=keep_reasons)

    @property
    def failing(self) -> bool:
        return self.consecutive >= self.max_consecutive

    @property
    def reasons(self) -> tuple[str, ...]:
        """The newest failures' reasons, oldest first (``checkpoint ID: reason``)."""
        return tuple(self._reasons)

    def failed(self, checkpoint_id: int, reason: str) -> FailureVerdict:
        self.consecutive += 1
        self.total += 1
        self._reasons.append(f"checkpoint {checkpoint_id}: {reason}")
        return FailureVerdict(self.consecutive, self.consecutive == self.max_consecutive, False)

    def succeeded(self) -> FailureVerdict:
        was_failing = self.failing
        self.consecutive = 0
        self._reasons.clear()
        return FailureVerdict(0, False, was_failing)
