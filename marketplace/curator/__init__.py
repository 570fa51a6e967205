"""The curator: the trusted, parsimonious coordinator (one state machine per protocol)."""
