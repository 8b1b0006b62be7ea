"""Kafka's binary protocol, the slice a broker answers today: ApiVersions, Metadata, DescribeCluster.

``primitives`` has the wire types, ``header`` the request/response headers and the supported API
table, one module per API its request and response codecs, and ``handler`` the broker's answers.
"""

from kafka_controller.broker.kafka_wire.admin_apis import admin_apis, auto_create_topics
from kafka_controller.broker.kafka_wire.controller_admin_apis import controller_admin_apis
from kafka_controller.broker.kafka_wire.handler import KafkaProtocolHandler, new_cluster_id
from kafka_controller.broker.kafka_wire.header import SUPPORTED, is_kafka_frame
from kafka_controller.broker.kafka_wire.primitives import KafkaDecodeError

__all__ = [
    "SUPPORTED",
    "KafkaDecodeError",
    "KafkaProtocolHandler",
    "admin_apis",
    "auto_create_topics",
    "controller_admin_apis",
    "is_kafka_frame",
    "new_cluster_id",
]
