"""The checkpoint storage a topology's config asks for: files (``LocalFsStorage``) or Redis
(``RedisCheckpointStorage``), from ``heron_py.checkpoint.storage`` or Storm's
``topology.state.provider`` (``heron_py.common.config.checkpoint_storage_settings`` maps them).

Every daemon that reads or writes checkpoints (the master's driver, each stateful task) opens
its storage here, so they all agree on where the checkpoints are.
"""

from __future__ import annotations

from pathlib import Path

from heron_py.checkpoint.storage import CheckpointStorage, LocalFsStorage, checkpoint_root
from heron_py.common.config import StatefulConfig, redact_redis_url


def open_checkpoint_storage(cfg: StatefulConfig, home: Path, *, secret: bytes | None = None,
                            root: Path | None = None) -> CheckpointStorage:
    """The storage of a topology whose stateful config is ``cfg`` (built once by the caller,
    ``StatefulConfig.from_config``); ``home`` the heron home, ``root`` a folder that overrides the
    configured one (the executor passes it to its instances), ``secret`` the topology's checkpoint
    key (values signed and checked). CheckpointError when the Redis storage is asked for without
    redis-py installed."""
    if cfg.storage == "redis":
        from heron_py.checkpoint.redis_storage import RedisCheckpointStorage  # imports redis-py: only when used

        return RedisCheckpointStorage(cfg.redis_url, secret=secret, timeout_s=cfg.redis_timeout_s)
    return LocalFsStorage(root or checkpoint_root(home, cfg.root), secret=secret)


def checkpoint_location(cfg: StatefulConfig, home: Path, root: Path | None = None) -> str:
    """Where the checkpoints are, for logs: the folder, or the Redis URL without its password."""
    if cfg.storage == "redis":
        return f"redis {redact_redis_url(cfg.redis_url)}"
    return str(root or checkpoint_root(home, cfg.root))
