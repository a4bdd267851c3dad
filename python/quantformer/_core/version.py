"""The one version of the core: the package, the CLI's --version, model records and the R
handshake all read it from here."""

__version__ = "0.1.0"


def versions(packages) -> dict:
    """``{"quantformer": version, package: version or None, ...}`` for the installed
    distributions named in ``packages``, read from their metadata without importing them (the
    one copy used by model records, manifests, ONNX exports and ``quantformer info``)."""
    from importlib import metadata

    out = {"quantformer": __version__}
    for pkg in packages:
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out
