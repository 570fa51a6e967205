"""Bounded isotonic regression on NumPy and SciPy, the same numbers as scikit-learn's to the last bit.

The consumer projects its CDF estimates and its higher moments with isotonic regression
(:mod:`.valid`). scikit-learn's ``IsotonicRegression(y_min, y_max, increasing).fit_transform(x, y)``
gives it, but importing scikit-learn (and the parts of SciPy it pulls in) costs a new consumer
process about 0.5 s of CPU for a few dozen numbers; SciPy's optimize module alone costs about
0.15 s. :func:`isotonic_fit_transform` takes scikit-learn's steps with the same floating-point
operations in the same order, so its result is bit for bit that of scikit-learn on SciPy >= 1.12
(``tests/protocols/sketch/test_sketch_isotonic.py`` compares
them on random inputs, ties and decreasing fits included):

1. sort the points by (x, y) and pool the points of equal x (to within the float resolution) into
   one with the mean of their y's (scikit-learn's ``_make_unique``, all weights 1);
2. the pool-adjacent-violators pass, SciPy's ``optimize.isotonic_regression`` (which scikit-learn
   itself calls on SciPy >= 1.12), then clipped to [y_min, y_max];
3. the fitted steps evaluated back at every x by linear interpolation (``np.interp``, as SciPy's
   ``interp1d`` does for this case) after dropping the interior points equal to both neighbours.
"""

from __future__ import annotations

import numpy as np

__all__ = ["isotonic_fit_transform"]

RESOLUTION = float(np.finfo(np.float64).resolution)
"""Points of x closer than this are one point (scikit-learn's ``_make_unique``)."""


def _pooled(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(unique x, mean y per unique x, count per unique x) of points sorted by x."""
    xs: list[float] = []
    ys: list[float] = []
    ws: list[float] = []
    current_x, current_y, current_w = float(x[0]), 0.0, 0.0
    for xj, yj in zip(x.tolist(), y.tolist()):
        if xj - current_x >= RESOLUTION:
            xs.append(current_x)
            ws.append(current_w)
            ys.append(current_y / current_w)
            current_x, current_y, current_w = xj, yj * 1.0, 1.0
        else:
            current_w += 1.0
            current_y += yj * 1.0
    xs.append(current_x)
    ws.append(current_w)
    ys.append(current_y / current_w)
    return np.array(xs), np.array(ys), np.array(ws)


def isotonic_fit_transform(x: np.ndarray, y: np.ndarray, *, y_min: float, y_max: float, increasing: bool) -> np.ndarray:
    """``IsotonicRegression(y_min=y_min, y_max=y_max, increasing=increasing).fit_transform(x, y)``
    for 1-D float arrays of one length (at least one point), without scikit-learn."""
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    if x.shape != y.shape or x.size == 0:
        raise ValueError(f"isotonic_fit_transform needs x and y of one non-zero length, got {x.shape} and {y.shape}")
    order = np.lexsort((y, x))
    ux, uy, uw = _pooled(x[order], y[order])
    # SciPy's module, not scikit-learn's: importing scikit-learn is what this module spares a consumer
    from scipy.optimize import isotonic_regression

    fitted = np.asarray(isotonic_regression(uy, weights=uw, increasing=increasing).x, dtype=np.float64)
    np.clip(fitted, y_min, y_max, fitted)
    if len(fitted) == 1:
        return fitted.repeat(x.shape)
    keep = np.ones(len(fitted), dtype=bool)
    keep[1:-1] = np.logical_or(np.not_equal(fitted[1:-1], fitted[:-2]), np.not_equal(fitted[1:-1], fitted[2:]))
    return np.interp(x, ux[keep], fitted[keep])
