"""heronpy's vendored cloudpickle (``heronpy.api.cloudpickle``): here the cloudpickle package
itself, the same module object."""

import sys

import cloudpickle

sys.modules[__name__] = cloudpickle
