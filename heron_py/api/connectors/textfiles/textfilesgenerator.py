"""heronpy's TextFileGenerator: emits every line of the files a glob pattern matches, the files
split between the source's partitions; then nothing (get() returns None)."""

from __future__ import annotations

import glob
from typing import Any

from heron_py.api.streamlet.context import Context
from heron_py.api.streamlet.generator import Generator


class TextFileGenerator(Generator):
    def __init__(self, filepattern: str) -> None:
        super().__init__()
        # expanded at build, as heronpy: every partition must see the same list to split it
        self._files = sorted(glob.glob(filepattern))
        self._files_to_consume: list[str] = []
        self._lines: list[str] = []

    def setup(self, context: Context) -> None:
        index, n = context.get_partition_index(), context.get_num_partitions()
        self._files_to_consume = self._files[index::n]
        self.logger.info("TextFileGenerator: partition %d of %d reads %s", index, n, self._files_to_consume)
        self._lines = []

    def get(self) -> Any:
        """The next line (with its newline, as heronpy), or None once every file is read."""
        while not self._lines:
            if not self._files_to_consume:
                return None
            path = self._files_to_consume.pop(0)
            self.logger.info("TextFileGenerator: reading %s", path)
            with open(path, encoding="utf-8") as f:
                # reversed: pop() from the end returns the lines in file order
                self._lines = f.readlines()[::-1]
        return self._lines.pop()
