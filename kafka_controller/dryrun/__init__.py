"""The dry run's engine: an in-process ZooKeeper, the metadata store over it, and a broker channel
and audit sink that record instead of sending.

The Airflow planner (``kafka_controller.airflow.planner.DryRun``) replays a proposed change against a
copy of the cluster built from these, so they are product code that product code may import.
``kafka_controller.testing`` builds its harnesses on them too; the arrow only points that way, and an
import-linter contract in ``pyproject.toml`` keeps product packages off ``kafka_controller.testing``.
"""
