"""The price of a release's privacy loss: what an owner earns for what its ledger charged.

An owner posts a price per unit of privacy loss, ``price_per_eps`` (its :class:`~.terms.SaleTerms`),
stated under its ledger's neighbouring relation: the ledger first restates a release's declared cost
under that relation, then its filter charges it, and :func:`price` turns that charge into money::

    basic filter: price = price_per_eps * eps              (the charged eps; delta is not priced)
    zcdp filter:  price = price_per_eps * sqrt(2 * rho)    (the eps of a pure-DP release of that rho)

Under ``zcdp`` a pure eps-DP release is charged rho = eps^2 / 2 (Bun and Steinke 2016, Prop. 1.4), so
it is priced ``price_per_eps * eps`` under either filter.

The price is arbitrage-free in the sense of Li, Li, Miklau and Suciu, *A Theory of Pricing Private
Data* (ICDT 2013): a consumer can never buy, more cheaply, a set of releases that together cost the
owner as much privacy as one release. With ``c1 (+) c2`` the ledger's own composition of two charges
(sum of eps and of delta under ``basic``, sum of rho under ``zcdp``):

* it is non-negative, and 0 for no loss;
* it is monotone: a charge that is larger in the composed figure is never cheaper;
* it is subadditive: ``price(c1 (+) c2) <= price(c1) + price(c2)``. Under ``basic`` it is linear in
  eps, so additive (equality); under ``zcdp``, sqrt is subadditive, so buying two releases never
  costs less than the one release their composition amounts to.

Pure: no file, no clock. The ledger calls :func:`price` in the transaction that charges the release
(:meth:`~.ledger.LifetimeLedger.reserve`), so the charge, the price and the sale are one record.

>>> price(Charge(0.5, 0.0, None), 4.0)
2.0
>>> price(Charge(None, None, 0.125), 4.0)  # rho = 0.5^2 / 2: the zCDP charge of eps=0.5
2.0
>>> price(compose(Charge(0.2, 0.0, None), Charge(0.3, 1e-6, None)), 4.0)
2.0
"""

from __future__ import annotations

import math

from marketplace.privacy.lifetime.cost import Charge, fail, non_negative

UNIT = "eps"
"""What ``price_per_eps`` is per: one unit of eps of privacy loss under the owner's ledger's relation."""


def eps_of(charge: Charge) -> float:
    """The privacy loss a price is per unit of: the charged eps under ``basic``, and under ``zcdp``
    sqrt(2 rho), the eps of a pure-DP release charged that rho."""
    if charge.eps is not None:
        return non_negative(charge.eps, "charge.eps", "eps_of")
    if charge.rho is not None:
        return math.sqrt(2 * non_negative(charge.rho, "charge.rho", "eps_of"))
    raise fail("charge", "eps_of", "a charge with eps (basic filter) or rho (zcdp filter)", charge)


def price(charge: Charge, price_per_eps: float) -> float:
    """What a release charged ``charge`` on an owner's ledger costs at ``price_per_eps`` (module
    docstring): ``price_per_eps * eps_of(charge)``; 0 for no loss or no price."""
    per = non_negative(price_per_eps, "price_per_eps", "price")
    loss = eps_of(charge)
    return 0.0 if per == 0 or loss == 0 else per * loss


def compose(first: Charge, second: Charge) -> Charge:
    """Two charges of one ledger composed as its filter composes them: eps and delta summed
    (``basic``), rho summed (``zcdp``). For the arbitrage-freeness checks."""
    if first.eps is not None and second.eps is not None:
        return Charge(math.fsum((first.eps, second.eps)), math.fsum((first.delta or 0.0, second.delta or 0.0)), None)
    if first.rho is not None and second.rho is not None:
        return Charge(None, None, math.fsum((first.rho, second.rho)))
    raise fail("second", "compose", f"a charge of the same filter as {first!r}", second)
