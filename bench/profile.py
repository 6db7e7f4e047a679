"""Profiles of a target under load: py-spy samples, summed by function.

The runner records with ``py-spy record --format raw`` (collapsed stacks, one line per
distinct stack with its sample count) while a load runs; ``python -m bench.profile FILE``
prints where the samples fall: by the frame that was running ("own"), and by every frame on
the stack ("inclusive"). Frames are named ``function (file:line)``.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

_DIR = re.compile(r" \((?:.*/)?([^/]*)\)$")


def py_spy() -> str | None:
    return shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))


def record(pid: int, seconds: float, out: Path) -> subprocess.Popen[bytes] | None:
    """Start sampling ``pid`` for ``seconds`` without pausing it; None if py-spy is missing."""
    binary = py_spy()
    if binary is None:
        return None
    argv = [binary, "record", "--pid", str(pid), "--duration", str(max(1, int(seconds)))]
    argv += ["--format", "raw", "--rate", "250", "--nonblocking", "--output", str(out)]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def summarize(path: Path, top: int = 20) -> str:
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        n = int(count)
        total += n
        frames = [_DIR.sub(r" (\1)", f) for f in stack.split(";")]
        own[frames[-1]] += n
        inclusive.update(dict.fromkeys(frames, n))
    if not total:
        return f"{path}: no samples"
    lines = [f"{path.name}: {total} samples", "own:"]
    lines += [f"  {n / total:6.1%}  {frame}" for frame, n in own.most_common(top)]
    lines.append("inclusive:")
    lines += [f"  {n / total:6.1%}  {frame}" for frame, n in inclusive.most_common(top)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args()
    for path in args.files:
        print(summarize(path, args.top), end="\n\n")


if __name__ == "__main__":
    main()
