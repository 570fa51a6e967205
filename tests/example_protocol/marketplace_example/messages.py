"""The message kinds of ``noisy_count``, named with the protocol's prefix ``count_``.

Flow: every party says ``hello``; once all are there the curator sends ``count_request`` to every
owner; each owner answers once with ``count_release`` (its noisy count and what it cost); the
curator sends the sum to the consumer in ``count_total``, then ends the run (``shutdown``/``bye``).
The codec checks every field against these declarations before a role sees the message.
"""

from __future__ import annotations

from typing import Annotated

from marketplace.messages.kinds import Body, PartyName
from marketplace.schema import Length, Range


class CountRequest(Body, kind="count_request", frozen=True):
    """The curator asks an owner for its noisy count of rows of class ``label``."""

    label: Annotated[int, Range(min=0)]


class CountRelease(Body, kind="count_release", frozen=True):
    """An owner's count plus Laplace noise, and the epsilon the release cost it."""

    value: float
    epsilon: Annotated[float, Range(min=0.0, min_open=True)]


class CountTotal(Body, kind="count_total", frozen=True):
    """The sum of the owners' noisy counts, and which owners it adds up."""

    total: float
    owners: Annotated[tuple[PartyName, ...], Length(max=4096)]


NoisyCountMessage = CountRequest | CountRelease | CountTotal
"""The protocol's kinds: a union of their Structs, told apart on the wire by the envelope's ``kind``;
roles take ``Envelope[NoisyCountMessage | RuntimeMessage]`` and ``match`` on the classes."""
