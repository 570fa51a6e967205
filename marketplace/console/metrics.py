"""``/metrics`` of the operator's console: what ``STATE/server.json`` says, in Prometheus's text
exposition format (version 0.0.4), so a Prometheus server can scrape a served marketplace.

Every figure is one the operator's page shows: sessions by state (gauges of those running and
queued, counters of those ended by status since the server started, ``refused`` among them), the
owners and those present, the agents started again, and summaries of the completed sessions' wait and
wall times (quantiles over the sessions ``server.json`` lists: its newest 200).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from marketplace.console.operator_view import ended_counts, latency

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _value(x: float) -> str:
    """A sample's value as the format writes it: NaN, +Inf, -Inf, or the number."""
    x = float(x)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    return str(int(x)) if x.is_integer() and abs(x) < 2**53 else repr(x)


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _family(name: str, kind: str, help_text: str, samples: list[tuple[str, dict[str, str], float]]) -> list[str]:
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
    for sample, labels, value in samples:
        inner = ",".join(f'{k}="{_label(v)}"' for k, v in labels.items())
        lines.append(f"{sample}{{{inner}}} {_value(value)}" if inner else f"{sample} {_value(value)}")
    return lines


def metrics_text(status: Mapping[str, Any] | None) -> str:
    """The exposition of ``status`` (``server.json``); only ``marketplace_up 0`` before the server wrote one."""
    lines = _family(
        "marketplace_up", "gauge", "1 when the server's status file reads", [("marketplace_up", {}, status is not None)]
    )
    if status is None:
        return "\n".join(lines) + "\n"
    sessions = list(status.get("sessions") or [])
    lines += _family(
        "marketplace_sessions",
        "gauge",
        "Sessions running now and requests queued now",
        [
            ("marketplace_sessions", {"state": "running"}, len(status.get("running") or [])),
            ("marketplace_sessions", {"state": "queued"}, len(status.get("queued") or [])),
        ],
    )
    counts = ended_counts(status)
    lines += _family(
        "marketplace_sessions_ended",
        "counter",
        "Sessions ended since the server started, by status",
        [("marketplace_sessions_ended_total", {"status": s}, n) for s, n in sorted(counts.items())],
    )
    lines += _family(
        "marketplace_requests_refused",
        "counter",
        "Requests refused since the server started (nothing of theirs ran)",
        [("marketplace_requests_refused_total", {}, counts.get("refused", 0))],
    )
    lines += _family(
        "marketplace_owners", "gauge", "The marketplace's owners", [("marketplace_owners", {}, status.get("owners", 0))]
    )
    lines += _family(
        "marketplace_owners_present",
        "gauge",
        "Owners whose agents are connected now",
        [("marketplace_owners_present", {}, status.get("owners_present", 0))],
    )
    lines += _family(
        "marketplace_agent_restarts",
        "counter",
        "Owner agents the server started again",
        [("marketplace_agent_restarts_total", {}, status.get("agent_restarts", 0))],
    )
    lines += _family(
        "marketplace_max_running",
        "gauge",
        "The most sessions that ran at once",
        [("marketplace_max_running", {}, status.get("max_running", 0))],
    )
    for key, figures in latency(sessions).items():
        name = f"marketplace_session_{key.removesuffix('_s')}_seconds"
        samples = [(name, {"quantile": str(q)}, v) for q, v in figures["quantiles"].items() if v is not None]
        samples += [(f"{name}_sum", {}, figures["sum"]), (f"{name}_count", {}, figures["count"])]
        what = "queued to started" if key == "wait_s" else "started to ended"
        lines += _family(name, "summary", f"Completed sessions' time {what} (the sessions server.json lists)", samples)
    return "\n".join(lines) + "\n"
