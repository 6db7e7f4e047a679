"""The whole Message object, accumulated from the Messages events the encoder writes.

Non-streaming answers are the streaming events folded up, so both forms say the same thing.
A tool input is parsed once, when its block stops (the fragments are kept in a list so each
delta costs the same); input that is not a JSON object stays visible as ``{}`` and the
message's ``stop_reason`` says ``max_tokens`` (the cut the encoder saw). For a stream
(``whole=False``) only the tool inputs are kept, for that stop reason: no event repeats the
text. ``kept`` counts the characters kept.
"""

from __future__ import annotations

from typing import Any

import orjson

from proxy.core.jsonvalues import JSONObject


class MessageAccumulator:
    def __init__(self, *, whole: bool = True) -> None:
        self.message: JSONObject = {}
        self._pieces: dict[int, list[str]] = {}
        self._whole = whole  # the whole Message is asked for, not only the stop reason
        self.unparsed_input = False
        self.kept = 0

    def feed(self, event: JSONObject) -> None:
        kind = event["type"]
        if kind == "message_start":
            self.message = dict(event["message"])
            self.message["content"] = []
        elif kind == "content_block_start":
            self.message["content"].append(dict(event["content_block"]))
            self._pieces[event["index"]] = []
        elif kind == "content_block_delta":
            self._delta(event["index"], event["delta"])
        elif kind == "content_block_stop":
            self._stop(event["index"])
        elif kind == "message_delta":
            self.message.update(event["delta"])
            self.message["usage"] = {**self.message.get("usage", {}), **event["usage"]}

    def _delta(self, index: int, delta: JSONObject) -> None:
        block = self.message["content"][index]
        kind = delta["type"]
        if kind == "input_json_delta":
            self._keep(index, delta["partial_json"])
        elif not self._whole:
            return
        elif kind == "text_delta":
            self._keep(index, delta["text"])
        elif kind == "thinking_delta":
            self._keep(index, delta["thinking"])
        elif kind == "signature_delta":
            block["signature"] = block.get("signature", "") + delta["signature"]

    def _keep(self, index: int, text: str) -> None:
        self._pieces[index].append(text)
        self.kept += len(text)

    def _stop(self, index: int) -> None:
        block = self.message["content"][index]
        text = "".join(self._pieces.pop(index, []))
        if block["type"] == "tool_use":
            block["input"] = self._input(text)
        elif block["type"] == "text":
            block["text"] = block.get("text", "") + text
        elif block["type"] == "thinking":
            block["thinking"] = block.get("thinking", "") + text

    def _input(self, text: str) -> Any:
        if not text:
            return {}
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            value = None
        if isinstance(value, dict):
            return value
        self.unparsed_input = True
        return {}
