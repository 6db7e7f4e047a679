"""One tool call as the client sees it, apart from any protocol: who it is, where it stands in
the state table, and the argument text it keeps.

The protocol that decodes the upstream's calls extends this record with what only it knows
(chat: the chunk the call began in, the delta fields held for its opening, unknown entry
fields; protocols/chat/pieces.py); the driver (calls/driver.py) and the repeat checks
(calls/repeats.py) read and change nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from proxy.core.calls.argtext import ArgText
from proxy.core.calls.state import CallState


@dataclass(eq=False, slots=True)
class CallRecord:
    key: int | str | None  #: the upstream's own number for the call (None when it gave none)
    upstream_id: str | None
    from_markup: bool = False
    name: str | None = None
    state: CallState = CallState.NAMELESS
    #: the table's answer for ``state``: a fragment goes out as it came (calls/state.py,
    #: ``streams_args``); kept at each transition so that the hot paths need not look it up
    streams: bool = False
    id: str | None = None  #: the id the client sees, set when the opening is built
    index: int | None = None  #: the index the client sees, set when the opening is built
    args: ArgText = field(default_factory=ArgText)  #: argument text kept (held or for Q17)
    args_len: int = 0  #: all argument text accepted, including text no longer kept
    waited: bool = False  #: entries were held before the name came (Q14)
    placeholder_args: bool = False  #: S2: the collected text is only a "{}" placeholder
    whole: bool = False  #: S2: the collected text is complete (or the markup closed the call)
    #: a SUSPECT: the earlier calls it is dropped for repeating, if its arguments equal theirs
    rivals: tuple[CallRecord, ...] = ()
    checked: bool = False  #: its arguments were checked against its tool's schema (issue 25)
    fixed: bool = False  #: its arguments were healed or coerced: the text kept is the proxy's
    #: the model's multi-call wrapper, held to become one call per entry (calls/wrapper.py)
    wrapper: bool = False

    def text(self) -> str:
        return self.args.text()
