"""streamparse projects and pystorm components on heron-py.

- ``heron_py.storm.project``: a streamparse project's layout (config.json, topologies/, src/):
  its src/ goes on ``sys.path`` at submit so the topology file's imports work and the modules
  ship in the topology package.
- ``heron_py.storm.streamparse_dsl``: a streamparse ``Topology`` class (thrift specs) →
  heron-py's ``TopologyDef``, through ``heron_py.api.topology.TopologyBuilder``.
- ``heron_py.storm.native``: the in-process adapters. A pystorm Bolt/Spout runs inside the
  heron-py instance: its multilang-style messages (``send_message``) are handled in process,
  no subprocess and no JSON.

Per component, ``config={"heron_py.pystorm.mode": "subprocess"}`` on ``X.spec(...)`` (or in the
topology's ``config``, or ``--config-property heron_py.pystorm.mode=subprocess`` at submit,
for every component that sets none) runs it as streamparse does on Storm instead: a
``python -m streamparse.run module.Class`` multilang subprocess (heron_py.api.shell). Either
way a component runs in the package's working folder, the unpacked ``src/``, as on Storm.
"""

MODE_KEY = "heron_py.pystorm.mode"
MODE_NATIVE = "native"
MODE_SUBPROCESS = "subprocess"
# the pystorm class a native adapter runs, "module:qualname" (module "__main__": the topology file)
CLASS_KEY = "heron_py.pystorm.class"
# which of a spec's per-environment parallelisms (par={"prod": 8, "local": 1}) to use
ENV_VAR = "HERON_PY_STREAMPARSE_ENV"
