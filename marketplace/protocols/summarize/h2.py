"""h2: the curator's differentially private release of a mean embedding (docs/design.md §3).

Input: q vectors h1(x) in [-sqrt(2/d), sqrt(2/d)]^d. Output: a DP estimate of their mean. Steps:

1. **Quantize** (:func:`quantize`): scale by sqrt(d/2) into [-1, 1] and round each coordinate
   stochastically, without bias, onto S = {-1, -1 + eta, ..., 1} (default eta = 1/d).
2. **MWEM** (:func:`mwem`) over distributions on S^d. Every update multiplies P by a function of one
   coordinate, so P stays a product of d marginals. More precisely, marginal i is always
   ``P_i(s) ∝ exp(theta_i s)``: starting from uniform (theta = 0), the update
   ``P(s) ∝ P(s) exp(s (mu - w(P, i)) / (2q))`` just adds ``(mu - w(P, i)) / (2q)`` to theta_i. So
   :class:`MwemState` stores the d natural parameters (exactly the same distributions as a d x |S|
   matrix, available as :attr:`MwemState.marginals`, but with no renormalisation drift and no
   underflow that a later update could not undo). |S|^d is never materialised.
3. **Release**: sqrt(2/d) * w(P_avg, .) / q, P_avg the average of the iterates (q cancels: it is
   sqrt(2/d) times the average of the iterates' marginal means).

**Privacy.** Neighbouring datasets differ in one row, replaced (q is public: the algorithm uses it).
A row is a vector in [-1, 1]^d, so each coordinate sum w(D_Q, i) moves by at most
``SENSITIVITY = 2`` and so does each score psi_i = |w(P, i) - w(D_Q, i)|. Quantization is applied
row by row, so neighbouring inputs stay neighbours after it (couple the other rows' rounding). One
iteration is then an exponential mechanism (``Exponential``, cost ``eps_select``) followed by a
Laplace measurement of one coordinate sum (``Laplace``, cost ``eps_measure``), and costs
``eps_select + eps_measure``. Both are built from :mod:`marketplace.privacy.mechanisms`, which
states their exact cost; the optional ledger records T ``h2.select`` and T ``h2.measure`` steps.

``eps`` is the cost of one iteration, as docs/design.md counts it ("eps per MWEM iteration", composed
once per iteration to reach 1.40 for D_v). ``split`` shares it: the default (0.5, 0.5) gives
eps/2 to each step, as in Hardt et al.'s MWEM. ``split="paper"`` instead reproduces the noise as
docs/design.md writes it literally: weights exp(eps psi) and Lap(1/eps). With sensitivity 2 those cost
2 * eps * 2 = 4 eps (selection) and 2 eps (measurement), 6 eps per iteration, which is what the
ledger then records.

Every release option is post-processing of the same noisy measurements, so all cost the same:
``"average"`` (default, the paper's P_avg over every iterate the state has produced, warm-started
calls continuing one run), ``"call_average"`` (the average of this call's T iterates only) and
``"last"`` (the final iterate).

Cost per iteration: O(d) for the scores and O(1) for the updated marginal's mean (a closed form,
equal to the O(|S|) sum over the grid); the state is O(d).

>>> from marketplace.privacy.rng import make_rng
>>> rng = make_rng(seed=0, secure=False)
>>> features = np.full((10, 8), 0.25)                      # q = 10 rows of h1 features, d = 8
>>> state, release = h2_release(features, T=400, eps=1e6, rng=rng, release="last")
>>> bool(np.abs(release - 0.25).max() < 1e-3), state.iterations
(True, 400)
>>> quantize(np.array([[-1.0, 0.0, 1.0]]), 0.5, rng)        # grid indices: -1 + 0.5 k
array([[0, 2, 4]], dtype=int32)
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from marketplace.checks import fail as _fail
from marketplace.checks import positive_int as _positive_int
from marketplace.checks import positive_real as _positive_real
from marketplace.privacy.accountant import PrivacyLedger, Step
from marketplace.privacy.mechanisms import Exponential, Laplace

__all__ = [
    "SENSITIVITY",
    "DEFAULT_SPLIT",
    "RELEASES",
    "IterationCost",
    "MwemState",
    "grid_size",
    "grid_values",
    "quantize",
    "coordinate_sums",
    "mwem",
    "h2_release",
    "H2_SELECT",
    "H2_MEASURE",
    "iteration_steps",
]

SENSITIVITY = 2.0
"""How far one coordinate sum w(D_Q, i), and each score psi_i, moves when one row is replaced."""

DEFAULT_SPLIT = (0.5, 0.5)
"""Shares of the per-iteration eps given to (selection, measurement)."""

RELEASES = ("average", "call_average", "last")
"""What :func:`mwem` releases (all post-processing of the same measurements, all the same cost)."""

_NOISE_BLOCK = 1024  # iterations whose simulation noise is drawn at once (1024 x d floats)
_GRID_TOLERANCE = 1e-9  # |2/eta - round(2/eta)| allowed, and the relative slack of the feature bound


# ---------------------------------------------------------------------------------------------
# Parameter checks: one message format, "The 'x' parameter of f must be ... Got ... instead."


def _steps(eta: Any, where: str) -> int:
    """2/eta, the number of grid steps between -1 and 1; eta must divide 2."""
    eta = _positive_real(eta, "eta", where)
    steps = round(2.0 / eta)
    if eta > 1 or abs(2.0 / eta - steps) > _GRID_TOLERANCE * max(1.0, 2.0 / eta):
        raise _fail(
            ValueError, "eta", where, "in (0, 1] with 2/eta an integer (so that 1 is on the grid), for example 1/d", eta
        )
    return steps


def _real_matrix(value: Any, name: str, where: str) -> np.ndarray:
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise _fail(TypeError, name, where, "an array of real numbers", value) from None
    if array.ndim != 2 or array.shape[0] < 1 or array.shape[1] < 1:
        raise ValueError(
            f"The '{name}' parameter of {where} must be a non-empty 2-D array (rows x d). "
            f"Got shape {array.shape} instead."
        )
    if not np.all(np.isfinite(array)):
        raise ValueError(f"The '{name}' parameter of {where} must be finite. Got NaN or infinity.")
    return array


# ---------------------------------------------------------------------------------------------
# The grid and quantization.


def grid_size(eta: float) -> int:
    """|S| = 2/eta + 1 for S = {-1, -1 + eta, ..., 1}."""
    return _steps(eta, "grid_size") + 1


def grid_values(eta: float) -> np.ndarray:
    """S = {-1, -1 + eta, ..., 1} as a float64 array; index k holds -1 + 2k/(2/eta) (exactly ±1 at the ends)."""
    steps = _steps(eta, "grid_values")
    return np.arange(steps + 1, dtype=np.float64) * (2.0 / steps) - 1.0


def quantize(v: np.ndarray, eta: float, rng: np.random.Generator) -> np.ndarray:
    """Unbiased stochastic rounding of v in [-1, 1]^{n x d} onto S; returns the **grid indices**
    (int32, shape of v), index k standing for the value ``grid_values(eta)[k] = -1 + k eta``.

    A value between grid points s_k <= x <= s_{k+1} becomes s_{k+1} with probability
    (x - s_k) / eta and s_k otherwise, so its expectation is x; grid points stay where they are.
    """
    steps = _steps(eta, "quantize")
    values = _real_matrix(v, "v", "quantize")
    if np.abs(values).max() > 1 + _GRID_TOLERANCE:
        raise ValueError(
            f"The 'v' parameter of quantize must lie in [-1, 1] (h1 features scaled by sqrt(d/2)). "
            f"Got a value of {np.abs(values).max()!r} instead."
        )
    if not isinstance(rng, np.random.Generator):
        raise _fail(TypeError, "rng", "quantize", "a numpy.random.Generator (marketplace.privacy.rng.make_rng)", rng)
    position = (np.clip(values, -1.0, 1.0) + 1.0) * (steps / 2.0)  # in [0, steps]
    lower = np.minimum(np.floor(position), steps - 1)
    up = rng.random(values.shape) < (position - lower)
    return (lower + up).astype(np.int32)


def coordinate_sums(indices: np.ndarray, eta: float) -> np.ndarray:
    """w(D_Q, .): the sum over rows of the grid values of quantized data (q x d indices), shape (d,)."""
    steps = _steps(eta, "coordinate_sums")
    array = np.asarray(indices)
    if array.ndim != 2 or array.shape[0] < 1 or not np.issubdtype(array.dtype, np.integer):
        raise ValueError(
            "The 'indices' parameter of coordinate_sums must be a non-empty 2-D integer array "
            f"(the output of quantize). Got dtype {array.dtype}, shape {array.shape} instead."
        )
    if array.min() < 0 or array.max() > steps:
        raise ValueError(
            f"The 'indices' parameter of coordinate_sums must lie in [0, {steps}] for eta={eta!r}. "
            f"Got values in [{array.min()}, {array.max()}] instead."
        )
    return array.sum(axis=0, dtype=np.int64) * (2.0 / steps) - array.shape[0]


# ---------------------------------------------------------------------------------------------
# The MWEM state: d marginals P_i(s) ∝ exp(theta_i s) on S, and the running average.


def _langevin(z: float) -> float:
    """L(z) = coth(z) - 1/z, without the cancellation near 0 (odd, |L| < 1, L(z) ~ z/3)."""
    if abs(z) < 0.1:  # Taylor series; the next term, 2 z^9 / 93555, is below 1e-13 relative here
        z2 = z * z
        return z * (1 / 3 - z2 * (1 / 45 - z2 * (2 / 945 - z2 / 4725)))
    return 1.0 / math.tanh(z) - 1.0 / z


def _marginal_mean(theta: float, eta: float) -> float:
    """E[s] under P(s) ∝ exp(theta s) on S = {-1, -1 + eta, ..., 1}, in O(1).

    With n = |S| and y = theta eta / 2 the geometric sums give
    E[s] = (eta / 2) (n coth(n y) - coth(y)) = (eta / 2) (n L(n y) - L(y)), L the Langevin
    function (the 1/y terms cancel exactly). Equal to the O(|S|) sum over the grid (tested).
    """
    n = round(2.0 / eta) + 1
    y = 0.5 * theta * eta
    return 0.5 * eta * (n * _langevin(n * y) - _langevin(y))


@dataclass(frozen=True, eq=False)
class MwemState:
    """Where MWEM stands: the current iterate and the running average of all iterates so far.

    ``theta[i]`` is the natural parameter of marginal i (``P_i(s) ∝ exp(theta[i] s)`` on S, the
    exact form of every MWEM iterate started from uniform); ``mean_sum[i]`` is the sum over the
    ``iterations`` iterates produced so far of their ``E_{P_t}[s_i]``; ``mean[i] = E_P[s_i]`` of
    the current iterate is derived from theta. The state is a function of the noisy measurements
    only (post-processing), never of the data. Immutable: :func:`mwem` returns a new state.
    """

    eta: float
    theta: np.ndarray
    mean_sum: np.ndarray
    iterations: int
    mean: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        steps = _steps(self.eta, "MwemState")
        arrays = {}
        for name in ("theta", "mean_sum"):
            array = np.array(getattr(self, name), dtype=np.float64)
            if array.ndim != 1 or array.size < 1 or not np.all(np.isfinite(array)):
                raise ValueError(
                    f"The '{name}' parameter of MwemState must be a non-empty finite 1-D array. "
                    f"Got shape {array.shape} instead."
                )
            array.setflags(write=False)
            arrays[name] = array
        if arrays["theta"].shape != arrays["mean_sum"].shape:
            raise ValueError(
                "theta and mean_sum of MwemState must have the same shape (d,). Got "
                f"{arrays['theta'].shape} and {arrays['mean_sum'].shape} instead."
            )
        if (
            isinstance(self.iterations, bool)
            or not isinstance(self.iterations, numbers.Integral)
            or self.iterations < 0
        ):
            raise _fail(ValueError, "iterations", "MwemState", "an integer >= 0", self.iterations)
        if np.abs(arrays["mean_sum"]).max() > self.iterations * (1 + _GRID_TOLERANCE):
            raise ValueError(
                f"The 'mean_sum' parameter of MwemState must lie in [-iterations, iterations] "
                f"(a sum of {self.iterations} means in [-1, 1]). Got {np.abs(arrays['mean_sum']).max()!r}."
            )
        for name, array in arrays.items():
            object.__setattr__(self, name, array)
        object.__setattr__(self, "eta", 2.0 / steps)
        object.__setattr__(self, "iterations", int(self.iterations))
        mean = np.array([_marginal_mean(theta, self.eta) for theta in self.theta.tolist()])
        mean.setflags(write=False)
        object.__setattr__(self, "mean", mean)

    @classmethod
    def uniform(cls, d: int, eta: float | None = None) -> MwemState:
        """P_0: every marginal uniform on S (eta defaults to 1/d), no iterate yet."""
        d = _positive_int(d, "d", "MwemState.uniform")
        eta = 1.0 / d if eta is None else eta
        _steps(eta, "MwemState.uniform")
        zeros = np.zeros(d)
        return cls(eta=eta, theta=zeros, mean_sum=zeros, iterations=0)

    def __repr__(self) -> str:
        return f"MwemState(d={self.d}, eta={self.eta:.6g}, iterations={self.iterations})"

    @property
    def d(self) -> int:
        return int(self.theta.size)

    @property
    def grid(self) -> np.ndarray:
        """S, the values each marginal is over."""
        return grid_values(self.eta)

    @property
    def marginals(self) -> np.ndarray:
        """The current iterate as a d x |S| matrix of probabilities (rows sum to 1)."""
        grid = self.grid
        weights = np.exp(np.outer(self.theta, grid) - np.abs(self.theta)[:, None])
        return weights / weights.sum(axis=1, keepdims=True)

    @property
    def average_mean(self) -> np.ndarray:
        """E_{P_avg}[s], P_avg the average of every iterate so far (the current one if there is none)."""
        return self.mean_sum / self.iterations if self.iterations else self.mean.copy()

    def embedding(self, release: str = "average") -> np.ndarray:
        """The released mean embedding in h1 units, sqrt(2/d) E[s], for the state's own releases:
        ``"average"`` (P_avg over every iterate so far) or ``"last"`` (the current iterate)."""
        if release not in ("average", "last"):
            raise _fail(ValueError, "release", "MwemState.embedding", "'average' or 'last'", release)
        means = self.average_mean if release == "average" else self.mean
        return math.sqrt(2.0 / self.d) * means


# ---------------------------------------------------------------------------------------------
# The privacy cost of one iteration.


@dataclass(frozen=True)
class IterationCost:
    """The privacy cost of one MWEM iteration and the noise it implies (sensitivity 2).

    ``select``: eps of the exponential mechanism choosing the coordinate, whose weights are
    exp(select * psi / (2 * 2)). ``measure``: eps of the Laplace measurement, of scale 2 / measure.
    One iteration costs ``select + measure`` (basic composition of its two steps).
    """

    select: float
    measure: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "select", _positive_real(self.select, "select", "IterationCost"))
        object.__setattr__(self, "measure", _positive_real(self.measure, "measure", "IterationCost"))

    @property
    def total(self) -> float:
        return self.select + self.measure

    @classmethod
    def of(cls, eps: float, split: tuple[float, float] | str = DEFAULT_SPLIT) -> IterationCost:
        """The cost for ``eps`` and ``split`` as :func:`mwem` reads them (see the module docstring).

        >>> IterationCost.of(0.01)
        IterationCost(select=0.005, measure=0.005)
        >>> IterationCost.of(0.01, "paper")       # exp(0.01 psi), Lap(100): 2 * 0.01 * 2 and 2 / 100
        IterationCost(select=0.04, measure=0.02)
        """
        return _iteration_cost(eps, split, "IterationCost.of")


def _iteration_cost(eps: Any, split: Any, where: str) -> IterationCost:
    eps = _positive_real(eps, "eps", where)
    if isinstance(split, str) and split == "paper":
        # weights exp(eps psi) and Lap(1/eps) on sensitivity-2 values: what Exponential.from_weight
        # (2 beta Delta) and Laplace.from_scale (Delta / b) say they cost
        return IterationCost(select=2 * eps * SENSITIVITY, measure=SENSITIVITY * eps)
    if (
        not isinstance(split, (tuple, list))
        or len(split) != 2
        or not all(_is_positive_real(share) for share in split)
        or abs(split[0] + split[1] - 1) > 1e-12
    ):
        raise _fail(
            ValueError,
            "split",
            where,
            "a pair of positive shares summing to 1 (selection, measurement), or 'paper'",
            split,
        )
    return IterationCost(select=eps * float(split[0]), measure=eps * float(split[1]))


def _is_positive_real(value: Any) -> bool:
    return (
        isinstance(value, numbers.Real)
        and not isinstance(value, (bool, np.bool_))
        and math.isfinite(value)
        and float(value) > 0
    )


H2_SELECT, H2_MEASURE = "h2.select", "h2.measure"
"""The names a ledger records an MWEM iteration's two steps under."""


