"""The protocols shipped with the marketplace, one package each: ``summarize``, ``stc``, ``sketch`` and
``pfds``.

A protocol package holds everything of its protocol: its pure cores (plain functions on numpy
arrays, no I/O, testable on their own), its scenario section (``config.py``), its wire kinds
(``messages.py``), its curator, owner and consumer roles, its exchange (scenario to roles, report,
tables, sweeps) and its report-schema fragment. Each registers a
:class:`~marketplace.plugins.ProtocolSpec` in the ``marketplace.protocols`` entry-point group; the
runtime finds them there and never imports this package by name. Packages do not import each other.
"""
