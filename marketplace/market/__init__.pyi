"""Type stub of :mod:`marketplace.market`: its public names, written once (read by ``lazy_loader.attach_stub``
at run time and by type checkers)."""

from .report import MarketReport as MarketReport
from .run import play as play
from .run import play_market as play_market
from .spec import (
    MarketError as MarketError,
)
from .spec import (
    MarketSpec as MarketSpec,
)
from .spec import (
    is_market as is_market,
)
from .spec import (
    read_market as read_market,
)
