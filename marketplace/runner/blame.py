"""A failed run's lines, the party at fault first.

When one party fails, others fail because of it: the curator ends the run as failed and every owner
repeats its verdict, a party that loses the curator says so. Listed in party order, the first line
could blame an owner for the consumer's silence. :func:`failure_lines` orders them by who is at
fault: a party's own failure first, then a failure another party reports about it (named first),
then the owners and consumer that only repeat the curator's verdict, in one line.
"""

from __future__ import annotations

import re
from collections import OrderedDict

from marketplace.roles import CONSUMER, CURATOR

ECHO = "the curator ended the run as failed: "
"""How a party that failed only because the curator said so begins its failure."""
_LOST_CONTACT = re.compile(r"lost contact with (\S+?)(?:$|[ ,;:(])")
_NAMES_CONSUMER = re.compile(r"\bthe consumer\b")


def at_fault(party: str, failure: str) -> str | None:
    """Who ``failure``, reported by ``party``, blames: the peer it lost contact with, the consumer
    when the curator's verdict is about the consumer, else ``party`` itself; None for a party that
    only repeats the curator's verdict."""
    if failure.startswith(ECHO):
        return None
    lost = _LOST_CONTACT.match(failure)
    if lost:
        return lost.group(1)
    if party == CURATOR and _NAMES_CONSUMER.search(failure):
        return CONSUMER
    return party


def failure_lines(failed: list[tuple[str, int | None, str]]) -> list[str]:
    """One line per failed party, from ``(party, exit status, failure)`` in party order: first the
    parties whose failure is their own ("consumer exited with status -9: ..."), then failures a party
    reports about another, which is named first ("consumer (according to curator, which exited with
    status 3): ..."), then the parties repeating the curator's verdict, grouped by verdict."""
    own, reported = [], []
    echoes: OrderedDict[tuple[int | None, str], list[str]] = OrderedDict()
    for party, status, failure in failed:
        culprit = at_fault(party, failure)
        if culprit is None:
            echoes.setdefault((status, failure), []).append(party)
        elif culprit == party:
            own.append(f"{party} exited with status {status}: {failure}")
        else:
            reported.append(f"{culprit} (according to {party}, which exited with status {status}): {failure}")
    repeated = [
        f"{', '.join(parties)} exited with status {status}: {failure}" for (status, failure), parties in echoes.items()
    ]
    return own + reported + repeated
