"""Importing the libraries a party needs only at its end, in the background while its rounds run.

The summarize consumer needs scikit-learn only once the summary arrives, and importing it then
puts 1-2 s on the run's critical path; the consumer is idle during the rounds, so its process loads
it meanwhile (:attr:`marketplace.roles.Role.warm_imports` names what a role wants loaded).

Two threads must never import scikit-learn at once: its modules import each other, and a thread
that reaches a module the other is halfway through can get it partially initialised (seen as an
ImportError in a consumer). So the loading thread is started only after the role is built, and a
role calls :func:`wait_for_background_imports` before it first imports anything itself. Roles
that import scikit-learn during the rounds (a pfds agent fits a model) name no warm imports.
"""

from __future__ import annotations

import importlib
import threading

_lock = threading.Lock()
_loaders: list[threading.Thread] = []
"""The loading threads started in this process and not yet seen finished (a process that sends
several requests at once, from several threads, starts one per request)."""


def load_in_background(modules: tuple[str, ...]) -> None:
    """Import ``modules`` on a daemon thread of this process (nothing when ``modules`` is empty). A
    loader started while another runs waits for it first: two loaders never import at once."""
    if not modules:
        return
    with _lock:
        _loaders[:] = [t for t in _loaders if t.is_alive()]
        earlier = tuple(_loaders)

        def load() -> None:
            for thread in earlier:
                thread.join()
            for name in modules:
                importlib.import_module(name)

        loader = threading.Thread(target=load, name="warm-imports", daemon=True)
        loader.start()  # started before anyone can see it: a thread waiting never joins an unstarted one
        _loaders.append(loader)


def wait_for_background_imports() -> None:
    """Return once no background import started so far is running in this process (at once if none
    was started: the in-process driver, a test)."""
    with _lock:
        running = [t for t in _loaders if t is not threading.current_thread()]
    for thread in running:
        thread.join()
