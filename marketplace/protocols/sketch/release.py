"""The DP sketch an owner releases, how sketches of disjoint datasets merge, and its .npz file.

An owner releases the pair (sum_i Phi(x_i) + xi, n + zeta), not their ratio: sums of disjoint
datasets add, so merging releases is exact post-processing (no privacy cost, no approximation), and
the consumer forms z = (sum + xi) / (n + zeta) only when it needs it. The noise, with the privacy
budget eps split as eps_num = 0.98 eps for the sum and eps_den = 0.02 eps for the count:

* ``mechanism="laplace"`` (eps-DP): xi ~ Lap(Delta_1 / eps_num)^m, zeta ~ Lap(1 / eps_den).
* ``mechanism="gaussian"`` ((eps, delta)-DP): xi ~ N(0, s^2)^m with s the analytic Gaussian
  calibration for (eps_num, delta) and the L2 sensitivity Delta_2; zeta ~ Lap(1 / eps_den), so
  the whole delta goes to the sum.

Both are for add/remove-one neighbouring (the count moves by 1, the sum by Phi(x)); the noise comes
from :mod:`marketplace.privacy.mechanisms`, so ``secure=True`` gives OpenDP's exact samplers.
The release records the variance of each noise, which adds up under merging: M²M needs it for its
regularisation.
"""

from __future__ import annotations

import math
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from marketplace.privacy.mechanisms import Gaussian, Laplace
from marketplace.privacy.plan import Release

from ._checks import check_choice, check_fraction, check_int, check_positive, check_precision, is_real
from .feature_maps import FeatureMap

__all__ = [
    "SketchRelease",
    "SketchFileError",
    "private_sketch",
    "noisy_sketch",
    "exact_sketch",
    "merge_sketches",
    "DEFAULT_NUMERATOR_SHARE",
]

#: eps_num / eps, the paper's split of the budget between the sum and the count.
DEFAULT_NUMERATOR_SHARE = 0.98
FILE_FORMAT = "marketplace.sketch"
FILE_VERSION = 1
MECHANISMS = ("laplace", "gaussian")


class SketchFileError(ValueError):
    """A file that is not a valid saved sketch (wrong format, missing or malformed fields)."""


