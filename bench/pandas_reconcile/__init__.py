"""The reconciliation rules again, in pandas and numpy on one process: the baseline
``bench/reconcile.py`` measures Spark against, and the tests' cross-check of the Spark job.

Not part of the product: ``kafka_controller.reconcile.rules`` defines each rule once (its docstrings
say what each finding means). This copy takes the same inputs, keeps the same semantics (null
handling included) and the same ``expected``/``actual`` evidence text, so the two engines' findings
compare exactly; ``tests/spark`` asserts they do.

Modules, each importing only those before it: ``arrow`` (list helpers, evidence formatting),
``load`` (pruned Arrow tables, ZooKeeper's partitions as one frame), ``rules`` (partition and view
rules), ``audit_rules``, ``baseline`` (``run``).
"""

from .arrow import FINDING_COLUMNS, Params
from .baseline import run

__all__ = ["FINDING_COLUMNS", "Params", "run"]
