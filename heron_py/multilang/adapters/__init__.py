"""heron-py's own Storm multilang adapters, for shell components whose project has none.

    storm.py   the Python module ``storm``: Storm's storm.py API (Bolt, BasicBolt, Spout, emit, ...)
    storm.js   the Node.js module ``./storm``: Storm's storm.js API (BasicBolt, Spout, Tuple, ...)

A Storm jar brings these from Storm's own jars (storm-multilang-python / -javascript, through
flux-wrappers), so a Storm project's sources never hold them. Both are written for heron-py
and speak the multilang JSON protocol as heron_py.multilang's driver does. This folder is put
on a shell subprocess's PYTHONPATH (after its own entries, so a script's own ``storm.py``
beside it is found first) and ``storm.js`` is copied beside a Node.js script that requires it
when its folder has none (heron_py.multilang.scripts).
"""

from pathlib import Path

FOLDER = Path(__file__).resolve().parent
PYTHON_ADAPTER = FOLDER / "storm.py"
NODE_ADAPTER = FOLDER / "storm.js"
