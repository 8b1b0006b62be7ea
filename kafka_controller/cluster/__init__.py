"""A whole cluster on this host: an embedded ZooKeeper plus N broker processes (``LocalCluster``),
each broker started, stopped (controlled shutdown), killed, paused or restarted on its own, with
readiness waits that poll against deadlines. Used by ``cluster up``, the demo, the integration
tests and the benchmarks."""
