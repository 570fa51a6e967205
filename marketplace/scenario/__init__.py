"""Scenarios: the YAML description of a run, validated before anything starts."""

from marketplace.scenario.config import ScenarioConfig
from marketplace.scenario.load import Scenario, ScenarioError, load_scenario, parse_scenario

__all__ = ["Scenario", "ScenarioConfig", "ScenarioError", "load_scenario", "parse_scenario"]
