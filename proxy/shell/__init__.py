"""The aiohttp shell: app, handlers, the pump, middlewares, upstream calls, observability.

It moves bytes and decides nothing about tool calls.
"""
