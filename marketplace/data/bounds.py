"""The values an owner may hold: what keeps every bid and release it computes finite.

Each protocol computes, per row, sums of the row's coordinates, products with public random
directions (h1 = cos(x W + b)), squared norms (kernels, clipping) and means over rows. All of them
stay finite when every value is finite and every row's squared norm is: then ``|x_j|`` is below
``sqrt(max float64)`` (about 1.3e154) and ``x W`` cannot overflow. A value such as 1e308 is finite
but its square is not; an owner holding it would send NaN bids and be dropped in its first round.
:func:`check_rows` refuses such data when they are loaded, naming the row and the column, so the
owner learns it before the run starts instead of from the curator. The error never quotes the
value: an owner's refusal may reach other parties (a served owner's decline reason).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

LARGEST = float(np.sqrt(np.finfo(np.float64).max))
"""No coordinate may reach this: its square alone would overflow a float64."""


class RowNames(Protocol):
    """Names of a matrix's rows: ``rows[i]`` names row ``i`` (a list of names, or an object that
    makes each name when asked)."""

    def __getitem__(self, i: int, /) -> str: ...


BLOCK_VALUES = 1 << 20
"""Values checked at a time: the check's temporaries (about three times the block) stay near 24 MB
however large the matrix."""


def check_rows(
    X: np.ndarray, source: str, *, rows: RowNames | None = None, columns: Sequence[str] | None = None
) -> None:
    """Raise ValueError naming ``source``, the row and the column of the first value of ``X`` that
    is not finite (NaN, inf) or whose row's squared norm overflows (a coordinate of magnitude near
    1e154 or more). ``rows[i]`` names row ``i`` (say ``line 12``; default ``row i``), ``columns[j]``
    names column ``j`` (default ``column j``). The rows are checked a block at a time, so the check
    needs little memory beside ``X``."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.size == 0:
        return
    check = RowCheck(source, columns=columns)
    step = max(1, BLOCK_VALUES // X.shape[1])
    for start in range(0, X.shape[0], step):
        check.add(X[start : start + step], start, rows)
    check.done()


class RowCheck:
    """:func:`check_rows` over a matrix that arrives a block of rows at a time (say, while a file
    is read): :meth:`add` each block, then :meth:`done` raises the error :func:`check_rows` would
    have raised for the whole matrix."""

    def __init__(self, source: str, *, columns: Sequence[str] | None = None) -> None:
        self.source, self.columns = source, columns
        self.bad = 0
        """Rows found so far whose values are not finite or whose squared norm overflows."""
        self._first: tuple[str, np.ndarray] | None = None

    def add(self, block: np.ndarray, start: int, rows: RowNames | None = None) -> None:
        """Check ``block``, the rows ``start``, ``start + 1``, ... of the matrix; ``rows`` names
        the matrix's rows (``rows[start]`` is the block's first), as in :func:`check_rows`."""
        block = np.asarray(block, dtype=np.float64)
        if block.ndim != 2 or block.size == 0:
            return
        finite = np.isfinite(block)
        with np.errstate(over="ignore", invalid="ignore"):
            clean = np.where(finite, block, 0.0)
            norms = np.einsum("ij,ij->i", clean, clean)
        bad = np.flatnonzero(~finite.all(axis=1) | ~np.isfinite(norms))
        if not bad.size:
            return
        if self._first is None:
            r = start + int(bad[0])
            self._first = (rows[r] if rows is not None else f"row {r}", block[bad[0]].copy())
        self.bad += int(bad.size)

    def done(self) -> None:
        """Raise ValueError naming the first bad row's source, row and column, if any block had one."""
        if self._first is None:
            return
        where_row, row = self._first
        finite = np.isfinite(row)
        if not finite.all():
            j = int(np.flatnonzero(~finite)[0])
            problem = "holds a value that is not finite: values must be finite numbers"
        else:
            j = int(np.argmax(np.abs(row)))
            problem = (
                "holds a value too large (its row's squared norm overflows; every value must stay well "
                f"below {LARGEST:.2g} in magnitude, or the bids and releases computed from it are not finite)"
            )
        where_col = repr(self.columns[j]) if self.columns is not None else f"{j}"
        raise ValueError(
            f"{self.source}: {where_row}, column {where_col} {problem}; "
            f"{_more(self.bad)}rescale the data or remove the row"
        )


def _more(bad: int) -> str:
    return f"{bad} rows have such values; " if bad > 1 else ""
