"""The owner's side of `summarize`: compute its bid each round, send a point only when asked.

The owner embeds its data once with the public h1 map. Each round it offers the best of its
*unsent* points for the direction g~ - q/(q+1) g_l (docs/design.md §3), remembers which point that was,
and hands it over only if the curator asks for it in that round. A point once sent is never offered
again. An owner with sale terms tells the curator its price per point and how many points it sells in
this run (what its lifetime ledger reserved, or its terms' caps when it keeps no ledger) right after its
hello, and bids no more once it has sold that many. A point it sends is sold, at its price, unless the
curator refuses it: a refused point (the curator answers it with an ``error``) is not bought, so it is
neither counted as sold nor against the cap, and the owner's sale record equals the consumer's bill.
With a less-trusted curator the owner sends the point's h1 embedding and the point sealed for the
consumer (whose key came with g~) instead of the point, named by its content key under a secret of
the owner's for the run (:mod:`~marketplace.protocols.summarize.identity`), so that the curator tells
its points apart as the owner counts them: by features and label.

A point leaves the owner named by its **serial**, k for the k-th point the owner hands over in this
run (0, 1, 2, ...), never by its row: a row index bounds the owner's row count from below and moves
when an earlier row is removed, and no release declares it. The map serial -> row (``sent_rows``)
stays with the owner: its own report keeps it, and a simulation's report shows it as the
simulator's view, where the runner's evaluation may read it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from marketplace.data.dataset import Dataset
from marketplace.messages import Envelope, ProtocolError
from marketplace.messages.kinds import RuntimeMessage, Shutdown
from marketplace.protocols.summarize import RandomFourierFeatures, best_offer, bid_direction, bid_value
from marketplace.protocols.summarize.identity import (
    new_secret,
    sealed_point_key,
    secret_commitment,
)
from marketplace.protocols.summarize.messages import (
    Bid,
    Point,
    Request,
    RoundOpen,
    SealedPoint,
    SummarizeMessage,
    TargetEmbedding,
    Terms,
)
from marketplace.protocols.summarize.owner_cohort import Offer, OwnerCohort, Prepared, same_round
from marketplace.protocols.summarize.owner_rows import owner_rows
from marketplace.protocols.summarize.sealing import seal_point
from marketplace.roles import CURATOR, Role, Send

POINT_KINDS = frozenset({Point.KIND, SealedPoint.KIND})
"""The kinds an owner hands a point over in: an ``error`` about one says the curator refused it."""


class SummarizeOwner(Role):
    role_name = "owner"
    cohort = OwnerCohort

    def __init__(
        self,
        *,
        party_id: str,
        scenario_name: str,
        data: Dataset,
        features: RandomFourierFeatures,
        trust: str = "trusted",
        feature_dtype: str = "float64",
        price: float = 0.0,
        sale_cap: int | None = None,
    ) -> None:
        super().__init__()
        if feature_dtype not in ("float64", "float32"):
            raise ValueError(
                f"The 'feature_dtype' parameter of SummarizeOwner must be 'float64' or 'float32'. Got "
                f"{feature_dtype!r} instead."
            )
        self.features = features
        self.less_trusted = trust == "less_trusted"
        self.consumer_key: bytes | None = None
        self.point_secret = new_secret() if self.less_trusted else b""
        """The secret this owner's content keys are made with (less-trusted: sealed with each point)."""
        self.party_id = party_id
        self.scenario_name = scenario_name
        self.data = data
        self.phi, self.same_content = owner_rows(data, features, feature_dtype)  # once per process (read-only)
        """h1 of every row; and row -> group of identical rows, when the data hold duplicates: a point
        is offered once."""
        self.available = np.ones(len(data), dtype=bool)
        self.target_mean: np.ndarray | None = None
        self.offer: tuple[int, int, float] | None = None  # (round, row, value) of the current bid
        self.prepared: Prepared | None = None
        """This owner's choice for a round, prepared with the other owners of its process
        (:class:`~marketplace.protocols.summarize.owner_cohort.OwnerCohort`), used once: for that
        round's message only, and only if no point left since (its rows' availability is unchanged)."""
        self.sent_rows: list[int] = []
        """The row of each point handed over, by serial: the k-th point sent (sent as serial k) is row
        ``sent_rows[k]``. Private: it stays with the owner (``owner_publishes`` does not list it)."""
        self.refused: set[int] = set()
        """Positions in ``sent_rows`` of the points the curator refused (not bought)."""
        self.rounds_seen = 0
        self.end_status = ""
        self.price = price
        self.sale_cap = sale_cap
        """The most points this run may take (its terms without a ledger); a ledger's reservation wins."""
        self.reserved_points: int | None = None
        """The points its lifetime ledger reserved for this run under its terms (:meth:`reserved`), if any."""

    def start(self) -> list[Send]:
        sends = [self.hello("summarize")]
        cap = self.cap
        if self.price > 0 or cap is not None:
            sends.append(Send(CURATOR, Terms(price=self.price, points=cap)))
        return sends

    @property
    def cap(self) -> int | None:
        """How many points this owner sells in this run: what its lifetime ledger reserved under its
        terms (:meth:`reserved`), else its terms' cap, else None (no cap)."""
        return self.reserved_points if self.reserved_points is not None else self.sale_cap

    def reserved(self, points: int | None) -> None:
        """Keep the points the lifetime ledger reserved for this run: the most it sells (:attr:`cap`)."""
        self.reserved_points = points

    @property
    def points_sold(self) -> int:  # type: ignore[override]
        """The points sent that the curator took: the consumer pays for each (a refused one it does not)."""
        return len(self.sent_rows) - len(self.refused)

    def on_error(self, message: Envelope) -> list[Send]:
        """The curator refused our latest point (an ``error`` about a ``point`` or ``sealed_point``):
        it is not bought. The curator answers every point as it takes it in, and asks for the next
        only after, so an error about a point always concerns the latest one sent; a second error
        about the same point (the driver's and the curator's) changes nothing."""
        sends = super().on_error(message)
        if message.sender == CURATOR and message.body.about_kind in POINT_KINDS and self.sent_rows:
            self.refused.add(len(self.sent_rows) - 1)
        return sends

    def handle(self, message: Envelope[SummarizeMessage | RuntimeMessage]) -> list[Send]:
        kind = message.kind
        match message.body:
            case TargetEmbedding(mean=mean, consumer_key=key):
                if mean.shape != (self.phi.shape[1],):
                    raise ProtocolError(
                        party=message.sender,
                        kind=kind,
                        reason=f"expected {self.phi.shape[1]} features, got {list(mean.shape)}",
                    )
                if self.less_trusted and key is None:
                    raise ProtocolError(
                        party=message.sender,
                        kind=kind,
                        reason="a less-trusted run needs the consumer's key with g~ (consumer_key is missing)",
                    )
                self.target_mean = mean
                self.consumer_key = bytes(key) if key is not None else None
                return []
            case RoundOpen():
                return self._bid(message)
            case Request():
                return self._send_point(message)
            case Shutdown():
                return self.acknowledge_shutdown(message)
        raise ProtocolError(party=message.sender, kind=kind, reason="an owner does not accept this kind")

    def _bid(self, message: Envelope) -> list[Send]:
        body: RoundOpen = message.body
        if self.target_mean is None:
            raise ProtocolError(
                party=message.sender, kind="round_open", reason="round opened before the target embedding arrived"
            )
        if body.summary_mean.shape != self.target_mean.shape:
            raise ProtocolError(
                party=message.sender,
                kind="round_open",
                reason=(
                    f"summary mean has shape {list(body.summary_mean.shape)}, expected {list(self.target_mean.shape)}"
                ),
            )
        self.rounds_seen += 1
        prepared, self.prepared = self.prepared, None
        if prepared is not None and (not same_round(body, prepared.body) or prepared.sent != len(self.sent_rows)):
            prepared = None  # prepared for another message, or before a point left: computed here, alone
        if prepared is not None:
            direction = prepared.direction
        else:
            direction = bid_direction(self.target_mean, body.summary_mean, body.q)
        cap = self.cap
        best: Offer = None
        if cap is None or self.points_sold < cap:  # not sold out
            best = prepared.offer if prepared is not None else best_offer(self.phi, direction, self.available)
        if best is None:
            self.offer = None
            return [Send(message.sender, Bid(round=body.round, value=0.0, available=False), reply_to=message.msg_id)]
        row, value = best
        if self.phi.dtype != np.float64:  # bid exactly what the curator will recompute from the point
            value = bid_value(self._phi64(row), direction)
        self.offer = (body.round, row, value)
        return [
            Send(message.sender, Bid(round=body.round, value=float(value), available=True), reply_to=message.msg_id)
        ]

    def _send_point(self, message: Envelope) -> list[Send]:
        round_no = message.body.round
        if self.offer is None or self.offer[0] != round_no:
            raise ProtocolError(party=message.sender, kind="request", reason=f"no offer is open for round {round_no}")
        _, row, _ = self.offer
        self.offer = None
        self.available[row] = False
        if self.same_content is not None:  # the same record elsewhere in the data is the same point: sold once
            self.available[self.same_content == self.same_content[row]] = False
        serial = len(self.sent_rows)  # the k-th point handed over in this run: what the curator learns, not the row
        self.sent_rows.append(row)
        x, y = self.data.X[row], int(self.data.y[row])
        body: Point | SealedPoint
        if self.less_trusted:
            secret, consumer_key = self.point_secret, self.consumer_key
            if consumer_key is None:  # a less-trusted run's g~ comes with it (refused otherwise)
                raise RuntimeError("a less-trusted owner seals points only after the consumer's key arrived")
            body = SealedPoint(
                round=round_no,
                phi=self._phi64(row),
                row=serial,
                sealed=seal_point(x, y, consumer_key, secret=secret),
                key=sealed_point_key(secret, x, y),
                commitment=secret_commitment(secret),
            )
        else:
            body = Point(round=round_no, x=x, y=y, row=serial)
        return [Send(message.sender, body, reply_to=message.msg_id)]

    def _phi64(self, row: int) -> np.ndarray:
        """h1 of one row in float64, computed exactly as the curator and the consumer compute it."""
        return self.phi[row] if self.phi.dtype == np.float64 else self.features.transform(self.data.X[row][None, :])[0]

    def result(self) -> dict[str, Any]:
        return {
            "rows": len(self.data),
            "points_sent": len(self.sent_rows),
            "sent_rows": self.sent_rows,
            "rounds_seen": self.rounds_seen,
            "end_status": self.end_status,
            **(
                {"sale": {"price": self.price, "cap": self.cap, "sold": self.points_sold, "earned": self.earned}}
                if self.price > 0 or self.cap is not None
                else {}
            ),
        }

    @property
    def earned(self) -> float:
        """What this owner is owed for this run: its posted price for each point it handed over and the
        curator took (a posted price: the sum reveals nothing but how often this owner was asked and
        refused, which it saw)."""
        return self.price * self.points_sold
