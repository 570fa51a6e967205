"""How messages move between parties: the node that wraps a role with the codec and counters, the
ZeroMQ driver (CURVE, heartbeats, liveness, deadlines), owner hosts, and the in-process driver.
Nothing here knows which protocol is running."""
