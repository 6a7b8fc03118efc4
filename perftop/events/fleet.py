"""Events of a collector that hears many nodes. Standard library only.

A collector writes each node's frames wrapped in a node frame (see :mod:`perftop.wire`);
reading one yields :class:`NodeScope` markers around the node's own events, so the model
routes them to that node's session. Pids are only unique per host, so every node keeps its
own session instead of sharing keys.
"""

from __future__ import annotations

from perftop.events.base import Event, event


@event("node_scope")
class NodeScope(Event):
    """The events that follow, up to the next marker, come from ``node`` ("" = the
    collector itself). Made by the reader of a node frame; a collector also writes them
    around the few events it makes on a node's behalf (an ssh node's output lines)."""

    node: str


@event("node_link")
class NodeLink(Event):
    """A forwarder's link to the collector came up or went down."""

    t: float
    node: str
    connected: bool
    peer: str = ""  # the forwarder's address
    host: str = ""  # the host name it reported
