"""Bounded isotonic regression in NumPy alone, the same numbers as scikit-learn's to the last bit.

The consumer projects its CDF estimates and its higher moments with isotonic regression
(:mod:`.valid`). scikit-learn's ``IsotonicRegression(y_min, y_max, increasing).fit_transform(x, y)``
gives it, but importing scikit-learn (and the parts of SciPy it pulls in) costs a new consumer
process about 0.5 s of CPU for a few dozen numbers. :func:`isotonic_fit_transform` takes the same
steps with the same floating-point operations in the same order, so its result is bit for bit that
of scikit-learn 1.x on SciPy >= 1.12 (``tests/protocols/sketch/test_sketch_isotonic.py`` compares
them on random inputs, ties and decreasing fits included):

1. sort the points by (x, y) and pool the points of equal x (to within the float resolution) into
   one with the mean of their y's (scikit-learn's ``_make_unique``, all weights 1);
2. the pool-adjacent-violators pass (SciPy's ``optimize.isotonic_regression``: Busing 2022's O(n)
   form), on the reversed sequence for a decreasing fit, then clipped to [y_min, y_max];
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


def _pava(x: list[float], w: list[float]) -> list[float]:
    """The non-decreasing least-squares fit of ``x`` with weights ``w`` (Busing 2022, Algorithm 1,
    as SciPy implements it: ``>=`` on both violation checks)."""
    n = len(x)
    x, w = list(x), list(w)
    r = [0] * (n + 1)
    r[1] = 1
    b = 0
    xb_prev, wb_prev = x[0], w[0]
    i = 1
    while i < n:
        b += 1
        xb, wb = x[i], w[i]
        if xb_prev >= xb:
            b -= 1
            sb = wb_prev * xb_prev + wb * xb
            wb += wb_prev
            xb = sb / wb
            while i < n - 1 and xb >= x[i + 1]:
                i += 1
                sb += w[i] * x[i]
                wb += w[i]
                xb = sb / wb
            while b > 0 and x[b - 1] >= xb:
                b -= 1
                sb += w[b] * x[b]
                wb += w[b]
                xb = sb / wb
        x[b] = xb_prev = xb
        w[b] = wb_prev = wb
        r[b + 1] = i + 1
        i += 1
    out = [0.0] * n
    for k in range(b + 1):
        out[r[k] : r[k + 1]] = [x[k]] * (r[k + 1] - r[k])
    return out


def isotonic_fit_transform(x: np.ndarray, y: np.ndarray, *, y_min: float, y_max: float, increasing: bool) -> np.ndarray:
    """``IsotonicRegression(y_min=y_min, y_max=y_max, increasing=increasing).fit_transform(x, y)``
    for 1-D float arrays of one length (at least one point), without scikit-learn."""
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    if x.shape != y.shape or x.size == 0:
        raise ValueError(f"isotonic_fit_transform needs x and y of one non-zero length, got {x.shape} and {y.shape}")
    order = np.lexsort((y, x))
    ux, uy, uw = _pooled(x[order], y[order])
    values, weights = uy.tolist(), uw.tolist()
    if increasing:
        fitted = np.array(_pava(values, weights))
    else:
        fitted = np.array(_pava(values[::-1], weights[::-1])[::-1])
    np.clip(fitted, y_min, y_max, fitted)
    if len(fitted) == 1:
        return fitted.repeat(x.shape)
    keep = np.ones(len(fitted), dtype=bool)
    keep[1:-1] = np.logical_or(np.not_equal(fitted[1:-1], fitted[:-2]), np.not_equal(fitted[1:-1], fitted[2:]))
    return np.interp(x, ux[keep], fitted[keep])
