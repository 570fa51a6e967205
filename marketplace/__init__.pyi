"""Type stub of :mod:`marketplace`: the Python API, written once.

The package reads this file to import each name from its module on first use (``lazy_loader.attach_stub``),
and type checkers read it as the package's interface.
"""

from .api import (
    RunFailed as RunFailed,
    RunHandle as RunHandle,
    Validation as Validation,
    load as load,
    plan as plan,
    run as run,
    start as start,
    sweep as sweep,
    validate as validate,
)
from .datasets import DatasetMissing as DatasetMissing
from .market import MarketError as MarketError, MarketReport as MarketReport, play_market as play_market
from .runner.results import Report as Report, SweepResult as SweepResult
from .runner.run import RunFolderError as RunFolderError
from .scenario import Scenario as Scenario, ScenarioError as ScenarioError
from .service.api import Marketplace as Marketplace, request as request, serve as serve
from .service.client import RequestRefused as RequestRefused

__version__: str
__all__: list[str]
