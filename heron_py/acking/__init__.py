"""Storm's acker algorithm, pure: the XOR ack tracker (:mod:`heron_py.acking.tracker`) the
stream managers and the in-process test harness run, its root tables per spout task
(:mod:`heron_py.acking.roots`, compiled from its typed twin ``roots.pyx``) and the errors the
typed id modules share (:mod:`heron_py.acking.root_errors`: the root tables and the instance's
received tuples, ``heron_py.runtime.tracked``). No sockets, no threads."""
