"""toolcall-proxy: repairs streamed tool calls from OpenAI-compatible servers."""

__version__ = "0.1.0"
