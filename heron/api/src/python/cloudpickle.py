"""Heron's vendored cloudpickle: here the cloudpickle package itself (the same module object)."""

import sys

import cloudpickle

sys.modules[__name__] = cloudpickle
