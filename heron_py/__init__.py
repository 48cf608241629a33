"""heron-py: a Heron-style stream processing engine that runs Storm and Heron topologies."""

import os as _os

if _os.environ.get("HERON_PY_PURE", "") == "1":
    # before any compiled hot-path module can be imported (heron_py.hotpath)
    from heron_py.hotpath import prefer_source as _prefer_source

    _prefer_source()
