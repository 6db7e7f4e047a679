"""What one response's body did on its way through the pump: bytes, writes, and the proxy's time.

The pump updates a StreamMeter on every upstream read, so everything here is plain
attribute arithmetic; turning it into metrics and a log line happens once, when the request
ends (:mod:`proxy.shell.accesslog`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from time import perf_counter


@dataclass(slots=True)
class StreamMeter:
    bytes_in: int = 0  # body bytes read from the upstream
    bytes_out: int = 0  # body bytes written to the client
    writes: int = 0  # body writes to the client ("chunks forwarded")
    upstream_headers_at: float | None = None  # perf_counter() when the upstream's headers came
    client_headers_at: float | None = None  # ... when the client's response headers went out
    first_in_at: float | None = None  # ... when the first upstream body bytes came
    first_out_at: float | None = None  # ... when the first body bytes were handed to the client
    # Seconds the core (decoder and normalizer) took for each upstream read of a rewritten stream;
    # turned into histogram observations once, at the end, off the streaming path.
    processing: list[float] = field(default_factory=list)

    def relayed(self, data: bytes) -> None:
        """``data`` passes through untouched: received and sent in one step."""
        if self.first_in_at is None:
            self.first_in_at = self.first_out_at = perf_counter()
        self.bytes_in += len(data)
        self.bytes_out += len(data)
        self.writes += 1

    def received(self, data: bytes) -> None:
        if self.first_in_at is None:
            self.first_in_at = perf_counter()
        self.bytes_in += len(data)

    def sending(self, data: bytes) -> None:
        """Count ``data`` just before it is written: what comes after is the client's pace."""
        if self.first_out_at is None:
            self.first_out_at = perf_counter()
        self.bytes_out += len(data)
        self.writes += 1

    def headers_added(self) -> float | None:
        if self.upstream_headers_at is None or self.client_headers_at is None:
            return None
        return self.client_headers_at - self.upstream_headers_at

    def first_byte_added(self) -> float | None:
        if self.first_in_at is None or self.first_out_at is None:
            return None
        return self.first_out_at - self.first_in_at
