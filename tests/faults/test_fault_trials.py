"""The fault-injection suite: ``KAFKA_CONTROLLER_FAULT_TRIALS`` trials (default 30), each
a workload on a fresh three-broker cluster with one fault injected at a random moment, then every
invariant of ``kafka_controller.testing.invariants`` checked. A failing trial prints its seed and
the command that replays it; every trial is a line of ``bench/results/reliability.jsonl``.
"""

from __future__ import annotations

import pytest

from tests.faults.conftest import AuditPostgres, FaultEnsemble, FaultNet, Report, trial_seeds
from tests.faults.faults import ENSEMBLE_FAULTS, NETWORK_FAULTS
from tests.faults.trial import TrialSpec, replay_command, run_trial

pytestmark = [
    pytest.mark.faults,
    pytest.mark.integration,
    pytest.mark.zk,
    pytest.mark.slow,
    pytest.mark.timeout(240),
]


def _params() -> list[object]:
    out: list[object] = []
    for seed in trial_seeds():
        spec, _ = TrialSpec.of(seed)
        marks = [pytest.mark.postgres] if spec.fault == "audit_outage" else []
        out.append(pytest.param(seed, id=f"{seed}-{spec.fault}-{spec.workload}", marks=marks))
    return out


@pytest.mark.parametrize("seed", _params())
def test_fault_trial(
    seed: int,
    fault_zk: object,
    fault_ensemble: FaultEnsemble,
    fault_net: FaultNet,
    audit_postgres: AuditPostgres,
    report: Report,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    spec, _ = TrialSpec.of(seed)
    workdir = tmp_path_factory.mktemp(f"trial-{seed}")
    if spec.fault in NETWORK_FAULTS:
        with fault_net.entered():
            result = run_trial(seed, fault_net.ready(), workdir, audit_postgres, net=fault_net)
    else:
        zk = fault_ensemble.ready() if spec.fault in ENSEMBLE_FAULTS else fault_zk
        result = run_trial(seed, zk, workdir, audit_postgres)  # type: ignore[arg-type]
    report.add(result)
    print(result.summary())
    assert result.failure is None, f"{result.failure}\nreplay: {replay_command(seed)}\nlogs: {result.logs}"
    assert not result.violations, "\n".join(
        [f"{v['invariant']}: {v['subject']}: {v['detail']}" for v in result.violations[:10]]
        + [f"replay: {replay_command(seed)}", f"logs: {result.logs}"]
    )
