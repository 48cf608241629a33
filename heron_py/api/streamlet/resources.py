"""heronpy's Resources: CPU and RAM of one container."""

from __future__ import annotations

from typing import Any


class Resources:
    def __init__(self) -> None:
        self._cpu = 0.0
        self._ram = 0

    def set_cpu(self, cpu: Any) -> Resources:
        self._cpu = float(cpu)
        return self

    def set_ram(self, ram: Any) -> Resources:
        """RAM in bytes."""
        self._ram = int(ram)
        return self

    def set_ram_in_mb(self, ram: Any) -> Resources:
        return self.set_ram(ram * 1024 * 1024)

    def set_ram_in_gb(self, ram: Any) -> Resources:
        return self.set_ram_in_mb(ram * 1024)

    def get_cpu(self) -> float:
        return self._cpu

    def get_ram(self) -> int:
        return self._ram

    def __repr__(self) -> str:
        return f"Resource {{cpu: {self._cpu}, ram: {self._ram}}}"