@dataclass(frozen=True, eq=False)
class SketchRelease:
    """One released sketch (or the merge of several over disjoint datasets).

    ``numerator`` is sum Phi(x_i) + xi, ``count`` is n + zeta; ``numerator_variance`` and
    ``count_variance`` are the variances of one coordinate of xi and of zeta (0 for an exact
    sketch); ``map_fingerprint`` identifies the public feature map; ``epsilon``/``delta`` is the
    guarantee towards every record (``math.inf``/0 for an exact, non-private sketch); ``parts`` is
    how many releases were merged into this one; ``attributes`` names the sketched attributes in
    order (the data's columns; empty: unnamed), metadata that a saved file keeps for ``marketplace
    sketch`` and that no estimate depends on.
    """

    numerator: np.ndarray
    count: float
    numerator_variance: float
    count_variance: float
    map_fingerprint: str
    epsilon: float
    delta: float
    mechanism: str
    parts: int = 1
    attributes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        owner = "SketchRelease"
        numerator = np.array(self.numerator, dtype=np.float64)
        if numerator.ndim != 1 or numerator.size == 0 or not np.isfinite(numerator).all():
            raise ValueError(
                f"The 'numerator' parameter of {owner} must be a non-empty finite 1-D array. "
                f"Got shape {numerator.shape} instead."
            )
        numerator.setflags(write=False)
        object.__setattr__(self, "numerator", numerator)
        for name in ("count", "numerator_variance", "count_variance"):
            value = getattr(self, name)
            if not is_real(value) or not math.isfinite(value) or (name != "count" and value < 0):
                kind = "a finite real number" if name == "count" else "a finite real number >= 0"
                raise ValueError(f"The '{name}' parameter of {owner} must be {kind}. Got {value!r} instead.")
            object.__setattr__(self, name, float(value))
        if not is_real(self.epsilon) or not self.epsilon > 0:
            raise ValueError(
                f"The 'epsilon' parameter of {owner} must be a positive real number (inf for an exact "
                f"sketch). Got {self.epsilon!r} instead."
            )
        if not is_real(self.delta) or not 0 <= self.delta < 1:
            raise ValueError(f"The 'delta' parameter of {owner} must be in [0, 1). Got {self.delta!r} instead.")
        object.__setattr__(self, "epsilon", float(self.epsilon))
        object.__setattr__(self, "delta", float(self.delta))
        for name in ("map_fingerprint", "mechanism"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise TypeError(
                    f"The '{name}' parameter of {owner} must be a non-empty str. Got {getattr(self, name)!r} instead."
                )
        object.__setattr__(self, "parts", check_int(owner, "parts", self.parts))
        names = self.attributes
        if isinstance(names, (str, bytes)) or not all(isinstance(n, str) and n for n in names):
            raise TypeError(
                f"The 'attributes' parameter of {owner} must be a sequence of non-empty str. Got {names!r} instead."
            )
        object.__setattr__(self, "attributes", tuple(names))

    def __repr__(self) -> str:
        return (
            f"SketchRelease(m={self.n_features}, count={self.count:.6g}, epsilon={self.epsilon!r}, "
            f"delta={self.delta!r}, mechanism={self.mechanism!r}, parts={self.parts}, "
            f"map={self.map_fingerprint[:12]!r})"
        )

    @property
    def n_features(self) -> int:
        return int(self.numerator.size)

    @property
    def is_private(self) -> bool:
        """False for an exact sketch (no noise)."""
        return math.isfinite(self.epsilon)

    @property
    def n_estimate(self) -> float:
        """The dataset size as the consumer sees it: the noisy count, floored at 1 (a noisy count
        can be <= 0 for a tiny dataset; flooring is post-processing)."""
        return max(self.count, 1.0)

    @property
    def z(self) -> np.ndarray:
        """The sketch z = (sum Phi + xi) / (n + zeta): a DP estimate of the mean of Phi."""
        return self.numerator / self.n_estimate

    def check_map(self, feature_map: FeatureMap, *, owner: str) -> None:
        """Refuse a feature map other than the one this sketch was made with."""
        if not isinstance(feature_map, FeatureMap):
            raise TypeError(
                f"The 'feature_map' parameter of {owner} must be a FeatureMap. "
                f"Got {type(feature_map).__name__} instead."
            )
        if feature_map.fingerprint != self.map_fingerprint or feature_map.n_features != self.n_features:
            raise ValueError(
                f"The 'feature_map' parameter of {owner} must be the map the sketch was made with "
                f"(fingerprint {self.map_fingerprint[:12]}...). Got {feature_map!r} instead."
            )

    def save(self, path: str | Path) -> Path:
        """Write the release to ``path`` (an .npz archive, no pickles) and return the path."""
        path = Path(path)
        with open(path, "wb") as handle:
            np.savez(
                handle,
                format=np.array(FILE_FORMAT),
                version=np.array(FILE_VERSION),
                numerator=self.numerator,
                count=np.array(self.count),
                numerator_variance=np.array(self.numerator_variance),
                count_variance=np.array(self.count_variance),
                map_fingerprint=np.array(self.map_fingerprint),
                epsilon=np.array(self.epsilon),
                delta=np.array(self.delta),
                mechanism=np.array(self.mechanism),
                parts=np.array(self.parts),
                attributes=np.array(self.attributes, dtype=str),  # empty: unnamed (a file without it: the same)
            )
        return path

    @classmethod
    def load(cls, path: str | Path) -> SketchRelease:
        """Read a release written by :meth:`save`.

        Raises FileNotFoundError when there is no such file and :class:`SketchFileError` when
        the file is not a valid sketch.
        """
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"No sketch file at {str(path)!r}.")
        try:
            with np.load(path, allow_pickle=False) as archive:
                fields = {key: archive[key] for key in archive.files}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
            raise SketchFileError(
                f"{str(path)!r} is not a sketch file (an .npz archive written by SketchRelease.save): {exc}"
            ) from None
        if str(fields.get("format", "")) != FILE_FORMAT:
            raise SketchFileError(
                f"{str(path)!r} is not a sketch file: its 'format' field is "
                f"{fields.get('format')!r}, expected {FILE_FORMAT!r}."
            )
        if fields.get("version") is None or int(fields["version"]) != FILE_VERSION:
            raise SketchFileError(
                f"{str(path)!r} is a sketch file of version {fields.get('version')!r}; "
                f"this code reads version {FILE_VERSION}."
            )
        names = (
            "numerator",
            "count",
            "numerator_variance",
            "count_variance",
            "map_fingerprint",
            "epsilon",
            "delta",
            "mechanism",
            "parts",
        )
        missing = [name for name in names if name not in fields]
        if missing:
            raise SketchFileError(f"{str(path)!r} is not a complete sketch file: missing {', '.join(missing)}.")
        try:
            scalars = {name: fields[name].item() for name in names if name != "numerator"}
            attributes = tuple(str(a) for a in fields["attributes"].tolist()) if "attributes" in fields else ()
            return cls(numerator=fields["numerator"], **scalars, attributes=attributes)
        except (TypeError, ValueError) as exc:
            raise SketchFileError(f"{str(path)!r} holds an invalid sketch: {exc}") from None


def _check_map(owner: str, feature_map: object) -> FeatureMap:
    if not isinstance(feature_map, FeatureMap):
        raise TypeError(
            f"The 'feature_map' parameter of {owner} must be a FeatureMap (RFF, RACE, Histogram). "
            f"Got {type(feature_map).__name__} instead."
        )
    return feature_map


