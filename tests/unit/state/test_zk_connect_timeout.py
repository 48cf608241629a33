"""The ZooKeeper connect timeout (how long a command or daemon waits to reach ZooKeeper): from
the command line, the environment or conf/statemgr.json, passed on to children when it is not
the default, and its error (one line)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from heron_py.scheduler.kube_render import state_args
from heron_py.state import StateManagerError
from heron_py.state import config as statecfg
from heron_py.state.config import DEFAULT_CONNECT_TIMEOUT_S, StateConfig


def _parse(*words: str) -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    statecfg.add_arguments(ap)
    return ap.parse_args(list(words))


def test_from_command_line_environment_and_file(tmp_path: Path) -> None:
    assert statecfg.resolve(_parse("--zk", "h:1"), {}, home=tmp_path).connect_timeout_s == DEFAULT_CONNECT_TIMEOUT_S
    assert statecfg.resolve(_parse("--zk", "h:1", "--zk-connect-timeout", "30"), {},
                            home=tmp_path).connect_timeout_s == 30.0
    env = {"HERON_PY_ZK": "h:1", "HERON_PY_ZK_CONNECT_TIMEOUT": "12.5"}
    assert statecfg.resolve(None, env, home=tmp_path).connect_timeout_s == 12.5
    # the command line beats the environment
    assert statecfg.resolve(_parse("--zk-connect-timeout", "2"), env, home=tmp_path).connect_timeout_s == 2.0
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "statemgr.json").write_text(json.dumps({"zk": "h:1", "connect_timeout_s": 20}))
    assert statecfg.resolve(None, {}, home=tmp_path).connect_timeout_s == 20.0


def test_travels_to_children_only_when_set(tmp_path: Path) -> None:
    default = StateConfig(kind="zookeeper", zk_hosts="h:1", zk_root="/r")
    assert "--zk-connect-timeout" not in default.to_args()
    slow = StateConfig(kind="zookeeper", zk_hosts="h:1", zk_root="/r", connect_timeout_s=30.0)
    assert slow.to_args() == ["--state-manager", "zookeeper", "--zk", "h:1/r", "--zk-session-timeout", "5",
                              "--zk-connect-timeout", "30"]
    assert statecfg.resolve(_parse(*slow.to_args()), {}, home=tmp_path) == slow
    # a pod's executor gets it too
    assert state_args(slow)[6:8] == ["--zk-connect-timeout", "30"]
    assert "--zk-connect-timeout" not in state_args(default)


@pytest.mark.parametrize(("args", "env", "error"), [
    (["--zk-connect-timeout", "0"], {}, "--zk-connect-timeout: expected a number of seconds > 0, found '0'"),
    ([], {"HERON_PY_ZK_CONNECT_TIMEOUT": "soon"},
     "$HERON_PY_ZK_CONNECT_TIMEOUT: expected a number of seconds > 0, found 'soon'"),
])
def test_errors(tmp_path: Path, args: list[str], env: dict[str, str], error: str) -> None:
    with pytest.raises(StateManagerError) as e:
        statecfg.resolve(_parse("--zk", "h:1", *args), env, home=tmp_path)
    assert str(e.value) == error
