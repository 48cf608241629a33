"""The one error type a user's topology mistake raises (plan checks, builder, packing)."""


class TopologyError(ValueError):
    """A topology that cannot run, with one message: what, where, expected, found.

    A ValueError because heronpy raised ValueError for the same mistakes (duplicate names, a
    spout without outputs, ...), so code written against heronpy that catches it still does.
    """
