"""Alias of heron_py.api.task_hook."""

from heron_py.api.task_hook import (
    BoltAckInfo,
    BoltExecuteInfo,
    BoltFailInfo,
    EmitInfo,
    ITaskHook,
    SpoutAckInfo,
    SpoutFailInfo,
)

__all__ = ["BoltAckInfo", "BoltExecuteInfo", "BoltFailInfo", "EmitInfo", "ITaskHook", "SpoutAckInfo",
           "SpoutFailInfo"]
