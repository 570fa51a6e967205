"""Message kinds are plain msgspec Structs declared in their modules, ``class Hello(Body, kind="hello",
frozen=True)``: the class the type checker sees is the class the codec decodes into, registered under
its kind when declared, and a kind's name is declared once."""

from __future__ import annotations

import importlib
import sys
import typing

import msgspec
import pytest

from marketplace.messages import KINDS
from marketplace.messages.kinds import Hello
from marketplace.messages.structs import Body, wire_type
from marketplace.schema import Range

MODULES = [
    "marketplace.messages.kinds",
    "marketplace.protocols.summarize.messages",
    "marketplace.protocols.stc.messages",
    "marketplace.protocols.sketch.messages",
    "marketplace.protocols.pfds.messages",
]
"""The shipped modules declaring kinds (the example plug-in's are checked where it is imported:
tests/messages/test_typed_dispatch.py, whose import adds them to KINDS)."""


@pytest.fixture(scope="module", autouse=True)
def every_kind_declared() -> None:
    for module in MODULES:
        importlib.import_module(module)


def test_every_kind_is_the_class_its_module_declares_under_its_name():
    for name, cls in KINDS.items():
        assert issubclass(cls, Body) and cls.KIND == name
        assert getattr(sys.modules[cls.__module__], cls.__name__) is cls, f"{name}: not the module's own class"
        config = cls.__struct_config__
        assert config.frozen and config.forbid_unknown_fields and config.tag is None, name


def test_msgspec_decodes_with_the_wire_types_of_the_declared_hints():
    for cls in KINDS.values():
        types = {f.name: f.type for f in msgspec.structs.fields(cls)}
        assert set(types) == set(cls.HINTS), cls.KIND
        for name, hint in cls.HINTS.items():
            assert typing.get_type_hints(cls, include_extras=True)[name] == wire_type(hint, name), (cls.KIND, name)


def test_a_kind_declared_twice_is_refused_and_the_first_declaration_kept():
    with pytest.raises(RuntimeError, match="message kind 'hello' declared twice"):

        class Again(Body, kind="hello", frozen=True):
            role: str

    assert KINDS["hello"] is Hello


def test_a_kind_cannot_derive_from_another_kind():
    before = dict(KINDS)
    with pytest.raises(TypeError, match="cannot derive from another kind"):

        class Louder(Hello, kind="test_louder_hello", frozen=True):
            volume: typing.Annotated[int, Range(min=0)] = 0

    assert KINDS == before


def test_a_kind_needs_a_name():
    before = dict(KINDS)
    with pytest.raises(TypeError, match="non-empty string"):

        class Nameless(Body, kind="", frozen=True):
            x: int

    assert KINDS == before
