"""Type stub of :mod:`marketplace.market`: its public names, written once (read by ``lazy_loader.attach_stub``
at run time and by type checkers)."""

from .report import MarketReport as MarketReport
from .run import play as play, play_market as play_market
from .spec import (
    MarketError as MarketError,
    MarketSpec as MarketSpec,
    is_market as is_market,
    read_market as read_market,
)