def iteration_steps(cost: IterationCost, T: int) -> tuple[Step, Step]:
    """The ledger steps of T iterations at ``cost``: T ``h2.select`` and T ``h2.measure``."""
    return Step(mechanism=H2_SELECT, eps=cost.select, count=T), Step(mechanism=H2_MEASURE, eps=cost.measure, count=T)


def _record(ledger: PrivacyLedger | None, cost: IterationCost, T: int) -> None:
    """Spend T 'h2.select' and T 'h2.measure' steps, or raise BudgetExceeded recording nothing."""
    if ledger is None:
        return
    if not isinstance(ledger, PrivacyLedger):
        raise _fail(TypeError, "ledger", "mwem", "a PrivacyLedger or None", ledger)
    select, measure = iteration_steps(cost, T)
    ledger.check_plan([select, measure])
    ledger.spend(select.eps or 0.0, mechanism=select.mechanism, count=T)
    ledger.spend(measure.eps or 0.0, mechanism=measure.mechanism, count=T)


# ---------------------------------------------------------------------------------------------
# MWEM.


def _check_sums(sums: Any, q: Any, d: int) -> tuple[np.ndarray, int]:
    q = _positive_int(q, "q", "mwem")
    try:
        array = np.asarray(sums, dtype=np.float64)
    except (TypeError, ValueError):
        raise _fail(TypeError, "sums", "mwem", "an array of real numbers", sums) from None
    if array.shape != (d,) or not np.all(np.isfinite(array)):
        raise ValueError(
            f"The 'sums' parameter of mwem must be a finite array of shape ({d},) (w(D_Q, .), one "
            f"sum per coordinate of the state). Got shape {array.shape} instead."
        )
    if np.abs(array).max() > q * (1 + _GRID_TOLERANCE):
        raise ValueError(
            f"The 'sums' parameter of mwem must lie in [-q, q] = [-{q}, {q}] (sums of q values in "
            f"[-1, 1]). Got {np.abs(array).max()!r} instead."
        )
    return array, q


