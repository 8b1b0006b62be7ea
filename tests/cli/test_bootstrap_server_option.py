"""``--bootstrap-server`` is checked before kafka-python sees it: a server without a host or with
a port that is not 1-65535 is a usage error of one line (exit 2), not kafka-python's bare
ValueError (the CLI fuzz test found ``--bootstrap-server :`` raising one)."""

from __future__ import annotations

import argparse

import pytest

from kafka_controller.cli.kafka_client import bootstrap_servers
from kafka_controller.cli.main import main

FULLWIDTH_PORT = "h:\uff19\uff10\uff19\uff12"  # str.isdigit() says yes, and int() would take it
BAD = [":", "h:", ":9092", "h:x", "h:0", "h:70000", FULLWIDTH_PORT, "h:1,:2"]


@pytest.mark.parametrize("servers", BAD)
def test_a_bad_server_is_a_one_line_usage_error(servers: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["topics", "create", "--bootstrap-server", servers, "--topic", "t", "--timeout", "0.3"])
    err = capsys.readouterr().err
    assert code == 2
    assert "bad --bootstrap-server" in err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_good_servers_pass_as_given() -> None:
    args = argparse.Namespace(bootstrap_server=" h:9092, [::1]:9093 ,10.0.0.1:65535,")
    assert bootstrap_servers(args) == ["h:9092", "[::1]:9093", "10.0.0.1:65535"]
