"""Hooks: one per connection type (``provider.get_provider_info`` declares both)."""

from kafka_controller.airflow.hooks.audit import AuditStoreHook
from kafka_controller.airflow.hooks.cluster import KafkaClusterHook, OperationTimeoutError

__all__ = ["AuditStoreHook", "KafkaClusterHook", "OperationTimeoutError"]