def _noise(
    select: Exponential, measure: Laplace, rng: np.random.Generator | None, T: int, d: int
) -> Iterator[tuple[np.ndarray | None, float | None]]:
    """Per iteration, the simulation noise of its two steps: a row of d Gumbel draws and a Laplace
    draw, with the mechanisms' own scales (``select.gumbel_scale``, ``measure.scale``), so that
    ``argmax(psi / gumbel_scale + row)`` and ``value + draw`` are exactly what their ``randomise``
    computes. Drawn for blocks of iterations at once: calling ``randomise`` every iteration spends
    most of the time re-checking its input. In secure mode it yields (None, None) and each step goes
    through the mechanism (OpenDP's samplers)."""
    if select.secure:
        for _ in range(T):
            yield None, None
        return
    if rng is None:  # the mechanisms refuse a simulation without a generator before any draw
        raise ValueError("simulated noise needs a numpy.random.Generator (rng)")
    for start in range(0, T, _NOISE_BLOCK):
        size = min(_NOISE_BLOCK, T - start)
        gumbel = rng.gumbel(size=(size, d))
        laplace = rng.laplace(0.0, measure.scale, size=size)
        yield from zip(gumbel, laplace.tolist())


def mwem(
    state: MwemState,
    sums: np.ndarray,
    *,
    q: int,
    T: int,
    eps: float | None = None,
    rng: np.random.Generator | None,
    split: tuple[float, float] | str = DEFAULT_SPLIT,
    secure: bool = False,
    ledger: PrivacyLedger | None = None,
    release: str = "call_average",
    cost: IterationCost | None = None,
) -> tuple[MwemState, np.ndarray]:
    """T MWEM iterations from ``state`` on the coordinate sums ``sums`` = w(D_Q, .) of q quantized
    rows (:func:`coordinate_sums`); returns the new state and the released mean embedding (d,),
    in h1 units.

    Each iteration picks i with ``Exponential(epsilon=cost.select, sensitivity=2)`` over the d
    scores |w(P, i) - w(D_Q, i)|, measures ``mu = Laplace(epsilon=cost.measure, sensitivity=2)``
    on w(D_Q, i), and sets P_i(s) ∝ P_i(s) exp(s (mu - w(P, i)) / (2q)). ``cost =
    IterationCost.of(eps, split)``: by default each step gets eps/2, so an iteration costs eps.
    The whole call costs T * cost.total (basic), and is recorded on ``ledger`` (T 'h2.select' and
    T 'h2.measure' steps) before anything is computed; a spend over budget raises
    :class:`~marketplace.privacy.accountant.BudgetExceeded` and leaves the ledger unchanged.

    ``secure=True`` takes the noise from OpenDP (see :mod:`marketplace.privacy.mechanisms`).
    ``release``: one of ``RELEASES`` (same cost); the default averages this call's T iterates, as
    docs/design.md §3 step 4 does. The running average over every call lags once rounds go by: it stays
    dominated by round 1's T_init iterates, computed on the seed set alone. ``state`` is not modified.

    ``cost``: the iteration's cost as given (its two steps' eps, from a release plan), instead of
    ``eps`` and ``split``.
    """
    if not isinstance(state, MwemState):
        raise _fail(TypeError, "state", "mwem", "an MwemState (MwemState.uniform(d) to start)", state)
    sums, q = _check_sums(sums, q, state.d)
    T = _positive_int(T, "T", "mwem")
    if cost is None:
        cost = _iteration_cost(eps, split, "mwem")
    elif not isinstance(cost, IterationCost):
        raise _fail(TypeError, "cost", "mwem", "an IterationCost or None", cost)
    if release not in RELEASES:
        raise _fail(ValueError, "release", "mwem", f"one of {list(RELEASES)}", release)
    select = Exponential(epsilon=cost.select, sensitivity=SENSITIVITY, rng=rng, secure=secure)
    measure = Laplace(epsilon=cost.measure, sensitivity=SENSITIVITY, rng=rng, secure=secure)
    _record(ledger, cost, T)

    theta, mean = state.theta.copy(), state.mean.copy()
    call_sum = np.zeros(state.d)
    for gumbel, laplace in _noise(select, measure, rng, T, state.d):
        psi = np.abs(q * mean - sums)
        i = select.randomise(psi) if gumbel is None else int(np.argmax(psi / select.gumbel_scale + gumbel))
        mu = measure.randomise(sums[i]) if laplace is None else sums[i] + laplace
        theta[i] += (mu - q * mean[i]) / (2 * q)
        mean[i] = _marginal_mean(theta[i], state.eta)
        call_sum += mean

    new = MwemState(eta=state.eta, theta=theta, mean_sum=state.mean_sum + call_sum, iterations=state.iterations + T)
    if release == "call_average":
        return new, math.sqrt(2.0 / state.d) * (call_sum / T)
    return new, new.embedding(release)


