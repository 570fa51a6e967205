"""``noisy_count``: a small example protocol for the marketplace, in a package of its own.

Every owner counts its rows of one class (``noisy_count.label``) and releases that count with
Laplace noise, which is ``noisy_count.epsilon``-DP for its own rows under add/remove-one; the
curator adds the releases up and sends the total to the consumer. The report compares the total
with the true count.

Modules: ``plugin`` (the registration), ``config`` (the scenario section), ``messages`` (the
message kinds), ``owner``, ``curator`` and ``consumer`` (the roles), ``exchange`` (what the runtime
calls: roles, checks, report, tables) and ``report.schema.json`` (the report's own keys).
"""
