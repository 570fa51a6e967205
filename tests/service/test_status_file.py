"""``server.json`` written at most once per turn of the server's loop, at once when a session ends, and
the JSON files written fast with the same text ``json`` writes."""

from __future__ import annotations

import json

import numpy as np

from marketplace.runtime import json_default, json_text
from marketplace.service.status import STATUS_FILE, StatusFile


def test_json_text_is_what_json_writes_byte_for_byte():
    data = {
        "é": 'x\u00e9\u2028"\\ \n',
        "floats": [0.1 + 0.2, 1e16, 5e-324, -0.0, 1.7976931348623157e308],
        "numpy": {"a": np.arange(3), "f": np.float64(0.1), "f32": np.float32(0.1), "i": np.int64(7)},
        "empty": [[], {}, [[]]],
        "n": None,
        "t": True,
        1: "int key",
    }
    for indent in (None, 1, 2):
        assert json_text(data, indent) == json.dumps(data, indent=indent, default=json_default)
    odd = {"nan": [float("nan"), float("inf")], "surrogate": "\ud800"}  # JSON has neither: json's own text
    assert json_text(odd, 2) == json.dumps(odd, indent=2)


def test_status_is_written_once_a_turn_and_at_once_when_a_session_ends(tmp_path):
    status = StatusFile(tmp_path, every_s=60.0)
    made = []

    def now_status() -> dict:
        made.append(1)
        return {"n": len(made)}

    status.write({"n": 0})
    status.changed()
    status.changed()
    status.flush(now_status, status.written_at + 1.0)  # not due: the last write was a second ago
    assert not made and json.loads((tmp_path / STATUS_FILE).read_text()) == {"n": 0}
    status.changed(ended=True)
    status.flush(now_status, status.written_at + 1.0)  # a session ended: written, with what changed before
    status.flush(now_status, status.written_at + 1.0)  # nothing changed since
    assert len(made) == 1 and json.loads((tmp_path / STATUS_FILE).read_text()) == {"n": 1}
    status.changed()
    status.flush(now_status, status.written_at + 61.0)  # due again
    assert json.loads((tmp_path / STATUS_FILE).read_text()) == {"n": 2}
    assert not (tmp_path / f"{STATUS_FILE}.tmp").exists()
