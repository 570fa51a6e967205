"""Read-only web consoles of a served marketplace, one for each party, in the browser.

* :mod:`.operator`: the operator's (``marketplace serve --console HOST:PORT``): the sessions running,
  queued and ended, their latency, the owners present, declines, each owner's public standing, and
  ``/metrics`` in Prometheus's text format; read from ``STATE/server.json`` and the session folders.
* :mod:`.owner`: an owner's (``marketplace agent --console HOST:PORT``): its own ledger over time
  (budget spent, sales, earnings, declines), with plots; read from its ledger files, opened read-only.
* :mod:`.consumer`: a consumer's (``marketplace console --reports DIR``): its purchases, bills and each
  report's figures; read from the ``report.json`` files of its output folders.
* :mod:`.access`: who may read a console (loopback, or a token); :mod:`.web`: the Starlette routes and
  the uvicorn server in a daemon thread.

The consoles are decoupled from the server's and the agents' loops: they read only what those
processes already write, so a console can never slow or stop a session. Each page's data is built by a
pure function of those files (unit-tested without HTTP); the web stack (Starlette, uvicorn, Jinja2)
is imported only by :mod:`.web`, when a console is asked for.
"""
