from heron_py.api.bolt.bolt import Bolt as BaseBolt

__all__ = ["BaseBolt"]
