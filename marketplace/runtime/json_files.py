"""JSON files the runner writes whole (reports, a party's part of one), and the values they may hold."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import msgspec


def write_json(path: str | Path, data: Any, *, indent: int | None = 2) -> None:
    """Write ``data`` as JSON, whole: to a temporary file first, then renamed into place, so that a
    reader waiting for the file never sees half of it. (``indent=None`` for large files read by
    programs: the compact form, without the indenting pass.)"""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_whole(path, json_text(data, indent))


def write_text_whole(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) as ``path``, whole, in a folder that exists: to a temporary file first,
    then renamed into place (:func:`write_json` for a text already written)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        out.write(text)
    os.replace(tmp, path)


def json_text(data: Any, indent: int | None = 2) -> str:
    """``json.dumps(data, indent=indent, default=json_default)``, the same text byte for byte, but fast:
    ``json`` writes an indented text with its pure-Python encoder, so the compact text is written by its
    C encoder and indented by ``msgspec.json.format`` (C too), which keeps every token as it is (the
    floats' digits, the ``\\u`` escapes of ``ensure_ascii``, the keys' order) and lays the text out as
    ``json`` does. A text ``msgspec`` does not read (``NaN`` or ``Infinity``, which ``json`` writes and
    JSON has not; an escaped lone surrogate) is indented by ``json`` itself, as before."""
    return json_indented(json.dumps(data, default=json_default), data, indent)


def json_indented(compact: str, data: Any, indent: int | None = 2) -> str:
    """:func:`json_text` of ``data`` from its compact text ``compact`` (``json.dumps(data,
    default=json_default)``), when that is needed too: ``data`` is written once."""
    if indent is None:
        return compact
    try:
        return msgspec.json.format(compact, indent=indent)
    except msgspec.DecodeError:
        return json.dumps(data, indent=indent, default=json_default)


def json_default(value: Any) -> Any:
    """A value ``json`` cannot write by itself: numpy arrays and scalars as lists and numbers."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"cannot write {type(value).__name__} to JSON")