ACCOUNT = "owner"
"""The owner's one ledger (named after the owner in a report)."""
COUNT = "laplace count"
"""The release of the noisy row count, by the name its ledger records."""


def sum_release(mechanism: str) -> str:
    """The name the ledger records for the noisy sum of features under ``mechanism``."""
    return f"{mechanism} sum of features"


def sketch_releases(
    *,
    epsilon: float,
    mechanism: str,
    delta: float | None,
    numerator_share: float,
    l1_sensitivity: float,
    l2_sensitivity: float,
    account: str = ACCOUNT,
    to: tuple[str, ...] = ("curator", "consumer"),
) -> tuple[Release, Release]:
    """The two releases of one sketch at total budget ``epsilon`` (and ``delta``, all of it on a
    Gaussian sum): the sum of features at eps_num = ``numerator_share`` * ``epsilon``, calibrated to
    the map's L1 (Laplace) or L2 (Gaussian) sensitivity, and the Laplace count at ``epsilon`` - eps_num."""
    gaussian = mechanism == "gaussian"
    eps_num = numerator_share * epsilon
    total = Release(
        name=sum_release(mechanism),
        account=account,
        to=to,
        mechanism=mechanism,
        sensitivity=l2_sensitivity if gaussian else l1_sensitivity,
        norm="L2" if gaussian else "L1",
        eps=eps_num,
        delta=float(delta or 0.0) if gaussian else 0.0,
    )
    count = Release(name=COUNT, account=account, to=to, mechanism="laplace", sensitivity=1.0, eps=epsilon - eps_num)
    return total, count


def private_sketch(
    X: ArrayLike,
    feature_map: FeatureMap,
    *,
    epsilon: float,
    rng: np.random.Generator | None,
    mechanism: str = "laplace",
    delta: float | None = None,
    numerator_share: float = DEFAULT_NUMERATOR_SHARE,
    secure: bool = False,
    precision: str = "float32",
) -> SketchRelease:
    """The DP release of the dataset X (rows inside the map's box) with budget ``epsilon``
    (and ``delta`` for the Gaussian mechanism); see the module docstring for the noise. The split
    of ``epsilon`` is the one an owner's release plan declares
    (:func:`sketch_releases`), drawn by :func:`noisy_sketch`.

    ``precision`` is the working precision of the features (see :meth:`RFF.sum_features`):
    float32 trigonometry is several times faster and its error (~1e-7 per value) is far below the
    noise.
    """
    owner = "private_sketch"
    fmap = _check_map(owner, feature_map)
    epsilon = check_positive(owner, "epsilon", epsilon)
    mechanism = check_choice(owner, "mechanism", mechanism, MECHANISMS)
    share = check_fraction(owner, "numerator_share", numerator_share)
    check_precision(owner, precision)
    if mechanism == "laplace" and delta not in (None, 0, 0.0):
        raise ValueError(
            f"The 'delta' parameter of {owner} must be None with mechanism='laplace' (pure eps-DP). "
            f"Got {delta!r} instead; use mechanism='gaussian' for (eps, delta)-DP."
        )
    if mechanism == "gaussian" and delta is None:
        raise ValueError(f"The 'delta' parameter of {owner} must be given with mechanism='gaussian'. Got None instead.")
    numerator, count = sketch_releases(
        epsilon=epsilon,
        mechanism=mechanism,
        delta=delta,
        numerator_share=share,
        l1_sensitivity=fmap.l1_sensitivity,
        l2_sensitivity=fmap.l2_sensitivity,
        to=("the caller",),
    )
    return noisy_sketch(
        X,
        fmap,
        numerator=numerator,
        count=count,
        epsilon=epsilon,
        delta=0.0 if mechanism == "laplace" or delta is None else float(delta),  # gaussian: checked above
        rng=rng,
        secure=secure,
        precision=precision,
    )


