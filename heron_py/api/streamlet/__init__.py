"""heronpy's Python Streamlet API (heronpy.streamlet.* are aliases of these modules)."""
