"""JSON files the runner writes whole (reports, a party's part of one), and the values they may hold."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_json(path: str | Path, data: Any, *, indent: int | None = 2) -> None:
    """Write ``data`` as JSON, whole: to a temporary file first, then renamed into place, so that a
    reader waiting for the file never sees half of it. (``indent=None`` for large files read by
    programs: the compact form is written by the C encoder, several times faster.)"""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=indent, default=json_default))
    os.replace(tmp, path)


def json_default(value: Any) -> Any:
    """A value ``json`` cannot write by itself: numpy arrays and scalars as lists and numbers."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"cannot write {type(value).__name__} to JSON")
