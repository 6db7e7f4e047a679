"""toolcall-proxy: repairs streamed tool calls from OpenAI-compatible servers."""

# The one place the version is written: pyproject.toml reads it from here (setuptools' dynamic
# version), the installed distribution's metadata carries it, and CHANGELOG.md names it.
__version__ = "0.1.0"
