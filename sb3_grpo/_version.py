"""The installed version of sb3_grpo (``sb3_grpo.__version__``), importable from every layer."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("sb3-grpo")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"
