"""The I/O-free core: bytes and events in, events and bytes out.

No module here touches the network, the clock or randomness;
tests/project/test_architecture.py checks every file under this folder.
"""
