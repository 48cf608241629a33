# a library with a compiled extension module, installed with pip install --target (tests)
from setuptools import Extension, setup

setup(name="fastcount", version="1.0", packages=["fastcount"],
      ext_modules=[Extension("fastcount._speedup", ["fastcount/_speedup.c"])])
