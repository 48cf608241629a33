"""heron-py's compatibility alias for Heron's Python API: ``heronpy.api.X`` is
``heron_py.api.X`` (the same objects, re-exported), so topology files written for heronpy
run unchanged. Do not install Apache Heron's heronpy beside heron-py."""
