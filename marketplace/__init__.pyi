"""Type stub of :mod:`marketplace`: the Python API, written once.

The package reads this file to import each name from its module on first use (``lazy_loader.attach_stub``),
and type checkers read it as the package's interface.
"""

from .api import (
    RunFailed as RunFailed,
)
from .api import (
    RunHandle as RunHandle,
)
from .api import (
    Validation as Validation,
)
from .api import (
    load as load,
)
from .api import (
    plan as plan,
)
from .api import (
    run as run,
)
from .api import (
    start as start,
)
from .api import (
    sweep as sweep,
)
from .api import (
    validate as validate,
)
from .datasets import DatasetMissing as DatasetMissing
from .market import MarketError as MarketError
from .market import MarketReport as MarketReport
from .market import play_market as play_market
from .runner.sweep import SweepResult as SweepResult
from .runtime.results import Report as Report
from .runtime.run_folder import RunFolderError as RunFolderError
from .scenario import Scenario as Scenario
from .scenario import ScenarioError as ScenarioError
from .service.api import Client as Client
from .service.api import Marketplace as Marketplace
from .service.api import catalogue as catalogue
from .service.api import connect as connect
from .service.api import quote as quote
from .service.api import request as request
from .service.api import resume as resume
from .service.api import serve as serve
from .service.asking import MaxPriceExceeded as MaxPriceExceeded
from .service.client import RequestFailed as RequestFailed
from .service.client import RequestRefused as RequestRefused
from .service.keys import add_consumer as add_consumer

__version__: str
__all__: list[str]
