"""A Responses request's ``tools`` and ``tool_choice`` as a chat upstream can take them.

Function tools map across. A ``namespace`` of functions (Codex's ``multi_agent_v1``) is
flattened into chat functions named ``<namespace>__<function>``; a ``custom`` (freeform) tool
becomes a function with one string parameter ``input``. Both are remembered in the context so
the encoder can name the client's tool again. Hosted tools (``web_search``,
``image_generation``, ``file_search``, ...) run on OpenAI's side and cannot be served: they are
dropped, and each drop is named (``tools.<type>``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from proxy.core.errors import ClientRequestError, shown
from proxy.core.jsonvalues import JSONObject
from proxy.core.protocols.responses.context import NAMESPACE_SEPARATOR, ToolKind, ToolRef


@dataclass(slots=True)
class ChatTools:
    tools: list[JSONObject] = field(default_factory=list)
    refs: dict[str, ToolRef] = field(default_factory=dict)  # chat name -> client tool
    dropped: list[str] = field(default_factory=list)
    origins: dict[str, str] = field(default_factory=dict)  # chat name -> the client's tool
    collision: str | None = None  # the first two tools of one chat name, said as an error

    def chat_name(self, name: str, namespace: object = None) -> str:
        """The chat function name of the client's tool ``name`` (in ``namespace``)."""
        if isinstance(namespace, str) and namespace:
            return f"{namespace}{NAMESPACE_SEPARATOR}{name}"
        return name

    def claim(self, chat_name: str, origin: str) -> None:
        """Note where a chat name comes from, and the first time two of the client's tools
        take one (a function ``ns__fn`` beside ``fn`` in namespace ``ns``; a function and a
        custom tool of one name): translated, a call to it could not be told apart."""
        earlier = self.origins.get(chat_name)
        if earlier is None:
            self.origins[chat_name] = origin
        elif self.collision is None:
            self.collision = (
                f"tools: {earlier} and {origin} would both reach the upstream as"
                f" {shown(chat_name)}; rename one"
            )


def convert_tools(tools: object) -> ChatTools:
    out = ChatTools()
    if tools is None:
        return out
    if not isinstance(tools, list):
        raise ClientRequestError("'tools' must be an array")
    for position, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise ClientRequestError("each entry of 'tools' must be an object")
        kind = tool.get("type")
        where = f"tools[{position}]"
        if kind == "function":
            _add_function(out, tool, namespace=None, where=where)
        elif kind == "namespace":
            inner_tools = tool.get("tools")
            if inner_tools is not None and not isinstance(inner_tools, list):
                raise ClientRequestError(
                    f"a namespace's 'tools' must be an array (namespace {shown(_name(tool))})"
                )
            for index, inner in enumerate(inner_tools or ()):
                if isinstance(inner, dict) and inner.get("type", "function") == "function":
                    _add_function(
                        out, inner, namespace=_name(tool), where=f"{where}.tools[{index}]"
                    )
                else:
                    out.dropped.append(f"tools.namespace.{_type(inner)}")
        elif kind == "custom":
            _add_custom(out, tool, where=where)
        else:
            out.dropped.append(f"tools.{_type(tool)}")
    return out


def convert_tool_choice(choice: object, tools: ChatTools) -> tuple[object, str | None]:
    """The chat ``tool_choice`` (None: send none) and the name of what was dropped, if any."""
    if choice is None:
        return None, None
    if not tools.tools:
        # a chat upstream rejects a tool_choice without tools (every tool may have been hosted)
        return None, "tool_choice"
    if choice in ("auto", "none", "required"):
        return choice, None
    if isinstance(choice, dict):
        kind = choice.get("type")
        name = choice.get("name")
        if kind in ("function", "custom") and isinstance(name, str):
            chat_name = tools.chat_name(name, choice.get("namespace"))
            return {"type": "function", "function": {"name": chat_name}}, None
        if kind == "allowed_tools":
            mode = choice.get("mode")
            return (mode if mode in ("auto", "required") else "auto"), "tool_choice.allowed_tools"
        return None, f"tool_choice.{_type(choice)}"
    raise ClientRequestError("'tool_choice' must be a string or an object")


def _add_function(out: ChatTools, tool: JSONObject, *, namespace: str | None, where: str) -> None:
    name = _name(tool)
    chat_name = out.chat_name(name, namespace)
    of = f" of namespace {shown(namespace)}" if namespace is not None else ""
    out.claim(chat_name, f"function {shown(name)}{of} ({where})")
    function: JSONObject = {"name": chat_name}
    for key in ("description", "parameters", "strict"):
        if tool.get(key) is not None:
            function[key] = tool[key]
    function.setdefault("parameters", {"type": "object", "properties": {}})
    out.tools.append({"type": "function", "function": function})
    if namespace is not None:
        out.refs[chat_name] = ToolRef(ToolKind.FUNCTION, name, namespace)


def _add_custom(out: ChatTools, tool: JSONObject, *, where: str) -> None:
    name = _name(tool)
    out.claim(name, f"custom tool {shown(name)} ({where})")
    given = tool.get("description")
    description = given if isinstance(given, str) else ""
    grammar = tool.get("format")
    if isinstance(grammar, dict) and isinstance(grammar.get("definition"), str):
        syntax = grammar.get("syntax", "")
        description += f"\n\nThe input follows this {syntax} grammar:\n{grammar['definition']}"
    parameters = {
        "type": "object",
        "properties": {"input": {"type": "string", "description": "The tool's freeform input."}},
        "required": ["input"],
        "additionalProperties": False,
    }
    function = {"name": name, "description": description.strip(), "parameters": parameters}
    out.tools.append({"type": "function", "function": function})
    out.refs[name] = ToolRef(ToolKind.CUSTOM, name)


def _name(tool: JSONObject) -> str:
    name = tool.get("name")
    if not isinstance(name, str) or not name:
        raise ClientRequestError(f"a tool of type {shown(_type(tool))} has no name")
    return name


def _type(obj: object) -> str:
    kind = obj.get("type") if isinstance(obj, dict) else None
    return kind if isinstance(kind, str) and kind else "unknown"
