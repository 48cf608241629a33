"""What runs a user component, shared by the instance process, the in-process test runner
and the PySpark batch runner: the emitter (routing and batching), the spout's reliability
bookkeeping and the component host, and a received tuple's ids (the XOR ack tracker the stream
manager and the test harness share is heron_py.acking's). No sockets, no threads."""