def noisy_sketch(
    X: ArrayLike,
    feature_map: FeatureMap,
    *,
    numerator: Release,
    count: Release,
    epsilon: float,
    delta: float,
    rng: np.random.Generator | None,
    secure: bool = False,
    precision: str = "float32",
    released: Callable[[str, Any], Any] | None = None,
) -> SketchRelease:
    """The DP release of the dataset X with the noise of two planned releases
    (:class:`marketplace.privacy.plan.Release`, as :mod:`marketplace.protocols.sketch.plan` declares
    them): ``numerator``, the sum of features (Laplace at its eps, or Gaussian at its (eps, delta)),
    and ``count``, the Laplace count, each calibrated to the release's own sensitivity, which must
    cover the map's (L1 for Laplace, L2 for Gaussian; 1 for the count). ``epsilon``/``delta`` is the
    guarantee the sketch states (the two releases composed). ``released(name, output)``, when given,
    is what each release's output passes through as it leaves (a plan's
    :meth:`~marketplace.privacy.plan.ReleasePlan.released`)."""
    owner = "noisy_sketch"
    fmap = _check_map(owner, feature_map)
    check_precision(owner, precision)
    mechanism = check_choice(owner, "numerator.mechanism", numerator.mechanism, MECHANISMS)
    bound = fmap.l1_sensitivity if mechanism == "laplace" else fmap.l2_sensitivity
    for name, release, least in (("numerator", numerator, bound), ("count", count, 1.0)):
        if release.sensitivity < least * (1 - 1e-12):
            raise ValueError(
                f"The '{name}' parameter of {owner} must be calibrated to a sensitivity of at least {least!r} "
                f"(the map's). Got {release.sensitivity!r} instead."
            )
    if count.mechanism != "laplace" or count.eps is None or count.delta:
        raise ValueError(f"The 'count' parameter of {owner} must be a pure eps-DP Laplace release. Got {count!r}.")
    if numerator.eps is None:
        raise ValueError(f"The 'numerator' parameter of {owner} must be an eps-DP release. Got {numerator!r}.")
    X = fmap.check(X, owner=owner)
    numerator_noise: Laplace | Gaussian
    if mechanism == "laplace":
        numerator_noise = Laplace(epsilon=numerator.eps, sensitivity=numerator.sensitivity, rng=rng, secure=secure)
        numerator_variance = 2.0 * numerator_noise.scale**2
    else:
        numerator_noise = Gaussian(
            epsilon=numerator.eps, delta=numerator.delta, sensitivity=numerator.sensitivity, rng=rng, secure=secure
        )
        numerator_variance = numerator_noise.sigma**2
    count_noise = Laplace(epsilon=count.eps, sensitivity=count.sensitivity, rng=rng, secure=secure)
    sums = fmap.sum_features(X, precision=precision)
    out = released or _as_it_is
    return SketchRelease(
        numerator=out(numerator.name, numerator_noise.randomise(sums)),
        count=out(count.name, count_noise.randomise(float(X.shape[0]))),
        numerator_variance=numerator_variance,
        count_variance=2.0 * count_noise.scale**2,
        map_fingerprint=fmap.fingerprint,
        epsilon=epsilon,
        delta=delta,
        mechanism=mechanism,
    )


def _as_it_is(name: str, output: Any) -> Any:
    return output


def exact_sketch(X: ArrayLike, feature_map: FeatureMap, *, precision: str = "float64") -> SketchRelease:
    """The sketch without noise (epsilon = inf): NOT private, for analysis and tests only."""
    fmap = _check_map("exact_sketch", feature_map)
    check_precision("exact_sketch", precision)
    X = fmap.check(X, owner="exact_sketch")
    return SketchRelease(
        numerator=fmap.sum_features(X, precision=precision),
        count=float(X.shape[0]),
        numerator_variance=0.0,
        count_variance=0.0,
        map_fingerprint=fmap.fingerprint,
        epsilon=math.inf,
        delta=0.0,
        mechanism="none",
    )


def merge_sketches(releases: Iterable[SketchRelease]) -> SketchRelease:
    """The release of the union of disjoint datasets: numerators, counts and noise variances add.

    Each record is in one dataset only, so the merge keeps the weakest guarantee of the parts
    (parallel composition): epsilon and delta are the largest of the parts'.
    """
    parts = list(releases) if not isinstance(releases, SketchRelease) else [releases]
    if not parts:
        raise ValueError("The 'releases' parameter of merge_sketches must hold at least one release. Got none instead.")
    for index, part in enumerate(parts):
        if not isinstance(part, SketchRelease):
            raise TypeError(
                f"The 'releases' parameter of merge_sketches must hold SketchRelease objects. "
                f"Got {type(part).__name__} at position {index} instead."
            )
        if part.map_fingerprint != parts[0].map_fingerprint or part.n_features != parts[0].n_features:
            raise ValueError(
                f"The 'releases' parameter of merge_sketches must hold sketches of one feature map. "
                f"Got map {part.map_fingerprint[:12]}... at position {index}, "
                f"{parts[0].map_fingerprint[:12]}... at position 0 instead."
            )
    return SketchRelease(
        numerator=np.sum([p.numerator for p in parts], axis=0),
        count=math.fsum(p.count for p in parts),
        numerator_variance=math.fsum(p.numerator_variance for p in parts),
        count_variance=math.fsum(p.count_variance for p in parts),
        map_fingerprint=parts[0].map_fingerprint,
        epsilon=max(p.epsilon for p in parts),
        delta=max(p.delta for p in parts),
        mechanism="+".join(sorted({p.mechanism for p in parts})),
        parts=sum(p.parts for p in parts),
    )
