"""Roles tell message kinds apart by the class of the body's Struct, never by the kind's string.

Each protocol's ``*Message`` union must hold exactly the kinds its ``messages.py`` declares (a kind
left out of the union would be a kind no role's signature admits), and no role, curator base, node
or example role may dispatch on ``message.kind`` strings or on a handler table keyed by them.
"""

from __future__ import annotations

import importlib
import re
import sys
import typing
from pathlib import Path

import pytest

from marketplace.messages import KINDS, Envelope
from marketplace.messages.kinds import RuntimeMessage
from marketplace.messages.structs import Body

ROOT = Path(__file__).resolve().parents[2]
UNIONS = [
    ("marketplace.protocols.summarize.messages", "SummarizeMessage"),
    ("marketplace.protocols.stc.messages", "StcMessage"),
    ("marketplace.protocols.sketch.messages", "SketchMessage"),
    ("marketplace.protocols.pfds.messages", "PfdsMessage"),
    ("marketplace_example.messages", "NoisyCountMessage"),
    ("marketplace.messages.kinds", "RuntimeMessage"),
]
STRING_DISPATCH = re.compile(r"\.kind\s*(==|!=|in\b)|\.get\(\s*message\.kind\s*\)|\bkind\s*==\s*[\"']")
"""``message.kind == "x"``, ``kind in ("x", "y")``, ``{...}.get(message.kind)``."""


@pytest.fixture(scope="module", autouse=True)
def example_protocol_importable():
    path = str(ROOT / "tests" / "example_protocol")
    sys.path.insert(0, path)
    yield
    sys.path.remove(path)


@pytest.mark.parametrize("module, union", UNIONS)
def test_a_protocol_union_holds_exactly_the_kinds_its_module_declares(module, union):
    mod = importlib.import_module(module)
    members = set(typing.get_args(getattr(mod, union)))
    declared = {cls for cls in KINDS.values() if cls.__module__ == mod.__name__}
    assert members == declared, f"{module}.{union}: {sorted(c.KIND for c in members ^ declared)} differ"
    assert all(issubclass(cls, Body) for cls in members)


def test_the_envelope_body_is_a_typed_struct_not_any():
    hint = typing.get_type_hints(Envelope)["body"]
    assert hint is not typing.Any
    assert isinstance(hint, typing.TypeVar) and hint.__bound__ is not None


def test_runtime_kinds_are_matched_by_their_struct_class():
    hello, bye = KINDS["hello"], KINDS["bye"]
    assert set(typing.get_args(RuntimeMessage)) >= {hello, bye}
    match hello(role="owner", protocol="p", scenario="s"):
        case x if isinstance(x, bye):
            pytest.fail("a hello matched Bye")
        case _ as body:
            assert body.KIND == "hello"


def _role_sources() -> list[Path]:
    files = [
        *(ROOT / "marketplace" / "protocols").rglob("*.py"),
        *(ROOT / "marketplace" / "roles").rglob("*.py"),
        ROOT / "marketplace" / "transport" / "node.py",
        *(ROOT / "tests" / "example_protocol" / "marketplace_example").glob("*.py"),
    ]
    return [f for f in files if "def handle(" in f.read_text() or f.name in ("node.py", "curator.py", "lifetime.py")]


@pytest.mark.parametrize("path", _role_sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_role_dispatches_on_kind_strings(path):
    hits = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if STRING_DISPATCH.search(line) and "about_kind" not in line and ".dtype.kind" not in line
    ]
    assert not hits, "dispatch on kind strings; match on the body's Struct instead:\n" + "\n".join(hits)
