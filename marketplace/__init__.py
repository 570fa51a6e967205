"""marketplace: a privacy-preserving AI data marketplace."""

__version__ = "0.1.0"
