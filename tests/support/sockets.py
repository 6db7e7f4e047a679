"""What the kernel holds for this process's loopback TCP connections (Linux /proc/net/tcp).

Tests use it to tell bytes in socket buffers from bytes held by the proxy, and to count the
connections left open to an upstream.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

ESTABLISHED = 0x01


@dataclass(frozen=True, slots=True)
class TcpSocket:
    local_port: int
    remote_port: int
    state: int
    tx_queue: int  # bytes written by the application, not yet acknowledged by the peer
    rx_queue: int  # bytes received, not yet read by the application


def tcp_sockets() -> list[TcpSocket]:
    sockets = []
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote, state, queues = fields[1], fields[2], fields[3], fields[4]
        tx, rx = queues.split(":")
        sockets.append(
            TcpSocket(
                local_port=int(local.split(":")[1], 16),
                remote_port=int(remote.split(":")[1], 16),
                state=int(state, 16),
                tx_queue=int(tx, 16),
                rx_queue=int(rx, 16),
            )
        )
    return sockets


def queued_bytes(*connections: tuple[int, int]) -> int:
    """Bytes queued in both directions' buffers of the given (port, port) connections."""
    wanted = {pair for a, b in connections for pair in ((a, b), (b, a))}
    return sum(
        s.tx_queue + s.rx_queue for s in tcp_sockets() if (s.local_port, s.remote_port) in wanted
    )


def open_connections_to(port: int) -> int:
    return sum(1 for s in tcp_sockets() if s.remote_port == port and s.state == ESTABLISHED)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port
