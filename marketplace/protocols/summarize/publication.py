"""What the `summarize` curator's result may tell the other parties: why it excluded an owner, without
the private figures it decided on.

The curator excludes (``flagged``) an owner whose point does not match its bid, or that sends a point
twice. It compared figures to decide (the point's bid value, the claimed bid and the tolerance: exact
functions of the owner's data, not DP releases; or the serials of the two points), and those stay in
its own log: the curator was sent them. Its reason is worded in public form at the source
(:data:`BID_MISMATCH`, :data:`SOLD_TWICE`), so neither the ``error`` the refused owner receives nor
``flagged`` carries a figure; the mapping below is a second line of defence, for a reason worded
elsewhere (an older curator named the figures: they are taken out). What leaves the curator is one of
the reasons below, each a fixed text or a pattern of public figures only (a round number, a
message's shape or size, a public bound); any other reason leaves as :data:`WITHHELD`. A new reason is
therefore private until it is listed here.
"""

from __future__ import annotations

import re
from typing import Any

BID_MISMATCH = "round {round}: the point's bid value does not match the claimed bid"
"""Why the curator refused a point whose bid value, recomputed from the point, is not the claimed bid."""

SOLD_TWICE = "sent the same point again; a point is sold once"
"""Why the curator refused a point the owner had sent before (same features and label)."""

PUBLIC_REASONS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(
            r"(round \d+: )(?:point's bid value \S+|the point's bid value) does not match the claimed bid"
            r"(?: \S+(?: \(allowed: \S+\))?)?"
        ),
        r"\1the point's bid value does not match the claimed bid",
    ),
    (
        re.compile(
            r"sent the same point again(?: \(first as (?:row|serial) \d+, now as (?:row|serial) \d+\))?; "
            r"a point is sold once"
        ),
        "sent the same point again; a point is sold once",
    ),
    (re.compile(r"round \d+: sent a point that could not be read"), r"\g<0>"),
    (re.compile(r"sent a (?:raw point to a less-trusted|sealed point to a trusted) curator"), r"\g<0>"),
    (re.compile(r"point has shape \[[\d, ]*\], expected \[\d+\]"), r"\g<0>"),
    (re.compile(r"sealed point has \d+ bytes, expected \d+"), r"\g<0>"),
    (re.compile(r"expected h1 embeddings of width \d+, got shape \[[\d, ]*\]"), r"\g<0>"),
    (re.compile(r"the embedding has a non-finite value"), r"\g<0>"),
    (re.compile(r"an embedding coordinate exceeds sqrt\(2/d\) = \S+ \(not an h1 embedding\)"), r"\g<0>"),
    (re.compile(r"sent a sealed point without its content key and commitment"), r"\g<0>"),
    (re.compile(r"named its points under two different secrets \(a point could be sold twice\)"), r"\g<0>"),
)
"""(pattern, what leaves) for every reason the curator gives that may leave it: a reason the pattern
matches whole leaves as the template expands it."""

WITHHELD = "its point could not be accepted (the curator's own log says why)"
"""What leaves the curator for a reason no pattern of :data:`PUBLIC_REASONS` matches."""


def public_reason(reason: str) -> str:
    """``reason`` as it may leave the curator: the public form of the first pattern that matches it
    whole, else :data:`WITHHELD`. A public form is its own public form."""
    for pattern, template in PUBLIC_REASONS:
        match = pattern.fullmatch(reason)
        if match:
            return match.expand(template)
    return WITHHELD


def curator_published(result: dict[str, Any]) -> dict[str, Any]:
    """The curator's ``result()`` as it may leave the curator in a deployment: every ``flagged`` reason
    in its public form (:func:`public_reason`); the rest as it is."""
    flagged = result.get("flagged")
    if not isinstance(flagged, dict):
        return result
    return result | {"flagged": {owner: public_reason(str(reason)) for owner, reason in flagged.items()}}
