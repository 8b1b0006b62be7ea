"""What the secured broker leaves out on purpose (the README's deviations table): client quotas and
delegation tokens are not offered, so a Kafka client learns it from ApiVersions rather than from a
request that fails half-way, and a quota setting is refused at start-up instead of silently ignored."""

from __future__ import annotations

import pytest

from kafka_controller.broker.config import BrokerConfig
from kafka_controller.broker.kafka_wire import api_versions as av
from kafka_controller.broker.kafka_wire.header import (
    RequestHeader,
    decode_response_header,
    encode_request_header,
)
from kafka_controller.broker.kafka_wire.primitives import Reader, Writer
from kafka_controller.domain.errors import InvalidArgumentError
from tests.broker.admin_wire import Env

API_VERSIONS = 18
#: Kafka 2.8's api keys for delegation tokens (38-41) and client quotas (48, 49).
LEFT_OUT = {
    38: "CreateDelegationToken",
    39: "RenewDelegationToken",
    40: "ExpireDelegationToken",
    41: "DescribeDelegationToken",
    48: "DescribeClientQuotas",
    49: "AlterClientQuotas",
}


def _advertised(env: Env) -> set[int]:
    w = Writer()
    encode_request_header(w, RequestHeader(API_VERSIONS, 0, 7, "probe"))
    av.encode_request(w, av.ApiVersionsRequest(), 0)
    answer = env.handler.handle(w.getvalue())
    assert answer is not None
    r = Reader(answer)
    decode_response_header(r, API_VERSIONS, 0)
    response = av.decode_response(r, 0)
    assert response.error_code == 0
    return {key for key, _, _ in response.api_keys}


def test_quotas_and_delegation_tokens_are_not_offered() -> None:
    advertised = _advertised(Env())
    assert {3, 19, 20} <= advertised  # Metadata, CreateTopics, DeleteTopics: the probe reads a real list
    assert {LEFT_OUT[k] for k in advertised & LEFT_OUT.keys()} == set()


@pytest.mark.parametrize("key", ["quota.producer.default", "quota.consumer.default"])
def test_a_quota_setting_is_refused_at_start_up(key: str) -> None:
    with pytest.raises(InvalidArgumentError, match=key.replace(".", r"\.")):
        BrokerConfig.of(1, {key: "1048576"})
