"""Many nodes into one view: forwarders (event sinks on each node), the collector (a TCP
source) with its token handshake, and the Prometheus endpoint."""
