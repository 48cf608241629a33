"""Like thriftpy2: the compiled module is imported lazily, by a computed name."""
import importlib


def speedup():
    return importlib.import_module(__name__ + "." + "_speedup")
