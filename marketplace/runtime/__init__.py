"""The runtime: what it takes to start, host and run parties, and to turn what they write into a run's report.

Every way of running a scenario stands on it: ``marketplace run`` (:mod:`marketplace.runner`: the
in-process and processes drivers, sweeps, the terminal display), a served marketplace
(:mod:`marketplace.service`: its sessions, owner agents and requests), a market
(:mod:`marketplace.market`), the party commands a container runs (``marketplace curator | owner |
owners | consumer``) and ``marketplace assemble``. It names no protocol.

* Starting and hosting parties: :mod:`.nodes` (a party built and started as a node, admitted under
  its lifetime ledger), :mod:`.party_process` (the nodes of one process and their ZeroMQ driver, an
  owner host among them), :mod:`.links` (the link settings a scenario gives every party),
  :mod:`.identity` (the scenario's identity every party's report states), :mod:`.scheduling`
  (a party's CPU scheduling and single-threaded BLAS), :mod:`.command_line` (``python -m marketplace
  <command>``, for a party started from another process), :mod:`.forkserver` and
  :mod:`.forkserver_guard` (the preloaded server parties are forked from).
* A party's own outputs: :mod:`.party_reports` (its report, written where the run collects it),
  :mod:`.publication` (what of it a party may publish, and what it keeps), :mod:`.json_files`.
* The run's report, assembled from the parties' reports, whoever ran them: :mod:`.assemble`,
  :mod:`.report` (message and timing totals, ``messages.csv``), :mod:`.lifetime`, :mod:`.losses`,
  :mod:`.per_owner`; and :mod:`.results` (:class:`Report`, what Python gets back).
* Before a run: :mod:`.world` (the world built and checked against the data), :mod:`.run_folder`
  (the folder a run writes, new or empty).

The names below are the runtime's surface for the packages above it; :mod:`marketplace.service`
and :mod:`marketplace.market` use these and nothing of :mod:`marketplace.runner` (an import-linter
contract in ``pyproject.toml``), and import them from this package:

* hosting a party: ``host_nodes``, ``link_settings``, ``scenario_identity``, ``party_command``;
* its report: ``party_report``, ``OWN``, ``internal_failure``, ``consumer_handover``,
  ``write_json``, ``json_text``, ``json_default``, ``json_indented``, ``write_text_whole``;
* the run's report: ``assemble_from_reports``, ``write_messages_csv``, ``Report``;
* before a run: ``prepare_world``, ``check_run_folder``, ``default_run_folder``, ``RunFolderError``.

The command line and the Python API use these too, and ``run_host`` (a party command's process),
``forkserver_running`` (the forkserver for one command) and ``assemble_from_party_reports``
(``marketplace assemble``). :mod:`marketplace.runner` drives the parties itself and imports the
modules directly.

The names are imported on first use (``lazy_loader.attach_stub``, listed once in ``__init__.pyi``):
the forkserver's first preload module, :mod:`.forkserver_guard`, must run before the parties'
libraries are imported, and the command line starts the forkserver before anything heavy.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
