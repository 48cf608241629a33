"""The checkpoint storage a topology's config asks for: files (``LocalFsStorage``) or Redis
(``RedisCheckpointStorage``), from ``heron_py.checkpoint.storage`` or Storm's
``topology.state.provider`` (``heron_py.common.config.checkpoint_storage_settings`` maps them).

Every daemon that reads or writes checkpoints (the master's driver, each stateful task, the
Kafka spout) opens its storage here, so they all agree on where the checkpoints are.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from heron_py.checkpoint.storage import CheckpointStorage, LocalFsStorage, checkpoint_root
from heron_py.common.config import StatefulConfig, redact_redis_url


def uses_redis(config: Mapping[str, Any]) -> bool:
    """True when the topology's checkpoints live in Redis (no local or shared folder is used)."""
    return StatefulConfig.from_config(config).storage == "redis"


def open_checkpoint_storage(config: Mapping[str, Any], home: Path, *, secret: bytes | None = None,
                            root: Path | None = None) -> CheckpointStorage:
    """The storage of a topology with ``config``; ``home`` the heron home, ``root`` a folder that
    overrides the configured one (the executor passes it to its instances), ``secret`` the
    topology's checkpoint key (values signed and checked). ConfigError on a bad config;
    CheckpointError when the Redis storage is asked for without redis-py installed."""
    cfg = StatefulConfig.from_config(config)
    if cfg.storage == "redis":
        from heron_py.checkpoint.redis_storage import RedisCheckpointStorage  # imports redis-py: only when used

        return RedisCheckpointStorage(cfg.redis_url, secret=secret, timeout_s=cfg.redis_timeout_s)
    return LocalFsStorage(root or checkpoint_root(home, cfg.root), secret=secret)


def checkpoint_location(config: Mapping[str, Any], home: Path, root: Path | None = None) -> str:
    """Where the checkpoints are, for logs: the folder, or the Redis URL without its password."""
    cfg = StatefulConfig.from_config(config)
    if cfg.storage == "redis":
        return f"redis {redact_redis_url(cfg.redis_url)}"
    return str(root or checkpoint_root(home, cfg.root))
