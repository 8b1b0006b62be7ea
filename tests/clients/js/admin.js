// KafkaJS 2.2.4 admin calls against a broker, for tests/integration/test_kafkajs.py.
// Usage: node admin.js BOOTSTRAP ACTION TOPIC [PARTITIONS REPLICATION_FACTOR | ASSIGNMENT_JSON]
// ACTION: create, metadata, delete, reassign (ASSIGNMENT_JSON {"partition": [replicas]}), list-reassignments
// Prints one JSON document on stdout; exits non-zero (the error on stderr) when a call fails.
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const [bootstrap, action, topic, partitions, replicationFactor] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: "kc-kafkajs", brokers: [bootstrap], logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  try {
    let out;
    if (action === "create") {
      const created = await admin.createTopics({
        waitForLeaders: true,
        timeout: 30000,
        topics: [
          {
            topic,
            numPartitions: Number(partitions),
            replicationFactor: Number(replicationFactor),
            configEntries: [{ name: "retention.ms", value: "86400000" }],
          },
        ],
      });
      out = { created };
    } else if (action === "metadata") {
      const md = await admin.fetchTopicMetadata({ topics: [topic] });
      out = md.topics.map((t) => ({
        name: t.name,
        partitions: t.partitions
          .map((p) => ({ partition: p.partitionId, leader: p.leader, replicas: p.replicas, isr: p.isr }))
          .sort((a, b) => a.partition - b.partition),
      }));
    } else if (action === "delete") {
      await admin.deleteTopics({ topics: [topic], timeout: 30000 });
      out = { deleted: topic, topics: await admin.listTopics() };
    } else if (action === "reassign") {
      const assignment = JSON.parse(partitions);
      const partitionAssignment = Object.entries(assignment).map(([p, replicas]) => ({
        partition: Number(p),
        replicas,
      }));
      await admin.alterPartitionReassignments({ topics: [{ topic, partitionAssignment }], timeout: 30000 });
      out = { reassigned: topic };
    } else if (action === "list-reassignments") {
      const listed = await admin.listPartitionReassignments({ timeout: 30000 });
      out = listed.topics
        .filter((t) => t.topic === topic || t.name === topic)
        .flatMap((t) => t.partitions)
        .map((p) => ({
          partition: p.partition,
          replicas: p.replicas,
          adding: p.addingReplicas,
          removing: p.removingReplicas,
        }))
        .sort((a, b) => a.partition - b.partition);
    } else {
      throw new Error(`unknown action ${action}`);
    }
    process.stdout.write(JSON.stringify(out) + "\n");
  } finally {
    await admin.disconnect();
  }
}

main().catch((e) => {
  process.stderr.write(`${e.name}: ${e.message}${e.type ? " (" + e.type + ")" : ""}\n`);
  process.exit(1);
});
