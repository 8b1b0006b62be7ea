"""Operators on the controller and the brokers: failover drill, controlled shutdown, broker
stop/start/kill, rolling restart. All mutate, so all default to a dry run."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

from kafka_controller.airflow.demote import DEMOTE_MODES
from kafka_controller.airflow.maintenance import check_stop, restart_order
from kafka_controller.airflow.operators.base import KafkaOperationOperator, one_line
from kafka_controller.airflow.params import as_bool, as_int, as_int_list
from kafka_controller.airflow.planner import plan_rolling_restart
from kafka_controller.airflow.runbook_support import RefusedError, Timeouts
from kafka_controller.airflow.runbooks import (
    _SOURCES,
    DRILL_METHODS,
    drill_refusal,
    failover_drill,
    rolling_restart,
    rolling_restart_refusal,
    start_broker,
    stop_broker,
    wait_registered,
)
from kafka_controller.domain.errors import InvalidArgumentError

if TYPE_CHECKING:
    from airflow.sdk import Context

RESTARTED_KEY = "kafka_controller_restarted_brokers"
#: ``{"value": <auto.leader.rebalance.enable the first attempt replaced, or None>}``.
PAUSE_KEY = "kafka_controller_auto_rebalance_replaced"


def _demote(op: KafkaOperationOperator, value: str) -> str:
    """Check ``demote`` and hand it to the hook: ``controlled_shutdown`` (this project's brokers) or
    ``reorder`` (replica reorder + preferred election, Kafka's public APIs: any Kafka 2.4+)."""
    mode = str(value).strip().lower()
    if mode not in DEMOTE_MODES:
        raise InvalidArgumentError(
            f"parameter 'demote' must be one of {', '.join(DEMOTE_MODES)}, got {value!r}"
        )
    op.cluster.demote = mode
    return mode


def _registered(op: KafkaOperationOperator, broker_id: int) -> None:
    brokers = op.cluster.get_store().get_sorted_broker_list()
    if broker_id not in brokers:
        raise InvalidArgumentError(f"broker {broker_id} is not registered (registered: {brokers})")


class ControllerFailoverDrillOperator(KafkaOperationOperator):
    """Lose the controller (``method``: ``resign``, or ``kill`` its broker, which is then started
    again); measure from the loss until a new epoch leads every partition it can. The loss is
    recorded in the audit, so that the failover's recovery is measured from it.

    Dry run: the in-memory controller's failover on the snapshot (what the new controller would
    change)."""

    operation_kind = "controller_failover_drill"
    template_fields: Sequence[str] = (*KafkaOperationOperator.template_fields, "timeout_s", "method")

    def __init__(self, *, timeout_s: float | str = 120.0, method: str = "resign", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.timeout_s = timeout_s
        self.method = method

    def prepare(self, context: Context) -> dict[str, Any]:
        self._timeout = float(as_int("timeout_s", self.timeout_s, minimum=1))
        self._method = str(self.method).strip().lower()
        if self._method not in DRILL_METHODS:
            raise InvalidArgumentError(
                f"parameter 'method' must be one of {', '.join(DRILL_METHODS)}, got {self.method!r}"
            )
        if self._method == "kill" and not self.is_dry_run():
            self.cluster.lifecycle()  # a missing or malformed backend fails here, before the row
        return {"timeout_s": self._timeout, "method": self._method}

    #: The broker a kill drill killed and has not seen back yet (what ``cancel`` reports).
    _killed: int | None = None

    def _lost(self, broker_id: int, epoch: int, at_ms: int, detail: str) -> None:
        if self._method == "kill":
            self._killed = broker_id
        try:
            self.audit.record_controller_lost(
                broker_id, epoch, at_ms, f"{detail} (operation {self.operation_id})"
            )
        except Exception as e:  # the drill goes on; the report then measures from what the controller saw
            self.log.warning("could not record the controller's loss in the audit: %s", one_line(e))

    def run(self, context: Context) -> dict[str, Any]:
        if self.is_dry_run():
            with self.dry_run_of() as plan:
                result = {"plan": self.record_plan([plan.baseline])}
            self.refuse_dry_run(drill_refusal(self.cluster.describe()))
            return result
        result = failover_drill(
            self.cluster,
            timeout_s=self._timeout,
            say=self.say,
            method=self._method,
            lifecycle=self.cluster.lifecycle() if self._method == "kill" else None,
            on_lost=self._lost,
            recovery_of=self.audit.failover_recovery,
        )
        self._killed = None  # started again and back in every ISR
        return result

    def cancel(self) -> str:
        if self._killed is None:
            return (
                "nothing was in flight to cancel (the controller's broker is not down because of this drill)"
            )
        return (
            f"stopped the drill; left: broker {self._killed}, killed by it, may not be running again "
            "(check `kafka-controller cluster status`; start it through the lifecycle backend)"
        )

    def describe_result(self, result: dict[str, Any]) -> list[str]:
        if "elected" not in result:
            return super().describe_result(result)
        old, new = result["resigned"], result["elected"]
        return [
            f"drill result ({result.get('method', 'resign')}): controller {old['broker_id']} "
            f"(epoch {old['epoch']}) -> {new['broker_id']} (epoch {new['epoch']}); new controller after "
            f"{result['election_ms']:.0f} ms, every partition led after {result['recovery_ms']:.0f} ms, "
            f"{result['offline_at_failover']} partition(s) offline at the failover "
            f"({_SOURCES[result['measured_by']]}); {result['offline_after']} offline now"
        ]


class ControlledShutdownOperator(KafkaOperationOperator):
    """Move every leadership off one broker, then (``stop``) stop it through the lifecycle backend.

    Refused when the stop would take a partition offline, unless ``allow_offline``."""

    operation_kind = "controlled_shutdown"
    template_fields: Sequence[str] = (
        *KafkaOperationOperator.template_fields,
        "broker_id",
        "stop",
        "allow_offline",
        "demote",
    )

    def __init__(
        self,
        *,
        broker_id: int | str,
        stop: bool | str = True,
        allow_offline: bool | str = False,
        demote: str = "controlled_shutdown",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.broker_id = broker_id
        self.stop = stop
        self.allow_offline = allow_offline
        self.demote = demote

    def prepare(self, context: Context) -> dict[str, Any]:
        self._broker = as_int("broker_id", self.broker_id, minimum=0)
        self._stop = as_bool("stop", self.stop)
        self._allow_offline = as_bool("allow_offline", self.allow_offline)
        _registered(self, self._broker)
        demote = _demote(self, self.demote)
        return {
            "broker_id": self._broker,
            "stop": self._stop,
            "allow_offline": self._allow_offline,
            "demote": demote,
        }

    def run(self, context: Context) -> dict[str, Any]:
        if self.is_dry_run():
            with self.dry_run_of() as plan:
                result = {
                    "plan": self.record_plan([plan.controlled_shutdown(self._broker, then_stop=self._stop)])
                }
            check = check_stop(self.cluster.describe(), self._broker)
            self.refuse_dry_run(None if check.safe or self._allow_offline else check.reason)
            return result
        check = check_stop(self.cluster.describe(), self._broker)
        if not check.safe and not self._allow_offline:
            raise RefusedError(check.reason)
        if not self._stop:
            remaining = self.cluster.controlled_shutdown(
                self._broker, Timeouts().shutdown_s, self.operation_id
            )
            reordered = {str(tp): list(o) for tp, o in self.cluster.reordered.items()}
            return {"broker_id": self._broker, "still_led": remaining, "original_replica_orders": reordered}
        lifecycle = self.cluster.lifecycle()
        stopped = stop_broker(self.cluster, lifecycle, self._broker, Timeouts(), self.operation_id, self.say)
        reordered = {str(tp): list(o) for tp, o in self.cluster.reordered.items()}
        return {"broker_id": self._broker, **stopped, "original_replica_orders": reordered}


class BrokerLifecycleOperator(KafkaOperationOperator):
    """``start``, ``stop`` (controlled shutdown first) or ``kill`` one broker via the lifecycle backend."""

    operation_kind = "broker_lifecycle"
    template_fields: Sequence[str] = (*KafkaOperationOperator.template_fields, "broker_id", "action")
    ACTIONS = ("start", "stop", "kill")

    def __init__(self, *, broker_id: int | str, action: str, timeout_s: float = 120.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.broker_id = broker_id
        self.action = action
        self.timeout_s = timeout_s

    def prepare(self, context: Context) -> dict[str, Any]:
        self._broker = as_int("broker_id", self.broker_id, minimum=0)
        self._action = str(self.action).strip().lower()
        if self._action not in self.ACTIONS:
            raise InvalidArgumentError(
                f"parameter 'action' must be one of {', '.join(self.ACTIONS)}, got {self.action!r}"
            )
        if self._action != "start":
            _registered(self, self._broker)
        self.cluster.lifecycle()  # a missing or malformed backend fails here, before the row
        return {"broker_id": self._broker, "action": self._action}

    def run(self, context: Context) -> dict[str, Any]:
        b = self._broker
        if self.is_dry_run():
            if self._action == "start":
                return {
                    "plan": [{"action": "start", "note": "a starting broker changes no leadership by itself"}]
                }
            with self.dry_run_of() as plan:
                change = plan.controlled_shutdown(b) if self._action == "stop" else plan.stop_broker(b)
                return {"plan": self.record_plan([change])}
        lifecycle = self.cluster.lifecycle()
        timeouts = Timeouts(shutdown_s=self.timeout_s, start_s=self.timeout_s)
        if self._action == "start":
            return {"broker_id": b, **start_broker(self.cluster, lifecycle, b, timeouts, self.say)}
        if self._action == "stop":
            return {
                "broker_id": b,
                **stop_broker(self.cluster, lifecycle, b, timeouts, self.operation_id, self.say),
            }
        lifecycle.kill(b, self.timeout_s)
        self.say(f"broker {b}: killed ({lifecycle.name}); waiting for its ZooKeeper session to end")
        wait_registered(self.cluster, b, False, self.timeout_s)
        return {"broker_id": b, "killed": True}


class RollingRestartOperator(KafkaOperationOperator):
    """Restart brokers one at a time, the active controller last, with auto leader rebalance paused
    for the window (see ``runbooks.rolling_restart`` for each step's guard and waits). A retried
    task skips the brokers an earlier attempt restarted, and puts back the auto-rebalance value the
    *first* attempt replaced: an attempt killed before its ``finally`` leaves the pause in place, and
    the retry must not take that pause for the operator's own setting (both kept in the task state
    store)."""

    operation_kind = "rolling_restart"
    template_fields: Sequence[str] = (
        *KafkaOperationOperator.template_fields,
        "brokers",
        "catch_up_timeout_s",
        "demote",
    )

    def __init__(
        self,
        *,
        brokers: Sequence[int] | str | None = None,
        catch_up_timeout_s: float | str = 300.0,
        pause_auto_rebalance: bool = True,
        demote: str = "controlled_shutdown",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.demote = demote
        self.brokers = brokers
        self.catch_up_timeout_s = catch_up_timeout_s
        self.pause_auto_rebalance = pause_auto_rebalance

    def prepare(self, context: Context) -> dict[str, Any]:
        requested = as_int_list("brokers", self.brokers)
        self._catch_up = float(as_int("catch_up_timeout_s", self.catch_up_timeout_s, minimum=1))
        self._demote = _demote(self, self.demote)
        cid, _, _ = self.cluster.controller()
        self._order = restart_order(self.cluster.get_store().get_sorted_broker_list(), cid, requested or None)
        if not self.is_dry_run():
            self.cluster.lifecycle()
        return {
            "brokers": requested,
            "order": self._order,
            "controller_id": cid,
            "catch_up_timeout_s": self._catch_up,
            "demote": self._demote,
        }

    def run(self, context: Context) -> dict[str, Any]:
        if self.is_dry_run():
            steps = plan_rolling_restart(
                self.cluster.snapshot(),
                self._order,
                broker_defaults=self.cluster.connection.broker_defaults,
                operation_id=self.operation_id,
            )
            summaries = self.record_plan(steps)
            refused = [s["action"] for s in summaries if s["offline_after"]]
            self.refuse_dry_run(rolling_restart_refusal(self.cluster.describe(), self._order, summaries))
            return {"order": self._order, "plan": summaries, "would_refuse": refused}
        store = context.get("task_state_store")
        restarted = store.get(RESTARTED_KEY) if store is not None else None
        done = {b for b in restarted if isinstance(b, int)} if isinstance(restarted, list) else set()
        self._done = done  # what ``cancel`` reports

        def remember(broker_id: int) -> None:
            done.add(broker_id)
            if store is not None:
                store.set(RESTARTED_KEY, [*sorted(done)])

        if self.pause_auto_rebalance:
            self.say("pausing auto leader rebalance for the window (auto.leader.rebalance.enable=false)")
            replaced = self.cluster.pause_auto_rebalance()
            earlier = store.get(PAUSE_KEY) if store is not None else None
            if isinstance(earlier, dict) and "value" in earlier:
                first = earlier["value"]  # the first attempt's: a string, or None for "unset"
                replaced = first if isinstance(first, str) else None
            elif store is not None:
                store.set(PAUSE_KEY, {"value": replaced})
            self._paused = (replaced,)
        try:
            result = rolling_restart(
                self.cluster,
                self.cluster.lifecycle(),
                self._order,
                timeouts=Timeouts(catch_up_s=self._catch_up),
                operation_id=self.operation_id,
                done=done,
                on_broker_done=remember,
                say=self.say,
            )
            if self._demote == "reorder":  # every broker is back: its preferred leaderships too
                result["replica_orders_restored"] = self.cluster.restore_replica_order(
                    Timeouts().shutdown_s, self.operation_id
                )
        finally:
            self._resume()
        if store is not None:
            store.delete(RESTARTED_KEY)
            store.delete(PAUSE_KEY)
        return {**result, "auto_rebalance_paused": self.pause_auto_rebalance}

    _paused: tuple[str | None] | None = None
    _done: Collection[int] = ()  # the brokers restarted so far (``run`` shares its set)

    def _resume(self) -> None:
        """Put back the auto-rebalance setting this task replaced (also when the task is killed)."""
        if self._paused is not None:
            previous, self._paused = self._paused[0], None
            self.cluster.resume_auto_rebalance(previous)
            self.say(f"auto leader rebalance restored ({previous if previous is not None else 'unset'})")

    def cancel(self) -> str:
        if self.is_dry_run() or not hasattr(self, "_order"):
            return "nothing was in flight to cancel"
        done = [b for b in self._order if b in self._done]
        left = [b for b in self._order if b not in self._done]
        paused = self._paused is not None
        self._resume()
        current = (
            f"; broker {left[0]} was being restarted: it may be stopped or not yet back in every ISR "
            "(check `kafka-controller cluster status`, start it through the lifecycle backend)"
            if left
            else ""
        )
        return (
            f"stopped the rolling restart; restarted: {done or 'none'}, left: {left or 'none'}{current}"
            + ("; auto leader rebalance restored" if paused else "")
        )
