"""Who is at the other end of a Unix socket: both ends of perftop's socket ask.

The monitor's socket lives in a directory only its user can enter, but a directory is only
as safe as the way it was made, and a socket path is a name anyone may have planted. So
each end asks the kernel (``SO_PEERCRED``) who the other is before it trusts a byte: the
monitor refuses a peer of another user, and a hook, a viewer, ``perftop ls`` and
``perftop trace`` refuse a "monitor" of another user: they send it nothing and obey
nothing it says.

Standard library only: the hook imports this (``events``, ``wire`` and this alone).
"""

from __future__ import annotations

import os
import socket
import struct

_SO_PEERCRED = getattr(socket, "SO_PEERCRED", None)


def peer_cred(sock: socket.socket) -> tuple[int, int] | None:
    """The connected peer's (pid, effective user id), as the kernel saw it at connect or
    listen; None where the platform cannot tell (not Linux) or the socket is not connected."""
    if _SO_PEERCRED is None:
        return None
    try:
        pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, _SO_PEERCRED, 12))
    except (OSError, struct.error):
        return None
    return pid, uid


def same_user(sock: socket.socket) -> bool:
    """Whether the peer runs as this process's own (effective) user. Where the platform
    cannot tell, True: the private directory is then the only guard, as before."""
    cred = peer_cred(sock)
    return cred is None or cred[1] == os.geteuid()


class OtherUser(OSError):
    """The socket's peer is another user's process: nothing is sent to it or taken from it."""


def check_same_user(sock: socket.socket, what: str = "the socket") -> None:
    """Raise :class:`OtherUser` (an ``OSError``, so callers' socket errors cover it) when
    the peer runs as another user."""
    if not same_user(sock):
        cred = peer_cred(sock)
        raise OtherUser(f"{what} belongs to another user (uid {cred[1] if cred else '?'})")
