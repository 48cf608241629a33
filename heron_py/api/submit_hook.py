"""Where ``build_and_submit()`` hands a built topology (heron_py.common.submit_hook; the CLI,
the package loader and the runners set the handler)."""

from heron_py.common.submit_hook import Handler, set_submit_handler, submit

__all__ = ["Handler", "set_submit_handler", "submit"]
