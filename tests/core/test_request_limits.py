"""proxy/core/request_limits.py: the depth and tool-count bounds on a request body, exact at
their edges (issue 26 items 3 and 4)."""

from __future__ import annotations

import orjson
import pytest

from proxy.core.errors import ClientRequestError
from proxy.core.request_limits import MAX_JSON_DEPTH, ORJSON_DEPTH, check_depth, check_tools


def nested(levels: int) -> object:
    value: object = "leaf"
    for level in range(levels):
        value = [value, 1] if level % 2 else {"k": value, "other": "x"}
    return value


def test_orjson_writes_what_the_proxy_lets_through_and_no_more() -> None:
    # found at import; a change of orjson's own limit shows here, not as a 500
    assert 200 <= ORJSON_DEPTH < 1024
    orjson.dumps(nested(ORJSON_DEPTH))
    with pytest.raises(orjson.JSONEncodeError):
        orjson.dumps(nested(ORJSON_DEPTH + 1))
    assert MAX_JSON_DEPTH < ORJSON_DEPTH


@pytest.mark.parametrize("limit", [1, 2, 5, 64, 128, MAX_JSON_DEPTH])
def test_a_body_exactly_at_the_depth_limit_passes_and_one_level_more_does_not(limit: int) -> None:
    check_depth(nested(limit), limit)
    with pytest.raises(ClientRequestError, match=f"more than {limit} levels"):
        check_depth(nested(limit + 1), limit)


def test_scalars_and_empty_containers_count_as_what_they_are() -> None:
    check_depth("x", 1)
    check_depth({}, 1)
    check_depth({"a": [], "b": {}}, 2)
    with pytest.raises(ClientRequestError):
        check_depth({"a": [[]]}, 2)


def tools(count: int) -> list[object]:
    return [{"type": "function", "name": f"f{n}"} for n in range(count)]


def test_tools_up_to_the_limit_pass_and_one_more_is_refused() -> None:
    check_tools({"tools": tools(5)}, 5)
    with pytest.raises(ClientRequestError, match=r"more than 5 tools \(limits.max_tools\)"):
        check_tools({"tools": tools(6)}, 5)


def test_each_function_of_a_namespace_counts_as_a_tool() -> None:
    body = {"tools": [*tools(2), {"type": "namespace", "name": "ns", "tools": tools(3)}]}
    check_tools(body, 5)
    with pytest.raises(ClientRequestError):
        check_tools(body, 4)


def test_tools_that_are_not_a_list_are_left_to_the_protocol() -> None:
    for given in (None, "x", {"a": 1}, 3):
        check_tools({"tools": given}, 1)
    check_tools({"tools": [1, "x", {"tools": "no"}]}, 3)
