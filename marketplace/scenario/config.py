"""The scenario: one frozen, validated description of a run (what to run, on which data, how)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

from marketplace.data.config import DataConfig
from marketplace.schema import Length, Range

PositiveFloat = Annotated[float, Range(min=0.0, min_open=True)]


@dataclass(frozen=True)
class PartiesConfig:
    owners: Annotated[int, Range(min=1, max=1024)] = 4
    """K, the number of data owners (party ids owner-1 ... owner-K)."""


@dataclass(frozen=True)
class TransportConfig:
    """ZeroMQ settings; the in-process driver ignores all but ``max_message_bytes``."""

    endpoint: str = "tcp://127.0.0.1:0"
    """Where the curator binds and the others connect; port 0 lets the runner pick a free port."""
    heartbeat_interval_s: PositiveFloat = 0.5
    heartbeat_timeout_s: PositiveFloat = 10.0
    start_timeout_s: PositiveFloat = 60.0
    run_timeout_s: PositiveFloat = 1800.0
    max_message_bytes: Annotated[int, Range(min=1024)] = 64 * 1024 * 1024
    high_water_mark: Annotated[int, Range(min=1)] = 10_000
    send_timeout_s: PositiveFloat = 10.0

    def __post_init__(self) -> None:
        if self.heartbeat_timeout_s <= 2 * self.heartbeat_interval_s:
            raise ValueError("heartbeat_timeout_s must exceed twice heartbeat_interval_s")
        if not self.endpoint.startswith(("tcp://", "ipc://")):
            raise ValueError(f"endpoint must start with tcp:// or ipc://, got {self.endpoint!r}")


@dataclass(frozen=True)
class SummarizeConfig:
    """The summarization protocol (DESIGN.md §3), non-private form."""

    rounds: Annotated[int, Range(min=1)] = 50
    """p: points added to the summary, one per round."""
    gamma: PositiveFloat = 0.1
    """RBF kernel exp(-gamma ||x - y||^2)."""
    features: Annotated[int, Range(min=2)] = 140
    """d: random Fourier features in h1."""
    verify_tolerance: Annotated[float, Range(min=0.0)] = 1e-9
    """Relative tolerance when the curator recomputes a received point's bid."""
    svm_c: PositiveFloat = 1.0
    """C of the linear SVM trained on each summary to measure downstream accuracy."""
    baselines: tuple[Literal["uniform", "exact_greedy"], ...] = ("uniform", "exact_greedy")


@dataclass(frozen=True)
class ScenarioConfig:
    name: Annotated[str, Length(min=1, max=200)]
    protocol: Literal["summarize"]
    seed: Annotated[int, Range(min=0, max=2**63 - 1)] = 0
    description: str = ""
    parties: PartiesConfig = field(default_factory=PartiesConfig)
    data: DataConfig = field(default_factory=DataConfig)
    summarize: SummarizeConfig = field(default_factory=SummarizeConfig)
    transport: TransportConfig = field(default_factory=TransportConfig)
