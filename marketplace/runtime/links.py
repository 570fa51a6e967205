"""A party's link settings from the scenario (heartbeats, deadlines, limits, CURVE keys), and the
check that its own keys are there before it starts."""

from __future__ import annotations

from pathlib import Path

from marketplace.scenario import Scenario
from marketplace.transport.curve import CurveKeys
from marketplace.transport.link_settings import LinkSettings
from marketplace.transport.tuning import scaled_heartbeats


def link_settings(scenario: Scenario) -> LinkSettings:
    """Every party's link settings from ``transport``: heartbeats stretched with the number of
    parties (:func:`~marketplace.transport.zmq_driver.scaled_heartbeats`), the rest as written."""
    t = scenario.config.transport
    parties = scenario.config.parties.owners + 2
    interval, timeout = scaled_heartbeats(t.heartbeat_interval_s, t.heartbeat_timeout_s, parties)
    return LinkSettings(
        heartbeat_interval_s=interval,
        heartbeat_timeout_s=timeout,
        start_timeout_s=t.start_timeout_s,
        run_timeout_s=t.run_timeout_s,
        progress_timeout_s=t.progress_timeout_s,
        max_message_bytes=t.max_message_bytes,
        high_water_mark=t.high_water_mark,
        send_timeout_s=t.send_timeout_s,
        max_queued_frames=t.max_queued_frames,
        refusal_budget=t.refusal_budget,
        quarantine_s=t.quarantine_s,
        curve_keys=t.curve_keys if t.security == "curve" else None,
    )


def check_own_keys(scenario: Scenario, settings: LinkSettings, parties: list[str]) -> None:
    """Under CURVE, each of ``parties`` must find its own key pair in the key folder: a missing
    folder or key file fails here, before any work (ValueError, naming what to pass)."""
    if scenario.config.transport.security != "curve":
        return
    if settings.curve_keys is None:
        raise ValueError(
            "CURVE is on (transport.security) but no key folder was given: pass --keys DIR "
            "(made by `marketplace keys generate DIR --owners K`) or --insecure for development"
        )
    for party in parties:
        CurveKeys(Path(settings.curve_keys), party).own()
