"""auditkit's version, for every layer (``auditkit.__version__`` re-exports it)."""
from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("auditkit")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
