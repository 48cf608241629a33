"""Heron 0.15's Python API by its source paths: ``heron.api.src.python.X`` is heronpy's
``heronpy.api.X`` (the same objects: heron_py.api's), so topology files written against Heron
0.15's layout (``from heron.api.src.python.bolt.bolt import Bolt``, ``import
heron.api.src.python.api_constants as constants``) run unchanged.

heronpy 0.15.0's wheel shipped these modules under a top-level ``heron`` package (its own
``heronpy`` re-exported them); Heron's source tree had them there until 0.15.1 moved them to
``heronpy/api``. This package also re-exports what its ``__init__`` did in the source tree
before 0.15.0 (``from heron.api.src.python import Bolt, Grouping, TopologyBuilder``), as do
its ``bolt``, ``spout``, ``component`` and ``state`` packages.

``heron``, ``heron.api`` and ``heron.api.src`` are namespace packages (no ``__init__.py``): a
Heron source tree on ``PYTHONPATH`` (``heron/examples/src/python``, as Heron's Bazel build laid
its examples out) joins them instead of being shadowed, and a project's own regular ``heron``
package wins over this one, as a project's own module always does.
"""

from heron.api.src.python.bolt import Bolt, SlidingWindowBolt, TumblingWindowBolt, WindowContext
from heron.api.src.python.spout import Spout
from heron.api.src.python.state import HashMapState, State, StatefulComponent
from heron.api.src.python.stream import Grouping, Stream
from heron.api.src.python.topology import Topology, TopologyBuilder
from heron.api.src.python.topology_context import TopologyContext

__all__ = ["Bolt", "Grouping", "HashMapState", "SlidingWindowBolt", "Spout", "State", "StatefulComponent", "Stream",
           "Topology", "TopologyBuilder", "TopologyContext", "TumblingWindowBolt", "WindowContext"]
