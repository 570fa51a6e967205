"""The curator's side of `summarize` (non-private): broadcast embeddings, collect bids, ask the best
bidder only, verify its point, grow the summary.

Phases: ``gathering`` (hellos and D_v) -> per round ``bidding`` -> ``acquiring`` -> ... ->
``closing`` (summary sent, waiting for every ``bye``). No message tells an owner who won: an owner
learns only whether it was itself asked for a point.

``trust="less_trusted"``: the curator never holds a raw point. It gets h1 of D_v's rows and of
each requested point, verifies bids on those embeddings, and relays the points sealed for the
consumer (:mod:`~marketplace.protocols.summarize.sealing`); only the consumer can open them and check
them against the embeddings the curator verified and the content keys their owners named them by.

**An honest owner is never refused** (docs/design.md §10). The curator tells an owner's points apart
as the owner counts them, by features and label (:mod:`~marketplace.protocols.summarize.identity`),
and its bid check allows the configured relative tolerance plus every error that rounding can put
between two honest computations of the bid (:func:`~marketplace.protocols.summarize.bid.bid_rounding`,
which grows with |x| |W|), so whether a point passes never depends on the owner's data.
"""

from __future__ import annotations

import logging
from collections import deque
from enum import StrEnum
from typing import Any

import numpy as np

from marketplace.messages import Envelope, ProtocolError
from marketplace.messages.errors import cut
from marketplace.messages.kinds import Bye, Error, Hello, RuntimeMessage
from marketplace.protocols.summarize import RandomFourierFeatures, bid_direction, bid_value, rff_objective_gain
from marketplace.protocols.summarize.auction import SealedContent
from marketplace.protocols.summarize.bid import bid_rounding
from marketplace.protocols.summarize.identity import embedding_key, point_key
from marketplace.protocols.summarize.messages import (
    Bid,
    Point,
    Request,
    RoundOpen,
    SealedPoint,
    SealedSummary,
    SummarizeMessage,
    Summary,
    TargetEmbedding,
    Terms,
    ValidationEmbedding,
    ValidationSet,
)
from marketplace.protocols.summarize.payments import Purse
from marketplace.protocols.summarize.publication import BID_MISMATCH, SOLD_TWICE
from marketplace.protocols.summarize.sealing import sealed_size
from marketplace.roles import CONSUMER, Send
from marketplace.roles.curator import CuratorBase, RunStatus
from marketplace.roles.parsimony import ParsimonyLedger

log = logging.getLogger(__name__)

TRUST_LEVELS = ("trusted", "less_trusted")
_EMBEDDING_SLACK = 1e-9  # relative slack on |h1(x)_i| <= sqrt(2/d) for received embeddings


class SummarizePhase(StrEnum):
    """Where a summarize curator stands: hellos and D_v, then rounds of bids and point requests."""

    GATHERING = "gathering"
    BIDDING = "bidding"
    ACQUIRING = "acquiring"
    CLOSING = "closing"


