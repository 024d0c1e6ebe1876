"""Whether a local TCP port is free, for the embedded server's port and the web port."""

from __future__ import annotations

import socket


def port_is_free(host: str, port: int) -> bool:
    """Whether nothing listens on host:port (TIME_WAIT leftovers do not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True
