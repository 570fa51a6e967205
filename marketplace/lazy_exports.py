"""Names a package exports but imports only on first use (PEP 562's module ``__getattr__``).

Every process that reads a scenario loads each protocol's registration, and with it the protocol's
package; a package that imported all its cores at once would cost each of those processes
scikit-learn's and SciPy's imports. A package declares instead which module each public name
comes from, and binds the two module functions this returns::

    _EXPORTS = {"mmd2": ".kernel", ...}
    __getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, namespace: dict[str, Any],
                 exports: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` (whose globals are ``namespace``) for
    ``exports``, public name -> relative module. The first use of a name imports its module and
    binds every name that module exports (so a function named like its own module is the function
    again once that module is imported)."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        imported = importlib.import_module(module, package)
        for other, home in exports.items():
            if home == module:
                namespace[other] = getattr(imported, other)
        return namespace[name]

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(namespace.get("__all__", exports)))

    return __getattr__, __dir__
