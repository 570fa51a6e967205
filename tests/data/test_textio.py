"""Labels read from text: whole numbers stay numbers, anything else becomes codes of its sorted
distinct values, and no label is changed or merged on the way."""

from __future__ import annotations

import numpy as np
import pytest

from marketplace.data.textio import label_codes


def test_whole_number_labels_are_kept_as_they_are():
    assert label_codes(["3", "-1", "3.0", "7"]).tolist() == [3, -1, 3, 7]


@pytest.mark.parametrize(
    "values",
    [["inf", "1", "0"], ["-inf", "2"], ["nan", "1"], ["1e300", "2"]],
    ids=["inf", "minus-inf", "nan", "beyond-int64"],
)
def test_a_label_no_int64_holds_makes_the_labels_codes(values):
    codes = label_codes(values)
    assert codes.dtype == np.int64
    assert sorted(set(codes.tolist())) == list(range(len(set(values))))


def test_labels_past_the_exact_integers_of_a_float_are_not_merged():
    big = ["12345678901234567890", "12345678901234567891"]  # one float64, two labels
    assert len(set(label_codes(big).tolist())) == 2
