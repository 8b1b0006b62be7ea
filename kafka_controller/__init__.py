"""kafka-controller-ops: Kafka 2.8's ZooKeeper-mode controller in Python.

Only light imports here: ``import kafka_controller`` must stay fast; heavy packages (kazoo,
SQLAlchemy, Airflow, PySpark) are imported inside the modules and functions that need them.
"""

__version__ = "0.7.0"

__all__ = ["__version__"]
