"""The coding room's port: a port in use refused before any work, and the project's port
kept from start to start, so that the links printed at an earlier start keep working (they
carry the port; the tokens are kept in the project, :mod:`quantformer.room.server`)."""

from __future__ import annotations

from .._core.errors import InputError


def port_error(host: str, port: int, exc: OSError) -> InputError:
    return InputError(f"cannot serve on {host}:{port} ({exc.strerror}); give another "
                      "{port} (0 = a free one)", params=["port"])


def probe_port(host: str, port: int) -> None:
    """Bind ``host:port`` and let it go again, before any long work (the corpus' embedding,
    the project file): a port in use is refused first. Port 0 (a free one) always passes.

    Raises:
        InputError: the address cannot be bound (in use, not this computer's, no right).
    """
    import socket

    if port == 0:
        return
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as RoomServer does
            sock.bind((host, port))
    except OSError as exc:
        raise port_error(host, port, exc) from None


def project_port(store, host: str, port: int) -> tuple[int, int | None]:
    """(port to serve on, the project's earlier port): ``port`` when given (not 0), else the
    port the project was last served on (``meta`` ``port``) when it is free, so that the
    links printed at an earlier start keep working, else 0 (a free one)."""
    stored = store.get("port")
    if port or not stored:
        return port, stored
    try:
        probe_port(host, int(stored))
    except InputError:
        return 0, stored
    return int(stored), stored


def moved_port(old: int | None, new: int) -> str | None:
    """The warning when a project is served on another port than at its last start."""
    if old is None or int(old) == new:
        return None
    return (f"this project was served on port {old} and is now on port {new} (port {old} "
            "is in use, or another --port was given): the links printed at earlier starts "
            f"(http://...:{old}/...) no longer work; give the coders the links printed now "
            "(the same tokens unless --new-links)")
