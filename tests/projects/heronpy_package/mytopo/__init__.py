"""A heronpy topology laid out as a package, as a pex's entry point is: ``python -m mytopo``
builds and submits it. tests/integration/test_project_shapes.py submits the folder."""
