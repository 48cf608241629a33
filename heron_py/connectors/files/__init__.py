"""Files in: FileTailSpout (heronpy) and FileTailGenerator (Streamlet); files out: FileSink (a
bolt, exact under effectively once). See docs/connectors/files.md.
heronpy's TextFileGenerator (``heron_py.api.connectors.textfiles``) is unchanged beside them."""

from heron_py.connectors.files.reader import FolderReader, Line, LinePositions
from heron_py.connectors.files.sink import FileSink, file_sink_config
from heron_py.connectors.files.spout import FileTailSpout, file_spout_config
from heron_py.connectors.files.streamlet import FileTailGenerator

__all__ = ["FileSink", "FileTailGenerator", "FileTailSpout", "FolderReader", "Line", "LinePositions",
           "file_sink_config", "file_spout_config"]