def h2_release(
    features: np.ndarray,
    *,
    T: int,
    eps: float | None = None,
    rng: np.random.Generator,
    state: MwemState | None = None,
    eta: float | None = None,
    split: tuple[float, float] | str = DEFAULT_SPLIT,
    secure: bool = False,
    ledger: PrivacyLedger | None = None,
    release: str = "call_average",
    cost: IterationCost | None = None,
) -> tuple[MwemState, np.ndarray]:
    """h2(features): scale q x d h1 features into [-1, 1], quantize them, and run :func:`mwem`
    from ``state`` (a warm start; uniform on S when None). Returns (new state, release (d,)).

    ``eta`` defaults to the state's, or 1/d for a new state. ``rng`` draws the quantization's
    rounding and, unless ``secure``, the noise; in secure mode pass ``make_rng(seed=None,
    secure=True)`` (the noise then comes from OpenDP, the rounding from that generator).
    """
    values = _real_matrix(features, "features", "h2_release")
    q, d = values.shape
    bound = math.sqrt(2.0 / d)
    if np.abs(values).max() > bound * (1 + _GRID_TOLERANCE):
        raise ValueError(
            f"The 'features' parameter of h2_release must lie in [-sqrt(2/d), sqrt(2/d)] = "
            f"[-{bound:.6g}, {bound:.6g}] (h1 features, d = {d}). Got {np.abs(values).max()!r} instead."
        )
    if state is None:
        state = MwemState.uniform(d, eta)
    elif not isinstance(state, MwemState):
        raise _fail(TypeError, "state", "h2_release", "an MwemState or None", state)
    elif state.d != d:
        raise ValueError(
            f"The 'state' parameter of h2_release must have d = {d} (the features' width). "
            f"Got a state with d = {state.d} instead."
        )
    elif eta is not None and _steps(eta, "h2_release") != _steps(state.eta, "h2_release"):
        raise ValueError(
            f"The 'eta' parameter of h2_release must match the state's grid (eta = {state.eta!r}) "
            f"or be None. Got {eta!r} instead."
        )
    sums = coordinate_sums(quantize(values / bound, state.eta, rng), state.eta)
    return mwem(
        state, sums, q=q, T=T, eps=eps, rng=rng, split=split, secure=secure, ledger=ledger, release=release, cost=cost
    )