class SummarizeCurator(CuratorBase):
    protocol = "summarize"
    Phase = SummarizePhase

    def __init__(
        self,
        *,
        scenario_name: str,
        owners: tuple[str, ...],
        features: RandomFourierFeatures,
        seed_set: np.ndarray,
        dim: int,
        rounds: int,
        verify_tolerance: float,
        trust: str = "trusted",
        spending_budget: float | None = None,
    ) -> None:
        super().__init__(scenario_name=scenario_name, owners=owners)
        if trust not in TRUST_LEVELS:
            raise ValueError(
                f"The 'trust' parameter of {type(self).__name__} must be one of {list(TRUST_LEVELS)}. Got {trust!r} "
                f"instead."
            )
        self.less_trusted = trust == "less_trusted"
        self.consumer_key: bytes | None = None
        self.features = features
        self.dim = dim
        self.rounds = rounds
        self.tolerance = verify_tolerance
        self.rank = {o: i for i, o in enumerate(owners)}  # the public tie-break order
        self.flagged_rounds: dict[str, int] = {}
        self.ledger = ParsimonyLedger()
        seed_phi = features.transform(seed_set) if len(seed_set) else np.zeros((0, features.n_features))
        self.summary_sum = seed_phi.sum(axis=0)
        self.diag_excess = float(len(seed_phi) - np.einsum("ij,ij->", seed_phi, seed_phi))
        self.q = len(seed_set)
        self.seed_size = len(seed_set)
        self.target_mean: np.ndarray | None = None
        self.validation_size = 0
        self.round = 0
        self.bids: dict[str, Bid] = {}
        self.candidates: deque[str] = deque()
        self.asked: str | None = None
        self.direction: np.ndarray | None = None
        self.received: dict[str, dict[str, int]] = {o: {} for o in owners}
        """Per owner, the content key of every point it sent (and the serial it sent it as)."""
        self.commitments: dict[str, bytes] = {}
        """Less-trusted: per owner, the commitment to the secret its content keys are made with."""
        self.selection: list[tuple[str, int, str]] = []
        """D_s in order: (owner, the point's serial as its owner sent it, its content key); never a row."""
        self.summary_X: list[np.ndarray] = []
        self.summary_y: list[int] = []
        self.summary_phi: list[np.ndarray] = []  # less-trusted: what the consumer checks the sealed points against
        self.summary_sealed: list[SealedContent] = []
        self.value: dict[str, float] = {o: 0.0 for o in owners}
        self._phi_cache: tuple[Point | SealedPoint, np.ndarray] | None = None
        self.history: list[dict[str, Any]] = []
        """One record per round that grew D_s (:meth:`_record_round`), for the report's history."""
        self.requests_since_record = 0
        self.purse = Purse(spending_budget)
        """The consumer's spending budget, the owners' posted prices, and what was paid to whom."""

    # --- role interface ------------------------------------------------------------------
    def start(self) -> list[Send]:
        return []

    def handle(self, message: Envelope[SummarizeMessage | RuntimeMessage]) -> list[Send]:
        match message.body:
            case Hello():
                return self._on_hello(message)
            case ValidationSet():
                return self._on_validation_set(message)
            case ValidationEmbedding():
                return self._on_validation_embedding(message)
            case Terms():
                return self._on_terms(message)
            case Bid():
                return self._on_bid(message)
            case Point() | SealedPoint():
                return self._on_point(message)
            case Bye():
                return self._on_bye(message)
        raise ProtocolError(party=message.sender, kind=message.kind, reason="the curator does not accept this kind")

    def _drop(self, peer: str) -> dict[str, Any]:
        self.bids.pop(peer, None)
        return {"round": self.round, "phase": str(self.phase)}

    # --- gathering -----------------------------------------------------------------------
    def _on_hello(self, message: Envelope) -> list[Send]:
        refused = self.admit(message, open_=self.phase == SummarizePhase.GATHERING)
        return refused if refused is not None else self._maybe_begin()

    def _on_validation_set(self, message: Envelope) -> list[Send]:
        self._check_first_validation(message, "validation_embedding")
        X = message.body.X
        if X.shape[1] != self.dim or len(X) == 0:
            raise ProtocolError(
                party=message.sender,
                kind="validation_set",
                reason=f"expected a non-empty (m, {self.dim}) array, got {list(X.shape)}",
            )
        self.ledger.see(CONSUMER, len(X))
        self.validation_size = len(X)
        self.target_mean = self._release_target(self.features.transform(X))
        return self._maybe_begin()

    def _on_validation_embedding(self, message: Envelope) -> list[Send]:
        self._check_first_validation(message, "validation_set")
        phi = message.body.phi
        problem = self._embedding_problem(phi, rows=True)
        if problem or len(phi) == 0:
            raise ProtocolError(
                party=message.sender, kind="validation_embedding", reason=problem or "expected at least one row"
            )
        self.ledger.see(CONSUMER, len(phi), raw=False)
        self.validation_size = len(phi)
        self.consumer_key = bytes(message.body.consumer_key)
        self.target_mean = self._release_target(phi)
        return self._maybe_begin()

    def _check_first_validation(self, message: Envelope, other_kind: str) -> None:
        """D_v comes from the consumer, once, in the form this curator's trust level calls for."""
        kind = message.kind
        if message.sender != CONSUMER or self.target_mean is not None:
            raise ProtocolError(party=message.sender, kind=kind, reason="only the consumer sends D_v, once")
        wanted = ValidationEmbedding if self.less_trusted else ValidationSet
        if not isinstance(message.body, wanted):
            trust = "less-trusted" if self.less_trusted else "trusted"
            raise ProtocolError(
                party=message.sender, kind=kind, reason=f"a {trust} curator takes D_v as {wanted.KIND!r}, not {kind!r}"
            )

    def _embedding_problem(self, phi: np.ndarray, *, rows: bool) -> str | None:
        """Why ``phi`` cannot be h1 of anything (wrong width, not finite, outside +-sqrt(2/d)), or None."""
        d = self.features.n_features
        shape = list(phi.shape)
        if (rows and (phi.ndim != 2 or shape[1] != d)) or (not rows and shape != [d]):
            return f"expected h1 embeddings of width {d}, got shape {shape}"
        if not np.isfinite(phi).all():
            return "the embedding has a non-finite value"
        if phi.size and float(np.abs(phi).max()) > self.features.bound * (1 + _EMBEDDING_SLACK):
            return f"an embedding coordinate exceeds sqrt(2/d) = {self.features.bound:.6g} (not an h1 embedding)"
        return None

    def _release_target(self, phi: np.ndarray) -> np.ndarray:
        """g~ from h1(D_v): here the exact mean (the private curator releases h2 of it instead)."""
        return phi.mean(axis=0)

    def _release_summary(self) -> np.ndarray:
        """g_l from D_s: here the exact mean (the private curator releases h2 of it instead)."""
        return self.summary_sum / self.q if self.q else np.zeros_like(self.summary_sum)

    def _maybe_begin(self) -> list[Send]:
        if self.phase != SummarizePhase.GATHERING or self.target_mean is None or len(self.present) <= len(self.active):
            return []  # O(1) for every hello but the last ones: not everybody can be present yet
        if CONSUMER not in self.present or any(o not in self.present for o in self.active):
            return []
        log.info("all %d owners and the consumer are present; |D_v| = %d", len(self.active), self.validation_size)
        body = TargetEmbedding(mean=self.target_mean, consumer_key=self.consumer_key)
        sends = [Send(o, body) for o in self.active]
        return sends + self._open_round()

    def _on_terms(self, message: Envelope) -> list[Send]:
        """An owner's sale terms, once, before its first bid: its price per point and how many it sells."""
        sender, terms = message.sender, message.body
        if sender not in self.owners or sender in self.purse.prices or self.phase == SummarizePhase.CLOSING:
            raise ProtocolError(
                party=sender, kind="terms", reason="only an owner sends its terms, once, before closing"
            )
        if sender in self.bids or self.round > 1:  # an owner's messages arrive in order: terms, then bids
            raise ProtocolError(party=sender, kind="terms", reason="terms come before the owner's first bid")
        self.purse.post(sender, terms.price, terms.points)
        return []

    # --- rounds --------------------------------------------------------------------------
    def _open_round(self) -> list[Send]:
        if self.round >= self.rounds:
            return self._finish("all rounds done")
        if not self.active:
            return self._finish(f"no owner left after {len(self.selection)} of {self.rounds} rounds", status="failed")
        self.round += 1
        self.phase = SummarizePhase.BIDDING
        self.bids = {}
        summary_mean = self._release_summary()
        self.direction = bid_direction(self._target(), summary_mean, self.q)
        body = RoundOpen(round=self.round, summary_mean=summary_mean, q=self.q)
        return [Send(o, body) for o in self.active]

    def _on_bid(self, message: Envelope) -> list[Send]:
        bid: Bid = message.body
        sender = message.sender
        if sender not in self.active:
            raise ProtocolError(party=sender, kind="bid", reason="not an active owner")
        if self.phase != SummarizePhase.BIDDING or bid.round != self.round or sender in self.bids:
            raise ProtocolError(
                party=sender,
                kind="bid",
                reason=f"no bid expected (phase {self.phase}, round {self.round}, bid for round {bid.round})",
            )
        self.bids[sender] = bid
        return self._maybe_choose()

    def _maybe_choose(self) -> list[Send]:
        if self.phase != SummarizePhase.BIDDING or len(self.bids) < len(self.active):
            return []
        offers = [(b.value, o) for o, b in self.bids.items() if b.available]
        if not offers:
            return self._finish("every owner has run out of points")
        offers = [(v, o) for v, o in offers if self.purse.affordable(o)]
        if not offers:
            return self._finish(self.purse.spent_reason())
        # best bid first; equal bids go to the lower owner id (a fixed, public rule)
        self.candidates = deque(o for _, o in sorted(offers, key=lambda t: (-t[0], self.rank[t[1]])))
        return self._ask_next()

    def _ask_next(self) -> list[Send]:
        """Ask the best remaining candidate still active (O(1) per candidate skipped, so excluding
        many owners in one round stays O(K))."""
        while self.candidates and self.candidates[0] not in self.active:
            self.candidates.popleft()
        if not self.candidates:
            return self._open_round_again()
        self.asked = self.candidates.popleft()
        self.phase = SummarizePhase.ACQUIRING
        self.requests_since_record += 1
        return [Send(self.asked, Request(round=self.round))]

    def _open_round_again(self) -> list[Send]:
        """No candidate of this round could deliver: rerun the round with the remaining owners (nothing
        here is charged per round; the private curator ends such a round instead, since each of its
        rounds is a charged auction draw)."""
        self.round -= 1
        return self._open_round()

    def _on_point(self, message: Envelope) -> list[Send]:
        point: Point | SealedPoint = message.body
        sender = message.sender
        if self.phase != SummarizePhase.ACQUIRING or sender != self.asked or point.round != self.round:
            raise ProtocolError(
                party=sender, kind=message.kind, reason="no point was requested from this owner for this round"
            )
        self.ledger.see(sender, raw=isinstance(point, Point))
        problem = self._verify(sender, point)
        if problem:
            self.flagged[sender] = problem
            self.flagged_rounds[sender] = self.round
            self.active.remove(sender)
            self.bids.pop(sender, None)
            log.warning("owner %s flagged and excluded: %s", sender, problem)
            return [self._refusal(message, problem), *self._ask_next()]
        self.purse.pay(sender)
        self._accept(sender, point)
        return self._open_round()

    def frame_refused(self, peer: str, about_kind: str | None, detail: str = "") -> list[Send]:
        """An owner asked for a point answered with a frame that cannot be read (NaN coordinates, a
        wrong shape...): it is flagged and excluded like an owner whose point does not match its
        bid, and the round goes on without it, instead of waiting for a point that will not come.
        An owner whose bid cannot be read (a NaN bid from data holding 1e308) is dropped at once too:
        it would never bid in this round."""
        if (
            self.phase == SummarizePhase.BIDDING
            and about_kind == "bid"
            and peer in self.active
            and peer not in self.bids
        ):
            if detail:  # the driver's validation text may name the value it found: the curator's log only
                log.warning("round %d: %s's bid could not be read: %s", self.round, peer, detail)
            return self.exclude(peer, f"round {self.round}: sent a bid that could not be read")
        if (
            self.phase != SummarizePhase.ACQUIRING
            or about_kind not in ("point", "sealed_point", None)
            or not self.awaits_from(peer)
        ):
            return []
        return self._exclude_unreadable(peer)

    def _awaited_in_phase(self) -> dict[str, str]:
        if self.phase == SummarizePhase.GATHERING and CONSUMER in self.present and self.target_mean is None:
            return {CONSUMER: "D_v (validation_set)"}
        if self.phase == SummarizePhase.BIDDING:
            return {o: f"a bid for round {self.round}" for o in self.active if o not in self.bids}
        if self.phase == SummarizePhase.ACQUIRING:
            asked = sorted((o for o in self._asked_now() if o in self.active), key=self.rank.__getitem__)
            return {o: f"the point requested in round {self.round}" for o in asked}
        return {}

    def _asked_now(self) -> tuple[str, ...]:
        """The owners asked for a point in this round and not yet heard from (O(asked), not O(K))."""
        return (self.asked,) if self.asked is not None and self.awaits_from(self.asked) else ()

    def awaits_from(self, peer: str) -> bool:
        return self.phase == SummarizePhase.ACQUIRING and peer == self.asked

    def _exclude_unreadable(self, peer: str) -> list[Send]:
        self.ledger.see(peer, raw=not self.less_trusted)
        self.flagged[peer] = f"round {self.round}: sent a point that could not be read"
        self.flagged_rounds[peer] = self.round
        if peer in self.active:
            self.active.remove(peer)
        self.bids.pop(peer, None)
        log.warning("owner %s flagged and excluded: its point could not be read", peer)
        return [self._unreadable_refusal(peer), *self._ask_next()]

    def _refusal(self, message: Envelope, problem: str) -> Send:
        """The ``error`` that tells an owner the point in ``message`` was refused: the consumer does not
        buy it, so the owner does not count it as sold (its sale record then equals the bill). What it
        says follows from the owner's own point, bid and earlier points only, and names no figure of
        them (``problem`` is :meth:`_verify`'s public reason)."""
        detail = f"round {self.round}: the point was refused and is not bought: {problem}"
        body = Error(code="refused", detail=cut(detail, 2000), about_kind=message.kind, about_msg_id=message.msg_id)
        return Send(message.sender, body, reply_to=message.msg_id)

    def _unreadable_refusal(self, peer: str) -> Send:
        """The refusal of a point that could not be read (the driver's own ``error`` may not name its kind)."""
        detail = f"round {self.round}: the point could not be read, and is not bought"
        return Send(
            peer, Error(code="refused", detail=detail, about_kind="sealed_point" if self.less_trusted else "point")
        )

    def content_key(self, point: Point | SealedPoint) -> str:
        """A received point's identity, as its owner counts its points (features and label): a hash
        of the point, or, for a less-trusted curator, the content key the owner named it by."""
        return sealed_names(point)[0].hex() if isinstance(point, SealedPoint) else point_key(point.x, point.y)

    def _verify(self, owner: str, point: Point | SealedPoint) -> str | None:
        """Why a received point cannot be accepted, in public form, or None: the wrong form for this
        curator, wrong shape, sent before, or a bid value (recomputed for this round's direction) that
        differs from the claimed one. The reason goes to the owner and into ``flagged``, so it names
        public figures only (the round, a message's shape or size, a public bound); the figures compared
        (bid values, the tolerance, the points' serials) go to this curator's own log."""
        if self.less_trusted != isinstance(point, SealedPoint):
            return (
                "sent a raw point to a less-trusted curator"
                if self.less_trusted
                else "sent a sealed point to a trusted curator"
            )
        if isinstance(point, Point) and point.x.shape != (self.dim,):
            return f"point has shape {list(point.x.shape)}, expected [{self.dim}]"
        if isinstance(point, SealedPoint):
            problem = self._sealed_problem(owner, point)
            if problem:
                return problem
        key = self.content_key(point)
        if key in self.received[owner]:
            log.warning(
                "owner %s, round %d: sent the same point again (first as serial %d, now as serial %d)",
                owner,
                self.round,
                self.received[owner][key],
                point.row,
            )
            return SOLD_TWICE
        self.received[owner][key] = point.row
        claimed = self.bids[owner].value
        actual = bid_value(self._phi(point), self._direction())
        allowed = self.tolerance * max(1.0, abs(claimed)) + self._rounding(point)
        if not abs(actual - claimed) <= allowed:
            log.warning(
                "owner %s, round %d: the point's bid value %.12g does not match the claimed bid %.12g (allowed: %.3g)",
                owner,
                self.round,
                actual,
                claimed,
                allowed,
            )
            return BID_MISMATCH.format(round=self.round)
        return None

    def _sealed_problem(self, owner: str, point: SealedPoint) -> str | None:
        """Why a sealed point cannot be taken (not an h1 embedding, the wrong length, no content key, or
        a commitment other than the owner's first), or None."""
        problem = self._embedding_problem(point.phi, rows=False)
        if problem:
            return problem
        if len(point.sealed) != sealed_size(self.dim):
            return f"sealed point has {len(point.sealed)} bytes, expected {sealed_size(self.dim)}"
        if point.key is None or point.commitment is None:
            return "sent a sealed point without its content key and commitment"
        first = self.commitments.setdefault(owner, bytes(point.commitment))
        if bytes(point.commitment) != first:
            return "named its points under two different secrets (a point could be sold twice)"
        return None

    def _rounding(self, point: Point | SealedPoint) -> float:
        """How far rounding alone can put an honest bid from this curator's recomputation: a trusted
        curator recomputes h1 of the point (the owner's h1 of it may differ by twice its error
        bound); a less-trusted one dots the very embedding the owner dotted."""
        if isinstance(point, SealedPoint):
            return bid_rounding(point.phi, self._direction())
        error = self.features.transform_error(point.x[None, :])[0]
        return bid_rounding(self._phi(point), self._direction(), error)

    def _target(self) -> np.ndarray:
        """The target's released mean embedding (rounds open only once it is released)."""
        if self.target_mean is None:
            raise RuntimeError("the target's mean embedding is not released yet: no round can be open")
        return self.target_mean

    def _direction(self) -> np.ndarray:
        """This round's bid direction (drawn when the round opened)."""
        if self.direction is None:
            raise RuntimeError("no round has opened yet: there is no bid direction")
        return self.direction

    def _phi(self, point: Point | SealedPoint) -> np.ndarray:
        """h1 of a received point, computed once per point (verification and acceptance share it);
        a sealed point brings its own (checked by the consumer when it opens the point)."""
        if isinstance(point, SealedPoint):
            return point.phi
        if self._phi_cache is None or self._phi_cache[0] is not point:
            self._phi_cache = (point, self.features.transform(point.x[None, :])[0])
        return self._phi_cache[1]

    def _accept(self, owner: str, point: Point | SealedPoint) -> None:
        self._add_to_summary(owner, point.row, self._phi(point), payload(point))

    def _add_to_summary(
        self, owner: str, serial: int, phi: np.ndarray, content: tuple[np.ndarray, int] | SealedContent
    ) -> None:
        """Grow D_s by one verified point and credit its owner with the point's marginal gain.
        ``content`` is the point as (x, y), or sealed with a less-trusted curator. The selection
        names the point by the serial its owner sent it as (the k-th point that owner handed over,
        never its row) and by a hash of (x, y), or of the embedding a less-trusted curator verified."""
        gain = rff_objective_gain(self._target(), self.summary_sum, self.diag_excess, self.q, phi)
        self.value[owner] += gain
        self.summary_sum = self.summary_sum + phi
        self.diag_excess += 1.0 - float(phi @ phi)
        self.q += 1
        if isinstance(content, SealedContent):
            self.selection.append((owner, serial, embedding_key(phi)))
            self.summary_phi.append(np.array(phi, dtype=np.float64))
            self.summary_sealed.append(content)
        else:
            x, y = content
            self.selection.append((owner, serial, point_key(x, y)))
            self.summary_X.append(np.array(x, dtype=np.float64))
            self.summary_y.append(int(y))
        self._record_round()
        log.info("round %d/%d done", self.round, self.rounds)

    def _record_round(self) -> None:
        """Record the round that just grew D_s: the owners asked for a point since the last record
        (those of a reopened round, or of a private round that added no point, included), |D_s|, the
        owners still active, the messages and bytes the curator had sent by then (this round's
        opening and requests included, heartbeats not) and, in a private run, each ledger's eps so
        far."""
        self.history.append(
            {
                "round": self.round,
                "requests": self.requests_since_record,
                "summary_size": len(self.selection),
                "owners_active": len(self.active),
                **self._round_privacy(),
                "messages_sent": self.traffic.messages_sent,
                "bytes_sent": self.traffic.bytes_sent,
            }
        )
        self.requests_since_record = 0

    def _round_privacy(self) -> dict[str, float]:
        """The privacy spent so far, per ledger (``eps[<ledger>]``): none in a non-private run."""
        return {}

    def _progress_after_loss(self, peer: str) -> list[Send]:
        if self.phase == SummarizePhase.GATHERING:
            return self._maybe_begin()
        if self.phase == SummarizePhase.BIDDING:
            return self._open_round() if not self.active else self._maybe_choose()
        if self.phase == SummarizePhase.ACQUIRING and peer == self.asked:
            return self._ask_next()
        return []

    # --- ending ----------------------------------------------------------------------------
    def _finish(self, reason: str, status: RunStatus = "completed") -> list[Send]:
        if self.less_trusted:
            d = self.features.n_features
            sealed = SealedSummary(
                phi=np.array(self.summary_phi, dtype=np.float64).reshape(len(self.summary_phi), d),
                sealed=tuple(c.sealed for c in self.summary_sealed),
                rounds=len(self.selection),
                keys=tuple(c.key for c in self.summary_sealed),
                commitments=tuple(c.commitment for c in self.summary_sealed),
            )
            return [Send(CONSUMER, sealed)] + self._close(status=status, reason=reason)
        summary = Summary(
            X=np.array(self.summary_X, dtype=np.float64).reshape(len(self.summary_X), self.dim),
            y=np.array(self.summary_y, dtype=np.int64),
            rounds=len(self.selection),
        )
        return [Send(CONSUMER, summary)] + self._close(status=status, reason=reason)

    def progress(self) -> int:
        """Rounds whose owner was selected (the in-process driver's progress bar)."""
        return len(self.selection)

    def result(self) -> dict[str, Any]:
        return {
            "end_reason": self.end_reason,
            "rounds_completed": len(self.selection),
            "parsimony": self.ledger.report(len(self.selection), self.validation_size),
            "selection": [[o, r, k] for o, r, k in self.selection],
            "value": {o: self.value[o] for o in self.owners},
            "flagged": dict(self.flagged),
            "flagged_rounds": dict(self.flagged_rounds),
            "dropouts": dict(self.dropouts),
            "late_byes": list(self.late_byes),
            "seed_set_size": self.seed_size,
            "curator_trust": "less_trusted" if self.less_trusted else "trusted",
            "rounds": list(self.history),
            **({"sale": self.purse.report()} if self.purse.in_use else {}),
        }


def payload(point: Point | SealedPoint) -> tuple[np.ndarray, int] | SealedContent:
    """What of a received point goes into D_s: (x, y), or the point sealed for the consumer."""
    if isinstance(point, SealedPoint):
        key, commitment = sealed_names(point)
        return SealedContent(bytes(point.sealed), key, commitment)
    return (point.x, int(point.y))


def sealed_names(point: SealedPoint) -> tuple[bytes, bytes]:
    """A sealed point's content key and commitment (a curator refuses a sealed point without them
    before it names or keeps it: :meth:`SummarizeCurator._verify`)."""
    if point.key is None or point.commitment is None:
        raise ValueError("a sealed point without its content key and commitment cannot be named or kept")
    return bytes(point.key), bytes(point.commitment)
