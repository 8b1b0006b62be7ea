"""The names of Kafka's configuration keys that more than one part of the project reads, each
defined once here (Kafka's ``KafkaConfig`` and ``LogConfig`` spell them the same way).

Where a key is read decides its default, not this module: the controller's ``KafkaConfig`` and
the topic-config catalogues (``admin.topics``, ``broker.kafka_wire.log_configs``) hold the
defaults and the validation; this module only stops the same string from being typed in many
places, where a typo in one of them would read a key nobody sets.
"""

#: Topic-level and broker-level: may the controller elect a leader outside the ISR (Kafka's
#: ``LogConfig.UncleanLeaderElectionEnableProp``).
UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"

#: Topic-level and broker-level: the fewest in-sync replicas an acks=all write needs (Kafka's
#: ``LogConfig.MinInSyncReplicasProp``); under it a partition is "under min ISR".
MIN_INSYNC_REPLICAS = "min.insync.replicas"

#: Broker-level: whether the controller runs its preferred-leader rebalance task (Kafka's
#: ``KafkaConfig.AutoLeaderRebalanceEnableProp``).
AUTO_LEADER_REBALANCE_ENABLE = "auto.leader.rebalance.enable"
