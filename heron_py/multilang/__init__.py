"""Storm's multilang protocol: the engine's side of a shell spout or bolt.

    messages   the message kinds both ways, validated (pure)
    codec      JSON ("...\\nend\\n") and msgpack framing, incremental decoders (pure)
    session    the conversation's state machine: handshake, heartbeats, pending inputs (pure)
    setup      the handshake's conf and context, the subprocess's working directory
    process    the subprocess itself: pipes, reader/writer/stderr threads, kill
    scripts    heron-py's own storm.py / storm.js (adapters/) made available to the subprocess

heron_py.api.shell builds ShellBolt and ShellSpout from these.
"""

from heron_py.multilang.errors import ProtocolError, ShellError

__all__ = ["ProtocolError", "ShellError"]
