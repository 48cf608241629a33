"""A daemon's network links that follow the state store: the link to the active topology
master (:mod:`heron_py.links.tmlink`), which watches its location in the store and connects."""
