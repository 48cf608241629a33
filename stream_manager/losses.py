"""A stream manager's reports of lost in-flight data to the master, effectively once.

Data lost in flight (a data-path connection that closed, a peer's second connection while its
first is open, a counted drop) would become permanent at the next completed checkpoint, so the
master is asked to roll every task back (RollbackRequest). The request must not be lost with a
link or with a master that may not act just then (its state-manager session suspended): it is
sent again with every heartbeat (``unanswered``) until the master answers it (RollbackAnswer)
or a newer restore comes. Until then no checkpoint marker passes this stream manager
(``admits_marker``): a checkpoint whose markers passed after the loss would hold the loss, and
one that completed would make it permanent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from heron_py.common.wire import encode_msg
from proto import heron_py_pb2 as pb


class LossReport:
    def __init__(self, container: int, log: logging.Logger, to_master: Callable[[bytes], None]) -> None:
        self._container = container
        self._log = log
        self._to_master = to_master
        # the rollback asked for the run of a restore, until answered or a newer restore: that
        # restore id and the request's frame (None: nothing asked); answered: not sent again,
        # but markers still stop until the restore the answer promised
        self._asked: tuple[int, bytes] | None = None
        self._answered = False
        self._later: str | None = None  # a loss after the request went: asked anew if it was moot
        self.markers_dropped = 0  # while a loss is unanswered, for the log

    def loss(self, restore_id: int, reason: str) -> bool:
        """In-flight data of the run of ``restore_id`` was lost: asks the master to roll every
        task back (nothing before the first restore: the first restore replaces everything).
        During a restore too: another stream manager may already process the new run, whose
        data this loss may hold; the master, which knows, answers a request about a restore
        still under way as moot. Returns whether it asked (once per run)."""
        if not restore_id:
            return False
        if self._asked is not None and self._asked[0] == restore_id:
            self._later = reason
            return False
        self._later = None
        frame = encode_msg(pb.RollbackRequest(container=self._container, restore_id=restore_id, reason=reason))
        self._asked = (restore_id, frame)
        self._answered = False
        self._log.warning("effectively once: %s; asking the master to roll back the run of restore %d (no "
                          "checkpoint marker passes until it answers)", reason, restore_id)
        self._to_master(frame)
        return True

    def unanswered(self) -> list[bytes]:
        """The request to send again (with every heartbeat to the master, and after registering
        with a new one) until the master answers it or a newer restore comes."""
        if self._asked is None or self._answered:
            return []
        return [self._asked[1]]

    def on_answer(self, msg: pb.RollbackAnswer) -> None:
        if self._asked is None or msg.restore_id != self._asked[0]:
            return  # an answer to an older request, which a restore already answered
        if msg.acted:
            # the restore follows: markers stay stopped until it comes
            self._answered = True
            self._log.info("the master rolls back the run of restore %d (%s)", msg.restore_id, msg.reason)
            return
        self._log.info("the master answered our rollback request for restore %d as moot (%s); markers dropped "
                       "meanwhile: %d", msg.restore_id, msg.reason, self.markers_dropped)
        restore_id = self._asked[0]
        self._asked = None
        self.markers_dropped = 0
        later, self._later = self._later, None
        if later is not None:  # the master's state may have moved on since it judged the first
            self.loss(restore_id, later)

    def on_restore(self, restore_id: int) -> None:
        """A newer restore answers every request: the run they were about is gone."""
        if self._asked is not None:
            self._log.info("restore %d replaces the run whose loss we reported (markers dropped meanwhile: %d)",
                           restore_id, self.markers_dropped)
        self._asked = None
        self._answered = False
        self._later = None
        self.markers_dropped = 0

    def admits_marker(self) -> bool:
        """Whether a checkpoint marker may pass: not while a loss we reported is unresolved."""
        if self._asked is None:
            return True
        self.markers_dropped += 1
        return False
