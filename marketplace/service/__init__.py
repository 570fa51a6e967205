"""A marketplace that stays open: ``marketplace serve``, its owner agents, and ``marketplace request``.

* :mod:`.control`: the control plane's messages (msgpack, bounded, one tagged union);
* :mod:`.keys`: the marketplace's keys: the server's, each owner's and each allowed consumer's;
* :mod:`.sessions`: one consumer request as one run: the session's scenario, built from the
  marketplace's and the request's, and its folder;
* :mod:`.server`: the long-lived server: admits owners and consumers by key, queues requests, runs
  one session at a time (a curator process of its own, fresh keys), assembles its report;
* :mod:`.agent`: a long-lived host of owners: joins sessions, each owner charging its own lifetime
  ledger, until the server stops;
* :mod:`.client`: a consumer's request: open a session, run the consumer, receive the report.

Each session is a run of its own, with its own curator, run id, CURVE key for the curator and
sockets; a consumer never sees another's messages or results.
"""
