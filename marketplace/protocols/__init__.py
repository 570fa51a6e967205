"""Pure algorithm cores of the marketplace protocols: plain functions on numpy arrays, no I/O.

Each protocol lives in its own subpackage (``summarize``, ``pfds``, ``sketch``, ``stc``). The roles
(curator, owner, consumer) call these cores; the cores never call the roles or touch a socket, so
every rule can be tested on its own and reused from a notebook.
"""
