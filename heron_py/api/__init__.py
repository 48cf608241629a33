"""heron-py's topology API: heronpy's names and signatures (see also the ``heronpy`` aliases)."""
