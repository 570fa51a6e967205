"""An owner's sale terms: the price of one data point, how many points it sells, and the price of its privacy.

A protocol that sells data points (summarize hands the consumer points of the owners' data) charges the
owner's lifetime ledger for the privacy of what it releases, and the owner may also bound what it sells:
its price per point, the points it sells over its whole life, and the points it sells to any one consumer
(by the consumer's name). Every release, whatever its protocol, also pays the owner ``price_per_eps`` per
unit of eps its ledger charged, under the ledger's neighbouring relation (:mod:`.pricing`).
:class:`SaleTerms` holds those four public settings; the ledger (:mod:`.sales`) keeps what each request
reserved, sold and earned under them. Pure: no file, no clock.

>>> SaleTerms(price=2, points=100, points_per_consumer=20).describe()
'price 2 per point, 100 points in its lifetime, 20 per consumer'
>>> SaleTerms.from_dict({"price": 0.5}).describe()
'price 0.5 per point, no lifetime limit on points, no limit per consumer'
>>> SaleTerms(price_per_eps=10).describe()
'price 0 per point, no lifetime limit on points, no limit per consumer, 10 per unit eps of privacy loss'
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from marketplace.privacy.lifetime.cost import fail, non_negative

KEYS = ("price", "points", "points_per_consumer", "price_per_eps")


def _count(value: Any, name: str, where: str) -> int | None:
    """None (no limit) or an integer >= 0 (bools refused), as an int."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise fail(name, where, "an integer >= 0, or None for no limit", value)
    return int(value)


@dataclass(frozen=True)
class SaleTerms:
    """``price`` per point sold (finite, >= 0), ``points`` sold over the owner's lifetime and
    ``points_per_consumer`` sold to any one consumer (integers >= 0; None: no limit), and
    ``price_per_eps``, the price of one unit of eps of privacy loss its ledger charges (finite, >= 0;
    :mod:`.pricing`)."""

    price: float = 0.0
    points: int | None = None
    points_per_consumer: int | None = None
    price_per_eps: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "price", non_negative(self.price, "price", "SaleTerms"))
        object.__setattr__(self, "points", _count(self.points, "points", "SaleTerms"))
        object.__setattr__(
            self, "points_per_consumer", _count(self.points_per_consumer, "points_per_consumer", "SaleTerms")
        )
        object.__setattr__(self, "price_per_eps", non_negative(self.price_per_eps, "price_per_eps", "SaleTerms"))

    def cap(self, points: int, counted: int = 0, counted_for_consumer: int = 0) -> int:
        """The most points a request asking for ``points`` may take under these terms, when ``counted``
        points already count against the lifetime limit and ``counted_for_consumer`` against this
        consumer's (it may be <= 0: nothing left)."""
        limits = [points]
        if self.points is not None:
            limits.append(self.points - counted)
        if self.points_per_consumer is not None:
            limits.append(self.points_per_consumer - counted_for_consumer)
        return min(limits)

    def describe(self) -> str:
        """``price 2 per point, 100 points in its lifetime, 20 per consumer`` (then the privacy price,
        when there is one)."""
        lifetime = "no lifetime limit on points" if self.points is None else f"{self.points} points in its lifetime"
        each = (
            "no limit per consumer" if self.points_per_consumer is None else f"{self.points_per_consumer} per consumer"
        )
        privacy = f", {self.price_per_eps:g} per unit eps of privacy loss" if self.price_per_eps else ""
        return f"price {self.price:g} per point, {lifetime}, {each}{privacy}"

    def to_dict(self) -> dict[str, Any]:
        """``{"price": .., "points": .., "points_per_consumer": .., "price_per_eps": ..}`` (JSON-ready; None
        for no limit)."""
        return {
            "price": self.price,
            "points": self.points,
            "points_per_consumer": self.points_per_consumer,
            "price_per_eps": self.price_per_eps,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> SaleTerms:
        """The terms ``d`` states (as :meth:`to_dict` writes them; a key left out takes its default, None
        gives the defaults). :class:`~.cost.LedgerInputError` naming the key for an unknown key or a bad value."""
        where = "SaleTerms.from_dict"
        if d is None:
            return cls()
        if not isinstance(d, Mapping):
            raise fail("terms", where, f"a mapping with the keys {list(KEYS)}", d)
        unknown = sorted(str(k) for k in d if k not in KEYS)
        if unknown:
            raise fail(unknown[0], where, f"one of the keys {list(KEYS)}", d[unknown[0]])
        return cls(
            price=non_negative(d.get("price", 0.0), "price", where),
            points=_count(d.get("points"), "points", where),
            points_per_consumer=_count(d.get("points_per_consumer"), "points_per_consumer", where),
            price_per_eps=non_negative(d.get("price_per_eps", 0.0), "price_per_eps", where),
        )
