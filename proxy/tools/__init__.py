"""Operator tools behind ``toolcall-proxy COMMAND``; proxy.cli lists them in COMMANDS."""
