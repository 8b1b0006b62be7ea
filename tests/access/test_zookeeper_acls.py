"""ZooKeeper digest ACLs on the real embedded server (Kafka's ``zookeeper.set.acl``;
docs/controller-behaviour.md §7.1).

With credentials configured, every znode the project creates — persistent, ephemeral, sequential,
the chroot itself — belongs to the authenticated identity: anyone else may read it (except under
Kafka's sensitive roots) and nobody else may change it. And the whole controller still works that
way: three controllers on ``KazooMetadataStore``s with the same credentials elect, create topics,
fail over, shut a broker down, reassign, run a preferred election and delete a topic, and then
every znode in the tree is checked, and attacked, one by one.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import OPEN_ACL_UNSAFE, make_digest_acl_credential

from kafka_controller.cluster.local import LocalCluster
from kafka_controller.domain.errors import MetadataStoreError
from kafka_controller.domain.values import Broker, EndPoint, TopicPartition
from kafka_controller.zk import paths as P
from kafka_controller.zk.embedded import EmbeddedZooKeeper
from kafka_controller.zk.kazoo_backend import KazooMetadataStore
from kafka_controller.zk.security import PERM_READ, ZK_DIGEST_ENV, ZkClientConfig
from kafka_controller.zk.session_close import CloseOutcome
from tests.controller.cluster import Answer, Cluster, wait_until

pytestmark = pytest.mark.zk

USER, PASSWORD = "kafka", "s3cret-digest"
DEADLINE_S = 30.0
TOPIC = "secured"


def _client(connect: str, auth: list[tuple[str, str]] | None = None) -> KazooClient:
    client = KazooClient(hosts=connect, timeout=10.0, auth_data=auth)
    client.start(timeout=15.0)
    return client


@pytest.fixture
def kafka_connect(zk_server: EmbeddedZooKeeper, zk_connect: str) -> Iterator[str]:
    """A chroot below the test's own one, so that the project itself creates it (with its ACL);
    removed afterwards with the credentials (the harness's cleanup has none)."""
    yield zk_connect + "/kafka"
    owner = _client(zk_server.connect_string, [("digest", f"{USER}:{PASSWORD}")])
    try:
        chroot = zk_connect[len(zk_server.connect_string) :] + "/kafka"
        if owner.exists(chroot):
            owner.delete(chroot, recursive=True)
    finally:
        owner.stop()
        owner.close()


@pytest.fixture
def secure_cluster(kafka_connect: str) -> Iterator[Cluster]:
    def store() -> Any:
        return KazooMetadataStore(
            ZkClientConfig(
                kafka_connect, session_timeout_ms=6000, connection_timeout_ms=20000, digest=(USER, PASSWORD)
            )
        )

    cluster = Cluster(store_factory=store, config={"auto.leader.rebalance.enable": "false"})
    yield cluster
    cluster.close()


def _walk(client: KazooClient, root: str) -> list[str]:
    out, todo = [], [root]
    while todo:
        path = todo.pop()
        out.append(path)
        todo += [f"{path.rstrip('/')}/{c}" for c in client.get_children(path)]
    return sorted(out)


def _relative(path: str, chroot: str) -> str:
    return path[len(chroot) :] or "/"


def _sensitive(rel: str) -> bool:
    return any(rel == r or rel.startswith(r + "/") for r in P.SENSITIVE_ROOT_PATHS)


def _exercise(cluster: Cluster) -> None:
    """Every kind of znode the controller and the admin tools create, through their real paths."""
    for b in (1, 2, 3):
        cluster.start(b, launch=False)
    for b in (1, 2, 3):
        cluster.launch(b)
    first = cluster.active()
    cluster.admin.create_topic(
        TOPIC, {p: [1 + p % 3, 1 + (p + 1) % 3] for p in range(4)}, {"retention.ms": "1"}
    )
    cluster.admin.create_topic("doomed", {0: [2, 3]})
    tp = TopicPartition(TOPIC, 0)
    wait_until(lambda: cluster.state(tp) is not None, "the topic is created", DEADLINE_S)
    cluster.admin.set_or_create_entity_config("users", "alice", {"SCRAM-SHA-256": "hashed"})
    cluster.admin.propagate_isr_changes([tp])  # sequential; the controller consumes it
    cluster.admin.change_topic_config(TOPIC, {"retention.ms": "2"})  # sequential; stays

    # Controlled shutdown of a broker that is not the controller.
    victim = next(b for b in (1, 2, 3) if b != first.id)
    answer = Answer()
    first.controller.controlled_shutdown(victim, cluster.brokers[victim].epoch, answer)
    wait_until(lambda: answer.done, "controlled shutdown answered", DEADLINE_S)
    cluster.stop(victim)
    cluster.start(victim)

    # Failover: the controller's session closes, another controller takes over.
    cluster.stop(first.id)
    wait_until(
        lambda: cluster.admin.get_controller_id() not in (None, first.id), "a new controller", DEADLINE_S
    )
    active = cluster.active()
    cluster.start(first.id)

    # Reassignment through the API, a preferred election through the admin znode, a deletion.
    moved = Answer()
    active.controller.alter_partition_reassignments({TopicPartition(TOPIC, 1): (3, 1)}, moved)
    wait_until(lambda: moved.done, "the reassignment is accepted", DEADLINE_S)
    cluster.admin.create_preferred_replica_election([TopicPartition(TOPIC, 2)])
    cluster.admin.create_delete_topic_path("doomed")

    def deleted() -> bool:
        cluster.respond_all()  # brokers answer StopReplica, so the deletion can complete
        return not cluster.admin.topic_exists("doomed")

    wait_until(deleted, "the topic is deleted", DEADLINE_S)
    wait_until(
        lambda: (
            not cluster.admin.reassign_partitions_in_progress()
            and cluster.admin.get_preferred_replica_election() == set()
        ),
        "the admin znodes are consumed",
        DEADLINE_S,
    )


def test_every_znode_created_with_credentials_is_closed_to_everyone_else(
    secure_cluster: Cluster, zk_server: EmbeddedZooKeeper, kafka_connect: str
) -> None:
    _exercise(secure_cluster)
    chroot = kafka_connect[len(zk_server.connect_string) :]
    owner = _client(zk_server.connect_string, [("digest", f"{USER}:{PASSWORD}")])
    anonymous = _client(zk_server.connect_string)
    mallory = _client(zk_server.connect_string, [("digest", "mallory:guess")])
    try:
        digest_id = make_digest_acl_credential(USER, PASSWORD).split(":", 1)[0]
        paths = _walk(owner, chroot)
        kinds = {_relative(p, chroot).split("/")[1] for p in paths if p != chroot}
        assert {
            "brokers",
            "controller",
            "controller_epoch",
            "admin",
            "config",
            "isr_change_notification",
        } <= kinds
        assert owner.exists(f"{chroot}/controller").ephemeralOwner, "/controller should be ephemeral"
        assert owner.get_children(f"{chroot}/config/changes"), "a sequential znode should be checked too"

        for path in paths:
            rel = _relative(path, chroot)
            acls, _ = owner.get_acls(path)
            grants = {(a.id.scheme, a.id.id): a.perms for a in acls}
            assert grants.get(("digest", f"{USER}:{digest_id}")) is not None or any(
                scheme == "digest" and ident.startswith(f"{USER}:") for scheme, ident in grants
            ), f"{rel}: not owned by {USER}: {grants}"
            for (scheme, ident), perms in grants.items():
                if scheme == "world":
                    assert perms & ~PERM_READ == 0, f"{rel}: world may {perms:#x}"
                    assert not _sensitive(rel), f"{rel}: sensitive, yet world-readable"
                else:
                    assert scheme == "digest" and ident.startswith(f"{USER}:"), (
                        f"{rel}: also granted to {scheme}:{ident}"
                    )

        for intruder in (anonymous, mallory):
            for path in paths:
                attempts = [
                    lambda p=path, c=intruder: c.set(p, b"owned"),
                    lambda p=path, c=intruder: c.create(f"{p}/intruder", b"x"),
                    lambda p=path, c=intruder: c.set_acls(p, list(OPEN_ACL_UNSAFE)),
                ]
                if path != chroot:  # deleting the chroot is up to its parent's ACL, not ours
                    attempts.append(lambda p=path, c=intruder: c.delete(p))
                for attempt in attempts:
                    with pytest.raises(NoAuthError):
                        attempt()
            sensitive = [p for p in paths if _sensitive(_relative(p, chroot)) and p != chroot]
            assert sensitive, "the exercise should create a sensitive znode"
            for path in sensitive:
                with pytest.raises(NoAuthError):
                    intruder.get(path)
    finally:
        for c in (owner, anonymous, mallory):
            with contextlib.suppress(Exception):
                c.stop()
                c.close()


def test_a_candidate_without_credentials_cannot_take_over(
    secure_cluster: Cluster, kafka_connect: str
) -> None:
    """A broker started without the credentials can read the cluster but not join it: it can
    neither register, nor become controller when the role is free."""
    secure_cluster.start(1)
    controller = secure_cluster.active()
    intruder = KazooMetadataStore(ZkClientConfig(kafka_connect, session_timeout_ms=6000, create_paths=False))
    try:
        assert intruder.get_controller_id() == 1  # reading is allowed
        with pytest.raises(MetadataStoreError, match="NOAUTH"):
            intruder.register_broker(Broker(66, (EndPoint("127.0.0.1", 1),)))
        secure_cluster.stop(controller.id)  # the role is free now
        wait_until(lambda: secure_cluster.admin.get_controller_id() is None, "/controller gone", DEADLINE_S)
        with pytest.raises(MetadataStoreError):
            intruder.register_controller_and_increment_controller_epoch(66)
        assert secure_cluster.admin.get_controller_id() is None
        epoch = secure_cluster.admin.get_controller_epoch()
        assert epoch is not None and epoch[0] == 1, "the intruder bumped the controller epoch"
    finally:
        intruder.close()


@pytest.mark.integration
def test_a_cluster_of_broker_processes_and_the_cli_work_with_credentials_from_the_environment(
    zk_server: EmbeddedZooKeeper,
    kafka_connect: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """``$KAFKA_CONTROLLER_ZK_DIGEST`` reaches every process: brokers (inherited from the cluster),
    the CLI, the cluster's own client. The processes elect, create a topic, fail over after a
    kill -9 and after a crash its supervisor closes the session of; every znode they made is the
    identity's; a CLI without the variable cannot change it."""
    monkeypatch.setenv(ZK_DIGEST_ENV, f"{USER}:{PASSWORD}")
    server = zk_server.connect_string
    chroot = kafka_connect[len(server) :]
    cli = [sys.executable, "-m", "kafka_controller.cli.main"]
    cluster = LocalCluster(3, zookeeper=server, chroot=chroot, data_dir=tmp_path / "cluster")
    try:
        cluster.start(timeout=120)

        def create(topic: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
            args = ["topics", "create", "--zookeeper", kafka_connect, "--topic", topic]
            args += ["--partitions", "3", "--replication-factor", "2"]
            return subprocess.run([*cli, *args], capture_output=True, text=True, timeout=120, env=env)

        created = create(TOPIC)
        assert created.returncode == 0, created.stderr
        cluster.wait_topic_healthy(TOPIC, timeout=DEADLINE_S)
        first, epoch = cluster.waits.wait_for_controller(timeout=DEADLINE_S)
        cluster.kill_broker(first)
        cluster.waits.wait_for_controller(timeout=DEADLINE_S, exclude=[first], min_epoch=epoch + 1)
        cluster.restart_broker(first)
        cluster.wait_topic_healthy(TOPIC, timeout=DEADLINE_S)

        # Crash detection with credentials: the supervisor re-attaches to the dead controller's
        # session and closes it (its outcome says so: a lapsed session is never "closed").
        second, epoch = cluster.waits.wait_for_controller(timeout=DEADLINE_S)
        assert cluster.session_closer is not None
        pid = cluster.processes[second].pid
        cluster.crash_broker(second)
        closed = (second, pid, CloseOutcome.CLOSED)
        cluster.waits.wait_until(lambda: closed in cluster.session_closer.outcomes, DEADLINE_S, "the close")  # type: ignore[union-attr]
        cluster.waits.wait_for_controller(timeout=DEADLINE_S, exclude=[second], min_epoch=epoch + 1)
        cluster.start_broker(second, timeout=DEADLINE_S)
        cluster.wait_topic_healthy(TOPIC, timeout=DEADLINE_S)

        env = {k: v for k, v in os.environ.items() if k != ZK_DIGEST_ENV}
        refused = create("intruder", env)
        assert refused.returncode != 0 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert "NOAUTH" in refused.stderr.upper(), refused.stderr
        assert not cluster.store.topic_exists("intruder")

        owner = _client(server, [("digest", f"{USER}:{PASSWORD}")])
        anonymous = _client(server)
        try:
            identity = make_digest_acl_credential(USER, PASSWORD)
            made = [p for p in _walk(owner, chroot) if p != chroot]
            assert any(p.endswith(f"/brokers/topics/{TOPIC}") for p in made)
            for path in made:
                acls, _ = owner.get_acls(path)
                assert any(a.id.scheme == "digest" and a.id.id == identity for a in acls), path
                with pytest.raises(NoAuthError):
                    anonymous.set(path, b"tampered")
        finally:
            for c in (owner, anonymous):
                c.stop()
                c.close()
    finally:
        cluster.close(graceful=False)
