"""What an upstream's settings change in the request body it is sent, for every protocol.

* ``model_map``: the client's model name (or a glob matching it) -> the name the upstream
  knows (Codex and Claude Code send their own names, which a local server rejects). Routing
  has already matched the client's name; answers in the Responses and Messages protocols echo
  it (their encoders keep the client's name).
* ``max_tokens_limit``: a cap on ``max_tokens``, ``max_completion_tokens`` and
  ``max_output_tokens`` (Claude Code asks 64,000, more than many servers' context), in every
  form a server may read as a number: ``99999``, ``99999.0``, ``1e9`` and the string
  ``"99999"`` (vLLM takes the last two) all become the limit. A value that is no number
  (``true``, ``"many"``, a list) is a 400: passed on, it could be read as one past the cap.

Pure: a body in, the changed fields out; the shell re-encodes the body only when one changed.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from proxy.core.errors import ClientRequestError, shown

TOKEN_LIMIT_KEYS: Final = ("max_tokens", "max_completion_tokens", "max_output_tokens")


@dataclass(frozen=True, slots=True)
class Forwarding:
    model_map: Mapping[str, str] = field(default_factory=dict)
    max_tokens_limit: int | None = None

    @property
    def active(self) -> bool:
        """Whether this upstream changes request bodies at all."""
        return bool(self.model_map) or self.max_tokens_limit is not None

    def upstream_model(self, model: str) -> str | None:
        """The mapped name: an exact key first, else the first glob that matches."""
        exact = self.model_map.get(model)
        if exact is not None:
            return exact
        for pattern, target in self.model_map.items():
            if fnmatch.fnmatchcase(model, pattern):
                return target
        return None

    def apply(self, body: dict[str, Any]) -> list[str]:
        """Rewrite ``body`` in place; the names of the fields changed."""
        changed: list[str] = []
        model = body.get("model")
        if isinstance(model, str) and self.model_map:
            target = self.upstream_model(model)
            if target is not None and target != model:
                body["model"] = target
                changed.append("model")
        limit = self.max_tokens_limit
        if limit is not None:
            for key in TOKEN_LIMIT_KEYS:
                value = body.get(key)
                if value is not None and _tokens(key, value) > limit:
                    body[key] = limit
                    changed.append(key)
        return changed


def _tokens(key: str, value: object) -> float:
    """The number of tokens ``value`` asks for, however it is written; a 400 for no number."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            pass
        else:
            if not math.isnan(number):
                return number
    raise ClientRequestError(f"{key}: must be a number, not {shown(value)}")
