"""The health manager's decisions, pure: what a running topology's metrics say about its sizes.

Dhalion's loop (Floratou et al., VLDB'17: detect symptoms, diagnose, resolve) decides *whether*
to act; DS2's model (Kalavri et al., OSDI'18: true processing rates over useful time) decides
*how much*. Nothing here opens a socket, reads a file or a clock: the topology master feeds it
the metrics it already serves and the time, and carries out the actions it returns.

- ``config``: the ``heron_py.autoscale.*`` settings, parsed once into a frozen dataclass.
- ``observations``: one window of metrics per task, built from the master's metrics answers.
- ``sizing``: DS2's rates and the parallelism of each component, within the limits.
- ``diagnosis``: the detectors (symptoms) and diagnosers (diagnoses with their figures).
- ``policy``: the decision per interval, with its cooldown and blacklist.
"""
