# Heron's source tree on PYTHONPATH: `heron` spans several folders, joined at import time
__path__ = __import__("pkgutil").extend_path(__path__, __name__)
