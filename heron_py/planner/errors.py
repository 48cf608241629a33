class TopologyError(Exception):
    """A topology a user built is not valid; the message says what, where, expected, found."""
