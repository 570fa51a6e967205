"""marketplace.memo.IdentityMemo: a value per tuple of objects, recognised by identity, never by equality."""

from __future__ import annotations

import gc
import weakref

from marketplace.memo import IdentityMemo


def test_the_same_objects_get_the_kept_value_and_equal_but_other_objects_a_new_one():
    memo: IdentityMemo[str] = IdentityMemo(4)
    section, calls = {"a": 1}, []

    def compute(tag: str):
        return lambda: calls.append(tag) or tag

    assert memo.get((section,), compute("first")) == "first"
    assert memo.get((section,), compute("again")) == "first"
    assert memo.get(({"a": 1},), compute("equal")) == "equal"  # equal, not the same: computed
    assert memo.get((section, section), compute("pair")) == "pair"
    assert calls == ["first", "equal", "pair"]


class Section:
    """A configuration section stand-in that a weak reference can follow."""


def test_a_full_memo_forgets_everything_and_keeps_its_objects_alive_while_kept():
    memo: IdentityMemo[int] = IdentityMemo(2)
    objects = [Section() for _ in range(3)]
    for i, obj in enumerate(objects):
        memo.get((obj,), lambda i=i: i)
    assert memo.get((objects[2],), lambda: -1) == 2  # the third cleared the first two
    assert memo.get((objects[0],), lambda: -1) == -1
    made_here = Section()
    alive = weakref.ref(made_here)
    memo.get((made_here,), lambda: 7)
    del made_here
    gc.collect()
    assert alive() is not None  # kept with its value: its id cannot name another object meanwhile
