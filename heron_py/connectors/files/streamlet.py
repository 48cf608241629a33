"""The file source for the Streamlet API: ``Builder.new_source(FileTailGenerator(folder))``.

Each partition of the source reads the files it owns (as FileTailSpout's tasks do) and returns
one line at a time (without its newline), None when nothing new is written. The positions live
in the source's state, so in EFFECTIVELY_ONCE mode a restore reads again from the checkpoint's
positions (the Streamlet's GeneratorSpout saves the State object it handed to ``setup``)."""

from __future__ import annotations

import os
from collections import deque
from typing import Any

from heron_py.api.streamlet.context import Context
from heron_py.api.streamlet.generator import Generator
from heron_py.connectors.files.reader import FolderReader, Line, Position


class FileTailGenerator(Generator):
    def __init__(self, folder: str, pattern: str = "*", encoding: str = "utf-8", poll_s: float = 0.5,
                 with_position: bool = False) -> None:
        """``with_position``: each element is (file, line number, line) instead of the line."""
        self.folder, self.pattern, self.encoding = os.path.abspath(folder), pattern, encoding
        self.poll_s, self.with_position = poll_s, with_position

    def setup(self, context: Context) -> None:
        import time

        self._time = time.monotonic
        state = context.get_state()
        # the State object is saved at each checkpoint as it is: the positions dict is put once
        # and updated in place
        saved: dict[str, Position] | None = state.get("positions") if state is not None else None
        self._positions: dict[str, Position] = dict(saved or {})
        if state is not None:
            state.put("positions", self._positions)
        restored = dict(self._positions)
        self._reader = FolderReader(self.folder, self.pattern, context.get_partition_index(),
                                    context.get_num_partitions(), self.encoding,
                                    lambda m, lvl: self.logger.warning(m),
                                    f"file source task {context.get_task_id()}",
                                    lambda f: restored.get(f, (0, 0)))
        self._buffer: deque[Line] = deque()
        self._next_scan = 0.0

    def get(self) -> Any:
        if not self._buffer:
            now = self._time()
            if now >= self._next_scan:
                self._reader.scan()
                self._next_scan = now + self.poll_s
            self._buffer.extend(self._reader.read(100))
            if not self._buffer:
                return None
        line = self._buffer.popleft()
        self._positions[line.file] = (line.number + 1, line.end)  # what a checkpoint now covers
        return (line.file, line.number, line.text) if self.with_position else line.text
