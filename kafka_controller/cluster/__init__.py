"""A whole cluster on this host: an embedded ZooKeeper plus N broker processes (``LocalCluster``),
each broker started, stopped (controlled shutdown), killed, paused or restarted on its own, with
readiness waits that poll against deadlines. Used by ``cluster up``, the demo, the integration
tests and the benchmarks."""

from kafka_controller.cluster.local import DEFAULT_BROKER_CONFIG, LocalCluster, free_port
from kafka_controller.cluster.process import BrokerProcess, broker_command, process_alive
from kafka_controller.cluster.waits import ClusterError
from kafka_controller.cluster.watch import LeadershipWatch, ShutdownReport

__all__ = [
    "DEFAULT_BROKER_CONFIG",
    "BrokerProcess",
    "ClusterError",
    "LeadershipWatch",
    "LocalCluster",
    "ShutdownReport",
    "broker_command",
    "free_port",
    "process_alive",
]
