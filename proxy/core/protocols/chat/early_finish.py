"""A finish held until the choice is known to have ended (issue 24 item 1).

Kimi and GLM behind several hosts put ``finish_reason: "tool_calls"`` on every chunk that
carries a whole call, or send the finish twice with a call between; a client (and the
Responses and Messages translations) would see a call after the choice finished. So a chunk
that carries the finish ``tool_calls`` (the upstream's, or the proxy's for ``stop`` after
calls) does not go out at once: it waits, with everything behind it, in the
normalizer's queue (:class:`FinishHold`) until the choice's next event decides. A later call,
text or finish of the choice makes it early: the chunk goes out without its finish
(``finish-early``), and the last finish is the choice's one. The stream's end (``[DONE]``, a
clean or cut end, the cap) makes it the last: the chunk goes out as it came, so a canonical
stream stays byte for byte the same, one event later. Other finishes (``stop`` of a
choice without calls, ``length``) go out at once: no server is on record sending calls after
them.

What an early finish chunk carried beside the finish stays where it was: its usage goes out
in its own chunk (an empty delta when nothing else is left of the choice), not moved to the
end or added to a later usage (the upstream's figures are not the proxy's to merge); its
other delta fields and its envelope go out as they came. Only an empty delta that carried
nothing but the finish is left out (its chunk still goes when it carries usage).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from proxy.core.protocols.chat.deltas import FieldsDelta, KeptDelta
from proxy.core.protocols.chat.pieces import Piece
from proxy.core.protocols.chat.sent import Sent


@dataclass(eq=False, slots=True)
class FinishHold:
    """A chunk's output held for the finishes it carries: it goes out once ``waiting`` (its
    choices whose finish is not yet decided) is 0, and what follows waits behind it."""

    sent: list[Sent]
    waiting: int = 0


@dataclass(eq=False, slots=True)
class HeldFinish:
    """One choice's finish in a held chunk: ``pieces`` the choice's own pieces there,
    ``piece`` the one carrying the finish."""

    pieces: list[Piece]
    piece: Piece
    hold: FinishHold | None = None

    def settle(self, *, early: bool) -> None:
        """Decide it: ``early`` takes the finish off (and the piece, when it carried only
        the finish)."""
        if early:
            at = next(i for i, piece in enumerate(self.pieces) if piece is self.piece)
            if _empty(self.piece):
                del self.pieces[at]
            else:
                self.pieces[at] = replace(self.piece, finish=None)
        if self.hold is not None:
            self.hold.waiting -= 1


def _empty(piece: Piece) -> bool:
    delta = piece.delta
    if isinstance(delta, FieldsDelta):
        return not delta.fields
    return isinstance(delta, KeptDelta) and not piece.choice.get("delta")
