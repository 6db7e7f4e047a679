"""deploy/Dockerfile read as the image builds it: its logical instructions, the one that counts of each, the user it runs as."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]


DEPLOY = ROOT / "deploy"


def dockerfile_instructions() -> list[tuple[str, str]]:
    text = (DEPLOY / "Dockerfile").read_text()
    logical = re.sub(
        r"\\\n",
        " ",
        "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")),
    )
    return [
        (parts[0].upper(), parts[1].strip() if len(parts) > 1 else "")
        for line in logical.splitlines()
        if line.strip()
        for parts in [line.strip().split(None, 1)]
    ]


def instruction(name: str) -> str:
    """The value of the last ``name`` instruction: the one that counts in the final stage."""
    return [v for k, v in dockerfile_instructions() if k == name][-1]


def image_uid() -> int:
    return int(instruction("USER").split(":")[0])
