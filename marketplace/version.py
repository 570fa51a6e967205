"""The package's version, in a module of its own: the runner (a report's ``versions``) and
provisioning (a kit's ``made_by``) name it without importing the package itself, whose lazy
exports name the API, the service and the market above them."""

__version__ = "0.1.0"
