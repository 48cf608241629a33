"""Storm's shell components: a spout or bolt whose logic runs in a subprocess (any language)
speaking Storm's multilang protocol over its stdin and stdout.

    split = ShellBolt.spec(["python3", "splitsentence.py"], outputs=["word"],
                           inputs={sentences: Grouping.SHUFFLE}, par=2, name="split")
    words = ShellSpout.spec("node randomsentence.js", outputs=["sentence"], name="spout")

The subprocess runs in the topology package's working folder, where Storm would run it: the
one its manifest names (the project's shape decided it at submit, heron_py.common.layout: a
Flux or Maven project's ``resources/``, a streamparse project's ``src/`` contents), else
``resources/`` if the package has one, else the package folder (config
``heron_py.shell.cwd`` overrides). Storm's adapters (storm.py,
storm.js, pystorm and streamparse components) run unchanged; a script that imports ``storm``
or requires ``./storm`` with no adapter of its own beside it gets heron-py's
(heron_py.multilang.scripts), as Storm's jars bring Storm's. ``serializer="msgpack"``
selects pystorm's msgpack framing. A subprocess that dies, breaks the protocol or stays
silent for ``topology.subprocess.timeout.secs`` ends the task with an error that holds its
stderr's last lines, and the task is restarted like any task whose code raised.

Subclasses may set ``command`` (and ``outputs``) as class attributes, as Storm's
``class MyBolt extends ShellBolt``, and register metrics in ``initialize`` after calling
the base class's: the subprocess's ``metrics`` commands update them by name.
"""

from __future__ import annotations

from typing import Any, ClassVar

from heron_py.api.bolt.bolt import Bolt
from heron_py.api.component.component_spec import HeronComponentSpec, merge_outputs
from heron_py.api.spout.spout import Spout
from heron_py.multilang import messages as m
from heron_py.multilang.driver import BoltDriver, SpoutDriver
from heron_py.multilang.errors import ShellError
from heron_py.multilang.setup import spec_config

TICK_KEY = "topology.tick.tuple.freq.secs"


def _outputs(cls: type, outputs: Any, optional_outputs: Any) -> list[Any]:
    extra: list[Any] = []
    for what, value in (("outputs", outputs), ("optional_outputs", optional_outputs)):
        if value is None:
            continue
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"{cls.__name__}.spec(): {what} must be a list of field names or Streams, "
                            f"found {type(value).__name__}")
        extra.extend(value)
    return merge_outputs(cls, extra)


class ShellBolt(Bolt):
    command: ClassVar[list[str] | str | None] = None
    # a Storm component: more values than its stream declares are counted and cut to its
    # fields, as Storm lets them pass (heron_py.runtime.emitter.StormArity)
    heron_storm_arity = True
    # the host calls heron_poll() this often: commands from the subprocess, heartbeats
    heron_poll_interval_s = 0.005

    @classmethod
    def spec(  # type: ignore[override]  # the command comes first, as Storm's ShellBolt(command)
            cls, command: list[str] | str | None = None, outputs: Any = None, inputs: Any = None, par: int = 1,
             config: dict[str, Any] | None = None, name: str | None = None, serializer: str = "json",
             optional_outputs: Any = None) -> HeronComponentSpec:
        """A shell bolt running ``command``; ``outputs`` as heronpy's (field names or Streams).
        ``optional_outputs`` lets TopologyBuilder.add_bolt(name, ShellBolt, ...) declare
        outputs, with the command in config ``heron_py.shell.command``."""
        conf = spec_config(command, serializer, config, f"{cls.__name__}.spec()", cls.command)
        return HeronComponentSpec(name, cls, False, par, inputs=inputs,
                                  outputs=_outputs(cls, outputs, optional_outputs), config=conf)

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self._driver: BoltDriver | None = None
        tick = config.get(TICK_KEY)
        self._tick_s = tick if isinstance(tick, (int, float)) and not isinstance(tick, bool) else None
        self._driver = BoltDriver(self, config, context)

    def _started(self) -> BoltDriver:
        if self._driver is None:
            raise ShellError(f"{type(self).__name__}: the subprocess was not started (initialize() failed)")
        return self._driver

    def process(self, tup: Any) -> None:
        values = list(tup.values) if tup.values is not None else []
        task = tup.task if tup.task is not None else m.SYSTEM_TASK
        self._started().send(tup, lambda i: m.BoltTuple(i, tup.component, tup.stream, task, values))

    def process_tick(self, tup: Any) -> None:
        self._started().send(tup, lambda i: m.tick(i, self._tick_s))

    def heron_poll(self) -> None:
        self._started().poll()

    def heron_busy(self) -> bool:
        """For runners that wait for the subprocess (heron_py.testing.runner)."""
        return self._started().busy()

    def cleanup(self) -> None:
        if getattr(self, "_driver", None) is not None:
            self._started().close()


class ShellSpout(Spout):
    command: ClassVar[list[str] | str | None] = None
    heron_storm_arity = True  # as ShellBolt's
    # between commands the host polls: a subprocess that exited is noticed while idle too
    heron_poll_interval_s = 0.1

    @classmethod
    def spec(  # type: ignore[override]
            cls, command: list[str] | str | None = None, outputs: Any = None, par: int = 1,
             config: dict[str, Any] | None = None, name: str | None = None, serializer: str = "json",
             optional_outputs: Any = None) -> HeronComponentSpec:
        """A shell spout running ``command``; ``outputs`` as heronpy's."""
        conf = spec_config(command, serializer, config, f"{cls.__name__}.spec()", cls.command)
        return HeronComponentSpec(name, cls, True, par, inputs=None,
                                  outputs=_outputs(cls, outputs, optional_outputs), config=conf)

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self._driver: SpoutDriver | None = None
        self._driver = SpoutDriver(self, config, context)

    def _started(self) -> SpoutDriver:
        if self._driver is None:
            raise ShellError(f"{type(self).__name__}: the subprocess was not started (initialize() failed)")
        return self._driver

    def next_tuple(self) -> None:
        self._started().call("next")

    def ack(self, tup_id: Any) -> None:
        self._started().call("ack", tup_id)

    def fail(self, tup_id: Any) -> None:
        self._started().call("fail", tup_id)

    def heron_poll(self) -> None:
        self._started().check_alive()

    def activate(self) -> None:
        self._started().call("activate")

    def deactivate(self) -> None:
        self._started().call("deactivate")

    def close(self) -> None:
        if getattr(self, "_driver", None) is not None:
            self._started().close()
