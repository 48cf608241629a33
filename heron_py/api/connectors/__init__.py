"""heronpy's Streamlet connectors (heronpy.connectors.* are aliases of these modules)."""
