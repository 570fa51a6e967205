"""A marketplace that stays open: ``marketplace serve``, its owner agents, and ``marketplace request``.

* :mod:`.control`: the control plane's messages (msgpack, bounded, one tagged union);
* :mod:`.keys`: the marketplace's keys: the server's, each owner's and each allowed consumer's;
* :mod:`.sessions`: one consumer request as one run: the session's scenario, built from the
  marketplace's and the request's, and its folder;
* :mod:`.server`: the long-lived server: admits owners and consumers by key, queues requests, runs
  many sessions at once over the live connections (:mod:`.session_run`), assembles their reports;
* :mod:`.admission`: which waiting request starts next (``fcfs`` or ``dpf``, at most ``max_sessions``);
* :mod:`.worlds`: what the long-lived processes keep between sessions (worlds, owners' own rows);
* :mod:`.supervisor` and :mod:`.state_lock`: the agents serve starts, kept running; one server per state;
* :mod:`.agent`: a long-lived host of owners: builds each invited owner's node per session, each
  owner charging its own lifetime ledger, until the server stops;
* :mod:`.client`: a consumer's request: open a session, run the consumer in this process, receive the report.

Each session is a context on the parties' live connections: its own run id, noise keys, request id
on every ledger and report; a consumer never sees another's messages or results.
"""
