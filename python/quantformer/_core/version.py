"""The one version of the core: the package, the CLI's --version, model records and the R
handshake all read it from here."""

__version__ = "0.1.0"
