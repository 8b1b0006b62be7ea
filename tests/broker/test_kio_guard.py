"""Length prefixes that claim more than the body holds close the connection before ``kio``'s native
reader sees them (it would abort the process trying to allocate them, ``kio_guard``). Each case
runs in a child process, so a regression shows as that child's abort, not as the suite's."""

from __future__ import annotations

import struct
import subprocess
import sys
import textwrap

import pytest

from kafka_controller.broker.kafka_wire.kio_api import request_schema
from kafka_controller.broker.kafka_wire.kio_guard import check_lengths
from kafka_controller.broker.kafka_wire.primitives import KafkaDecodeError

HEADER_V2 = struct.pack(">hhih", 43, 2, 1, -1) + b"\x00"  # ElectLeaders v2, null client id, no tags
HEADER_V1 = struct.pack(">hhih", 43, 1, 1, -1)
HEADER_46 = struct.pack(">hhih", 46, 0, 1, -1) + b"\x00"

CASES = {
    # election type 0, then a compact array claiming 2**32 - 2 topics
    "compact array": HEADER_V2 + b"\x00" + b"\xff\xff\xff\xff\x0f",
    # election type 0, then a legacy array claiming 2**31 - 1 topics
    "legacy array": HEADER_V1 + b"\x00" + struct.pack(">i", 2**31 - 1),
    # one topic whose compact name claims 2**28 bytes
    "compact string": HEADER_V2 + b"\x00\x02" + b"\x80\x80\x80\x80\x01",
    # ListPartitionReassignments: timeout, one topic "t", partition indexes claiming 2**31 entries
    "int array": HEADER_46 + struct.pack(">i", 1000) + b"\x02\x02t" + b"\x80\x80\x80\x80\x08",
}

SCRIPT = textwrap.dedent(
    """
    import sys
    from kafka_controller.broker.kafka_wire.controller_admin_apis import controller_admin_apis
    from kafka_controller.broker.kafka_wire.handler import KafkaProtocolHandler
    from kafka_controller.broker.metadata_cache import MetadataCache
    cache = MetadataCache(1)
    h = KafkaProtocolHandler(cache, lambda: "c", controller_admin_apis(lambda api, r: None, cache))
    print(h.handle(bytes.fromhex(sys.argv[1])))
    """
)


@pytest.mark.parametrize("case", list(CASES))
def test_a_length_beyond_the_body_closes_the_connection_and_the_process_lives(case: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, CASES[case].hex()], capture_output=True, text=True, timeout=120
    )
    assert (done.returncode, done.stdout.strip()) == (0, "None"), done.stderr[-2000:]


def test_the_check_refuses_what_the_native_reader_would_allocate() -> None:
    body = memoryview(CASES["compact array"])
    with pytest.raises(KafkaDecodeError, match="longer than the body"):
        check_lengths(request_schema(43, 2), body, len(HEADER_V2))
