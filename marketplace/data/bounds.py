"""The values an owner may hold: what keeps every bid and release it computes finite.

Each protocol computes, per row, sums of the row's coordinates, products with public random
directions (h1 = cos(x W + b)), squared norms (kernels, clipping) and means over rows. All of them
stay finite when every value is finite and every row's squared norm is: then ``|x_j|`` is below
``sqrt(max float64)`` (about 1.3e154) and ``x W`` cannot overflow. A value such as 1e308 is finite
but its square is not; an owner holding it would send NaN bids and be dropped in its first round.
:func:`check_rows` refuses such data when they are loaded, naming the row and the column, so the
owner learns it before the run starts instead of from the curator.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

LARGEST = float(np.sqrt(np.finfo(np.float64).max))
"""No coordinate may reach this: its square alone would overflow a float64."""


def check_rows(X: np.ndarray, source: str, *, rows: Sequence[str] | None = None,
               columns: Sequence[str] | None = None) -> None:
    """Raise ValueError naming ``source``, the row and the column of the first value of ``X`` that
    is not finite (NaN, inf) or whose row's squared norm overflows (a coordinate of magnitude near
    1e154 or more). ``rows[i]`` names row ``i`` (say ``line 12``; default ``row i``), ``columns[j]``
    names column ``j`` (default ``column j``)."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.size == 0:
        return
    finite = np.isfinite(X)
    with np.errstate(over="ignore", invalid="ignore"):
        norms = np.einsum("ij,ij->i", np.where(finite, X, 0.0), np.where(finite, X, 0.0))
    bad = np.flatnonzero(~finite.all(axis=1) | ~np.isfinite(norms))
    if not bad.size:
        return
    r = int(bad[0])
    row = X[r]
    if not finite[r].all():
        j = int(np.flatnonzero(~finite[r])[0])
        problem = f"holds {float(row[j])!r}: values must be finite numbers"
    else:
        j = int(np.argmax(np.abs(row)))
        problem = (f"holds {float(row[j])!r}: too large (its row's squared norm overflows; every value must stay well "
                   f"below {LARGEST:.2g} in magnitude, or the bids and releases computed from it are not finite)")
    where_row = rows[r] if rows is not None else f"row {r}"
    where_col = repr(columns[j]) if columns is not None else f"{j}"
    raise ValueError(f"{source}: {where_row}, column {where_col} {problem}; "
                     f"{_more(len(bad))}rescale the data or remove the row")


def _more(bad: int) -> str:
    return f"{bad} rows have such values; " if bad > 1 else ""
