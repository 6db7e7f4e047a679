"""The old name of chat/sse_stream.py's ``ChatSSEStream``, kept only until the branches that
still import it (responses, messages) have landed; delete it then."""

from proxy.core.protocols.chat.sse_stream import ChatSSEStream as SSERewriter

__all__ = ["SSERewriter"]
