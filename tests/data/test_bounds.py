"""marketplace.data.bounds: the check of an owner's values, whole or a block of rows at a time."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from marketplace.data import bounds
from marketplace.data.bounds import RowCheck, check_rows

VALUES = st.sampled_from([0.0, 1.0, -2.5, 1e150, -1e160, 1e200, 1e308, np.inf, -np.inf, np.nan])


def error_of(call) -> str | None:
    try:
        call()
    except ValueError as err:
        return str(err)
    return None


@given(rows=st.integers(1, 9), cols=st.integers(1, 4), data=st.data(), block=st.integers(1, 12))
def test_a_block_at_a_time_finds_what_the_whole_matrix_check_finds(rows, cols, data, block):
    X = np.array(data.draw(st.lists(VALUES, min_size=rows * cols, max_size=rows * cols)), dtype=np.float64).reshape(
        rows, cols
    )
    names = [f"line {i + 2}" for i in range(rows)]
    whole = error_of(lambda: check_rows(X, "f.csv", rows=names, columns=list("abcd")[:cols]))
    step = max(1, block // cols)
    check = RowCheck("f.csv", columns=list("abcd")[:cols])
    for start in range(0, rows, step):
        check.add(X[start : start + step], start, names)
    assert error_of(check.done) == whole


def test_check_rows_names_the_first_bad_row_and_counts_them_all_across_blocks(monkeypatch):
    monkeypatch.setattr(bounds, "BLOCK_VALUES", 4)
    X = np.zeros((10, 2))
    X[6, 1], X[8, 0] = 1e200, np.nan
    with pytest.raises(ValueError, match=r"^s: row 6, column 1 holds a value too large .*; 2 rows have such values; "):
        check_rows(X, "s")
