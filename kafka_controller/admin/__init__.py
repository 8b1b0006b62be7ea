"""Validation and planning behind the admin CLI, kept apart from I/O so that bad input is refused
before anything is written and the rules are tested without a cluster.

* ``topics``: replica placement, ``--replica-assignment`` and ``--config`` checks;
* ``reassignment``: Kafka's reassignment JSON, ``--generate`` and ``--verify``;
* ``election``: Kafka's election JSON and result grouping;
* ``describe``: the cluster view (flags per partition, counts per broker) from batched reads.
"""
