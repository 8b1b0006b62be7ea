"""Reconciliation: does ZooKeeper agree with every broker, the controller and the audit log?

* ``snapshot`` — the snapshot's Parquet schema (versioned) and its pyarrow writer;
* ``export`` / ``sources`` — a snapshot from any ``MetadataStore`` with batched reads, the brokers'
  and controller's views from pluggable sources, and a Parquet copy of the audit history;
* ``job`` — the PySpark job (``spark-submit kafka_controller/reconcile/job.py`` or
  ``kafka-controller reconcile run``), with ``frames`` (inputs), ``rules`` (one function per finding
  kind, listed in ``rules_catalog``), ``summaries``, ``results`` (the audit store's rows);
* ``remediation`` — the plan format the recovery DAG consumes;
* ``synthetic`` (+ ``synthetic_fleet``, ``synthetic_io``) — fleets of N partitions with planted
  problems, for the tests and ``bench/reconcile.py`` (whose pandas baseline lives in ``bench/``).

No module here imports another that imports it back (an import-linter contract).

Nothing is imported here: pyspark, pandas and pyarrow load only with the module that needs them.
"""
