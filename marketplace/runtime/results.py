"""What a run gives back to Python: :class:`Report`, a typed view of ``report.json`` (a sweep's
:class:`~marketplace.runner.sweep.SweepResult` holds one per run).

A :class:`Report` holds the report exactly as ``report.json`` stores it (``report.raw``, plain
JSON values) and names its sections: ``status``, ``metrics``, ``parsimony``, ``privacy``, ``messages``
(with ``messages_by_kind`` and ``messages_by_party``), ``timing``, ``history``, ``failures`` and the
protocol's own sections (``outputs``; ``selection`` for the summarize protocol). ``save`` writes the
same bytes the runner writes, with the same function; ``Report.load`` reads one back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

REPORT_FILE = "report.json"


@cache
def common_keys() -> frozenset[str]:
    """The report keys every protocol's report may hold (``marketplace/report.schema.json``); the
    others are the protocol's own sections."""
    schema = json.loads(resources.files("marketplace").joinpath("report.schema.json").read_text(encoding="utf-8"))
    return frozenset(schema["properties"]) | {"history"}


def _plain(report: dict[str, Any]) -> dict[str, Any]:
    """``report`` as ``report.json`` holds it (numpy values as JSON numbers and lists)."""
    from marketplace.runtime.json_files import json_default

    return json.loads(json.dumps(report, default=json_default))


def report_path(path: str | Path) -> Path:
    """``path`` itself for a file, ``path/report.json`` for a run folder."""
    p = Path(path)
    return p / REPORT_FILE if p.is_dir() else p


@dataclass(frozen=True, eq=False)
class Report:
    """One run's report. ``raw`` is ``report.json`` as a dict; the attributes name its sections
    (``None`` when the report has no such section). ``folder`` is the run folder, when known."""

    raw: dict[str, Any]
    folder: Path | None = None

    @classmethod
    def from_dict(cls, report: dict[str, Any], folder: str | Path | None = None) -> Report:
        """A report from the runner's dict (converted to the plain JSON values it is saved as)."""
        return cls(_plain(report), Path(folder) if folder is not None else None)

    @classmethod
    def load(cls, path: str | Path) -> Report:
        """Read ``report.json``, or the ``report.json`` of the run folder ``path``."""
        file = report_path(path)
        try:
            raw = json.loads(file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise FileNotFoundError(f"{file}: no such report (a run folder holds report.json)") from None
        except ValueError as err:
            raise ValueError(f"{file}: not a report (not valid JSON: {err})") from None
        if not isinstance(raw, dict) or "status" not in raw or "protocol" not in raw:
            raise ValueError(f"{file}: not a report (expected a JSON object with status and protocol)")
        return cls(raw, file.parent)

    def save(self, path: str | Path) -> Path:
        """Write the report as ``report.json`` exactly as the runner writes it (same function, same
        bytes). ``path`` is a file, or a folder to write ``report.json`` into; returns the file."""
        from marketplace.runtime.json_files import write_json

        p = Path(path)
        file = p / REPORT_FILE if p.is_dir() or not p.suffix else p
        write_json(file, self.raw)
        return file

    def __getitem__(self, key: str) -> Any:
        return self.raw[key]

    def get(self, key: str, default: Any = None) -> Any:
        """``raw.get(key, default)``."""
        return self.raw.get(key, default)

    def __repr__(self) -> str:
        where = f", {self.folder}" if self.folder is not None else ""
        return f"Report({self.scenario!r}, {self.protocol}, seed {self.seed}, {self.status}{where})"

    @property
    def status(self) -> str:
        """``completed`` or ``failed``."""
        return self.raw["status"]

    @property
    def completed(self) -> bool:
        return self.raw["status"] == "completed"

    @property
    def failures(self) -> list[str]:
        """Why the run failed (empty when it completed), the party at fault first."""
        return list(self.raw.get("failures") or [])

    @property
    def scenario(self) -> str | None:
        """The scenario's name (None in a report that states none)."""
        return self.raw.get("scenario")

    @property
    def protocol(self) -> str:
        return self.raw["protocol"]

    @property
    def seed(self) -> int | None:
        return self.raw.get("seed")

    @property
    def driver(self) -> str | None:
        return self.raw.get("driver")

    @property
    def outputs(self) -> dict[str, Any]:
        """The protocol's own sections (for summarize: selection, value, metrics, parsimony, ...)."""
        common = common_keys()
        return {k: v for k, v in self.raw.items() if k not in common}

    @property
    def selection(self) -> Any:
        """What the protocol selected, for a protocol that selects (summarize), else ``None``."""
        return self.raw.get("selection")

    @property
    def metrics(self) -> dict[str, Any] | None:
        """The protocol's quality figures and its baselines' (the ``metrics`` section)."""
        return self.raw.get("metrics")

    @property
    def references_absent(self) -> dict[str, str]:
        """The figures the report lacks, by key path (``metrics.baselines``, ...), and why: empty but
        for a marketplace described by its public schema, where nobody holds every party's rows to
        compute them from (:mod:`marketplace.reporting.absent`)."""
        return self.raw.get("references_absent") or {}

    @property
    def parsimony(self) -> dict[str, Any] | None:
        """How much of the owners' data the protocol touched (the ``parsimony`` section)."""
        return self.raw.get("parsimony")

    @property
    def privacy(self) -> dict[str, Any]:
        """The privacy ledgers, one per party that released something under a budget."""
        return self.raw.get("privacy") or {}

    @property
    def privacy_per_owner(self) -> dict[str, Any] | None:
        return self.raw.get("privacy_per_owner")

    @property
    def messages(self) -> dict[str, Any]:
        """Message totals, counts per kind and per party, and the sent/received consistency check."""
        return self.raw.get("messages") or {}

    @property
    def messages_by_kind(self) -> dict[str, dict[str, int]]:
        """``{kind: {"count", "bytes"}}``."""
        return self.messages.get("by_kind") or {}

    @property
    def messages_by_party(self) -> dict[str, dict[str, int]]:
        """``{party: {"sent", "received", "bytes_sent", "bytes_received"}}``."""
        return self.messages.get("by_party") or {}

    @property
    def timing(self) -> dict[str, Any]:
        """Wall time, and compute and transport time summed over parties and per party."""
        return self.raw.get("timing") or {}

    @property
    def history(self) -> Any:
        """The protocol's progress round by round (the ``history`` section), ``None`` when the
        report has none."""
        return self.raw.get("history")

    @property
    def owners_lost(self) -> dict[str, Any] | None:
        return self.raw.get("owners_lost")

    @property
    def config(self) -> dict[str, Any]:
        """The resolved scenario the run used."""
        return self.raw.get("config") or {}
