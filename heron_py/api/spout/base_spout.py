from heron_py.api.spout.spout import Spout as BaseSpout

__all__ = ["BaseSpout"]
