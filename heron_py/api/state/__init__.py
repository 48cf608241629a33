"""heronpy's state API (``heronpy.api.state``): the state a stateful component keeps."""
