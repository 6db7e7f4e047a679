"""What a process tree costs, read from /proc (Linux): CPU seconds and resident memory.

A target is measured as a tree because nginx does its work in a worker under its master and
LiteLLM may start workers of its own.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

_TICK: Final = os.sysconf("SC_CLK_TCK")
_PAGE: Final = os.sysconf("SC_PAGE_SIZE")
_PROC: Final = Path("/proc")


def _stat_fields(pid: int) -> list[str]:
    # The command name may hold spaces and parentheses; the fields after its last ")" do not.
    text = (_PROC / str(pid) / "stat").read_text()
    return text[text.rindex(")") + 2 :].split()


def tree(pid: int) -> list[int]:
    """The process and its descendants alive now."""
    children: dict[int, list[int]] = {}
    for entry in _PROC.iterdir():
        if entry.name.isdigit():
            try:
                ppid = int(_stat_fields(int(entry.name))[1])
            except (OSError, ValueError, IndexError):
                continue  # exited while we looked
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        todo += children.get(p, [])
    return found


def cpu_seconds(pids: list[int]) -> float:
    """User plus system time of the processes (all their threads), in seconds."""
    ticks = 0
    for pid in pids:
        try:
            f = _stat_fields(pid)
        except OSError:
            continue
        ticks += int(f[11]) + int(f[12])  # utime, stime: fields 14 and 15 of stat(5)
    return ticks / _TICK


def rss_bytes(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            total += int((_PROC / str(pid) / "statm").read_text().split()[1]) * _PAGE
        except OSError:
            continue
    return total
