"""Examples of kctl's commands: what the EXAMPLES section of each man page shows.

One entry per command (its full name, as on the command line) with (what it does, the command line).
scripts/gen_docs.py renders them into man/; tests/meta/test_generated_docs.py checks that every command
has examples and that each one parses against the command tree, so an example cannot name an
option that no longer exists. A group's page shows the first example of each of its commands.
"""

from __future__ import annotations

Example = tuple[str, str]
"""(what it does, the command line)."""

EXAMPLES: dict[str, tuple[Example, ...]] = {
    "kctl": (
        ("Start a broker on 127.0.0.1:9092 with the embedded registry (no ZooKeeper)", "kctl broker start"),
        ("Create a topic with three partitions", "kctl topic create orders -p 3"),
        ("Write two records to it", "printf 'a\\nb\\n' | kctl produce orders"),
        ("Read them back and exit", "kctl consume orders -o beginning --until end"),
        ("Check every partition directory of a data directory offline", "kctl log verify /data"),
    ),
    # -- broker
    "kctl broker start": (
        ("Start in the foreground with the built-in defaults", "kctl broker start"),
        (
            "Start in the background from a properties file, with one override",
            "kctl broker start --daemon -c server.properties -X num.partitions=3",
        ),
        (
            "Join a ZooKeeper cluster",
            "kctl broker start -X zookeeper.connect=127.0.0.1:2181/kctl -X broker.id=1",
        ),
    ),
    "kctl broker stop": (
        ("Stop the broker started with --daemon (waits for a clean shutdown)", "kctl broker stop"),
    ),
    "kctl broker list": (("List the brokers of a cluster", "kctl broker list -b 127.0.0.1:9092"),),
    # -- top
    "kctl top": (
        ("Watch a cluster live (q quits, s changes the sort, / filters)", "kctl top -b 127.0.0.1:9092"),
        ("One snapshot as JSON, rates over two seconds", "kctl top -b 127.0.0.1:9092 --once -f json -n 2"),
        (
            "Each consumer group's lag, from a script",
            "kctl top --once -f json | jq '.groups[].lag'",
        ),
    ),
    "kctl broker log-dirs describe": (
        ("Size of every partition in every log dir of every broker", "kctl broker log-dirs describe"),
        ("Only one topic, as JSON", "kctl broker log-dirs describe --topic orders -f json"),
    ),
    "kctl broker log-dirs move": (
        (
            "Plan moving partition 0 of orders to another log dir of broker 1",
            "kctl broker log-dirs move --broker 1 --topic orders -p 0 --to /data2",
        ),
        (
            "Move it while it serves, and wait up to a minute",
            "kctl broker log-dirs move --broker 1 --topic orders -p 0 --to /data2 --execute --wait 60",
        ),
    ),
    "kctl broker config describe": (
        ("The dynamic configs of broker 1", "kctl broker config describe --broker 1"),
        (
            "Every config of broker 1 with its value and source",
            "kctl broker config describe --broker 1 --all",
        ),
        ("The cluster-wide dynamic defaults", "kctl broker config describe --default"),
    ),
    "kctl broker config alter": (
        (
            "Plan a cluster-wide change, checked by the broker",
            "kctl broker config alter --default --set log.retention.ms=86400000",
        ),
        (
            "Throttle replication on broker 2",
            "kctl broker config alter --broker 2 --set follower.replication.throttled.rate=10000000"
            " --execute",
        ),
        (
            "Remove the throttle",
            "kctl broker config alter --broker 2 --delete follower.replication.throttled.rate --execute",
        ),
    ),
    "kctl broker logger describe": (
        ("The loggers of broker 1 with a level of their own", "kctl broker logger describe --broker 1"),
        ("The request log's level and where it comes from", "kctl broker logger describe kctl.request"),
        ("Every logger, inherited levels too", "kctl broker logger describe --broker 1 --all -f json"),
    ),
    "kctl broker logger alter": (
        (
            "Turn the request log on at broker 1, now and until it restarts",
            "kctl broker logger alter --broker 1 --set kctl.request=DEBUG --execute",
        ),
        (
            "Back to the configured level",
            "kctl broker logger alter --broker 1 --delete kctl.request --execute",
        ),
        (
            "Plan a change, checked by the broker",
            "kctl broker logger alter --broker 1 --set kctl.broker.replication=DEBUG",
        ),
    ),
    # -- cluster
    "kctl cluster up": (
        ("A ZooKeeper server and three brokers on this machine", "kctl cluster up --brokers 3"),
    ),
    "kctl cluster status": (("Is the local cluster running?", "kctl cluster status -f json"),),
    "kctl cluster start": (
        ("Start the stopped brokers (or the whole stopped cluster) again", "kctl cluster start"),
        ("Start broker 2 only", "kctl cluster start --broker 2"),
    ),
    "kctl cluster stop": (
        ("Stop broker 2 (a controlled shutdown)", "kctl cluster stop --broker 2"),
        ("Stop every broker, then ZooKeeper", "kctl cluster stop"),
    ),
    "kctl cluster restart": (
        ("Restart broker 2 with its recorded configuration", "kctl cluster restart --broker 2"),
        (
            "One broker at a time, the controller last, until no partition is under-replicated after each",
            "kctl cluster restart --rolling --timeout 120",
        ),
    ),
    "kctl cluster down": (("Stop the local cluster", "kctl cluster down"),),
    "kctl cluster list": (("The named clusters of the clusters file", "kctl cluster list"),),
    "kctl cluster info": (
        ("Brokers, controller and every partition's leader, replicas and ISR", "kctl cluster info"),
        ("One topic, as JSON", "kctl cluster info -t orders -f json"),
    ),
    "kctl cluster health": (
        ("Healthy or not, and why (exit 0 or 1)", "kctl cluster health"),
        ("Wait up to two minutes for a healthy cluster", "kctl cluster health --watch --timeout 120"),
    ),
    # -- config
    "kctl config show": (
        (
            "The client configuration a command would use, and where each value comes from",
            "kctl config show -c client.properties -X client.id=tool",
        ),
        ("The broker configuration `kctl broker start` would use", "kctl config show --broker"),
    ),
    # -- records
    "kctl consume": (
        ("Every record of a topic, then exit", "kctl consume orders -o beginning --until end"),
        (
            "The last 100 records of each partition with a template",
            "kctl consume orders -o -100 -f '%p:%o %k=%v\\n'",
        ),
        (
            "Drain a group's backlog as a member, commit and exit",
            "kctl consume orders --group billing --until end",
        ),
        (
            "Copy a topic through a pipe",
            "kctl consume a -o beginning --until end -f jsonl | kctl produce b -f jsonl",
        ),
        ("As kcat users type it (-e: exit at the end)", "kctl consume -t orders -o beginning -e"),
    ),
    "kctl produce": (
        ("One record per line of stdin", "printf 'a\\nb\\n' | kctl produce orders"),
        (
            "Keys and values separated by a colon, acknowledged by every in-sync replica",
            "kctl produce orders -K : --acks all < records.txt",
        ),
        ("Each file is one record", "kctl produce blobs photo.jpg notes.pdf"),
        ("The topic with kcat's -t, then the files", "kctl produce -t blobs photo.jpg"),
    ),
    # -- groups
    "kctl group list": (("Every consumer group with its state", "kctl group list"),),
    "kctl group describe": (
        ("Members, committed offsets and lag of a group", "kctl group describe billing"),
        ("Every group as JSON", "kctl group describe --all -f json"),
    ),
    "kctl group rewind": (
        (
            "Show the plan to rewind a group to the start of its topics",
            "kctl group rewind billing --to-earliest",
        ),
        ("Carry it out", "kctl group rewind billing --to-earliest --execute"),
        (
            "Move back 100 records on one topic",
            "kctl group rewind billing --shift-by -100 --topic orders --execute",
        ),
    ),
    "kctl group delete": (
        ("Delete an empty group", "kctl group delete billing"),
        ("Delete only its offsets for one topic", "kctl group delete billing --offsets --topic orders"),
    ),
    "kctl group migrate": (
        (
            "Plan moving a ZooKeeper consumer group's offsets to the broker",
            "kctl group migrate billing --to kafka --zookeeper zk1:2181/kafka",
        ),
    ),
    # -- log tools
    "kctl log dump": (
        ("Batches of a partition directory", "kctl log dump /data/orders_0"),
        ("Every record, as JSON lines", "kctl log dump /data/orders_0 --deep -f jsonl"),
        (
            "Decode the group coordinator's records",
            "kctl log dump /data/__consumer_offsets_7 --offsets-decoder",
        ),
    ),
    "kctl log verify": (
        ("Check CRCs, offsets and indexes of every partition under /data", "kctl log verify /data"),
    ),
    "kctl log recover": (
        ("Show what recovery would cut", "kctl log recover /data/orders_0 --dry-run"),
        ("Cut a damaged tail (the bytes cut are kept aside)", "kctl log recover /data/orders_0"),
    ),
    "kctl log purge": (
        (
            "Show which segments a one-day retention would delete",
            "kctl log purge /data/orders_0 --retention-ms 86400000 --dry-run",
        ),
        (
            "Delete the segments wholly before offset 5000",
            "kctl log purge /data/orders_0 --before-offset 5000",
        ),
    ),
    # -- mirror
    "kctl mirror": (
        (
            "Mirror two data centres into an aggregate cluster, prefixing topic names",
            "kctl mirror --from dc1 --from dc2 --to agg --rename '{cluster}.{topic}' --include 'orders.*'",
        ),
        ("Show what would be mirrored", "kctl mirror --from dc1 --to agg --dry-run"),
        ("Copy what is there now and exit", "kctl mirror --from dc1 --to agg --once"),
    ),
    # -- partitions
    "kctl partition reassign": (
        (
            "Propose moving a topic's replicas to brokers 2, 3 and 4",
            "kctl partition reassign --generate --topic orders --brokers 2,3,4 -f json",
        ),
        (
            "Start a reassignment from a plan, throttled to 10 MB/s",
            "kctl partition reassign --reassignment-json-file plan.json --execute --throttle 10000000",
        ),
        ("Check on it", "kctl partition reassign --reassignment-json-file plan.json --verify"),
    ),
    "kctl partition elect-leaders": (
        (
            "Move every leader back to its preferred replica",
            "kctl partition elect-leaders --election-type preferred --all-topic-partitions",
        ),
    ),
    # -- perf
    "kctl perf produce": (
        (
            "A million 100-byte records as fast as possible",
            "kctl perf produce bench -n 1000000 -s 100 --throughput -1",
        ),
    ),
    "kctl perf consume": (("Read them back and report the rate", "kctl perf consume bench -n 1000000"),),
    # -- spark
    "kctl spark load": (
        ("Plan loading two topics into Parquet", "kctl spark load orders clicks --to /data/warehouse"),
        (
            "Load them, one Spark task per partition range",
            "kctl spark load orders clicks --to /data/warehouse --execute",
        ),
    ),
    # -- topics
    "kctl topic create": (
        (
            "Six partitions, three replicas, one day of retention",
            "kctl topic create orders -p 6 -r 3 --topic-config retention.ms=86400000",
        ),
        ("Only if it does not exist yet", "kctl topic create orders --if-not-exists"),
    ),
    "kctl topic list": (("Topics with partition count and replication factor", "kctl topic list"),),
    "kctl topic describe": (
        ("Partitions, leaders, replicas and ISR of a topic", "kctl topic describe orders"),
        (
            "Every partition that is under-replicated (exit 1 if there is one)",
            "kctl topic describe --all --under-replicated",
        ),
        (
            "A quick answer when a broker may be down (exit 1 if one did not answer)",
            "kctl topic describe --all -X request.timeout.ms=3000",
        ),
        ("Every config of a topic with its source", "kctl topic describe orders --all-configs"),
    ),
    "kctl topic delete": (("Delete a topic", "kctl topic delete orders --if-exists"),),
    "kctl topic alter": (
        (
            "Grow to 12 partitions and compact",
            "kctl topic alter orders --partitions 12 --topic-config cleanup.policy=compact",
        ),
    ),
    "kctl topic offsets": (
        ("Earliest and latest offset of each partition", "kctl topic offsets orders"),
        ("The offsets of an hour ago", "kctl topic offsets orders --time @-1h"),
    ),
    "kctl topic trim": (
        (
            "Show what trimming partition 0 to its last 1000 records would delete",
            "kctl topic trim orders --to -1000 -p 0",
        ),
        ("Delete it", "kctl topic trim orders --to -1000 -p 0 --execute"),
    ),
    # -- man pages
    "kctl man": (
        ("The page of a command, with its examples", "kctl man topic create"),
        ("Install every page where man finds them (~/.local/share/man/man1)", "kctl man --install"),
    ),
    # -- quotas and transactions
    "kctl quota describe": (
        ("Every client quota", "kctl quota describe"),
        ("The quotas that apply to one user", "kctl quota describe --user alice"),
    ),
    "kctl quota alter": (
        (
            "Plan limiting client id loader to 1 MB/s of produce",
            "kctl quota alter --client-id loader --set producer_byte_rate=1048576",
        ),
        (
            "Set a default consumer rate for every user",
            "kctl quota alter --default user --set consumer_byte_rate=10485760 --execute",
        ),
    ),
    "kctl transactions list": (
        ("Transactions and their states, from every coordinator", "kctl transactions list"),
    ),
    "kctl transactions describe": (
        ("A transactional id's state", "kctl transactions describe --transactional-id payments-tx"),
    ),
    "kctl transactions describe-producers": (
        (
            "Idempotent producers writing to a partition, with their epochs and sequences",
            "kctl transactions describe-producers --topic orders -p 0",
        ),
    ),
    "kctl transactions find-hanging": (
        (
            "Open transactions no coordinator will end, on a broker's partitions",
            "kctl transactions find-hanging --broker-id 1",
        ),
        (
            "Those of one topic, however young",
            "kctl transactions find-hanging --topic orders --max-transaction-timeout 0",
        ),
    ),
    "kctl transactions abort": (
        (
            "Plan aborting the one starting at offset 42",
            "kctl transactions abort --topic orders -p 0 --start-offset 42",
        ),
        ("Write its ABORT marker", "kctl transactions abort --topic orders -p 0 --start-offset 42 --execute"),
    ),
    # -- ZooKeeper
    "kctl zk ls": (("Children of a znode", "kctl zk ls /brokers/ids --zookeeper zk1:2181/kafka"),),
    "kctl zk get": (("A znode's data and stat", "kctl zk get /controller --zookeeper zk1:2181/kafka"),),
    "kctl zk tree": (("The consumers subtree", "kctl zk tree /consumers --zookeeper zk1:2181/kafka"),),
    "kctl zk brokers": (("Registered brokers", "kctl zk brokers --zookeeper zk1:2181/kafka"),),
    "kctl zk topics": (("Topics and their replica assignment", "kctl zk topics --zookeeper zk1:2181/kafka"),),
    "kctl zk consumers": (
        (
            "ZooKeeper consumer groups, their owners and offsets",
            "kctl zk consumers --zookeeper zk1:2181/kafka",
        ),
    ),
    # -- security
    "kctl user create": (
        (
            "A SCRAM-SHA-512 user, password read from stdin",
            "kctl user create alice -m SCRAM-SHA-512 --password-stdin -c admin.properties",
        ),
    ),
    "kctl user delete": (
        ("Remove alice's SCRAM-SHA-256 credential", "kctl user delete alice -m SCRAM-SHA-256"),
    ),
    "kctl user list": (("Users with SCRAM credentials", "kctl user list"),),
    "kctl acl add": (
        (
            "Let alice read topic orders as a member of group billing",
            "kctl acl add --allow-principal User:alice --operation Read --topic orders --group billing",
        ),
    ),
    "kctl acl list": (("Every ACL, as JSON", "kctl acl list -f json"),),
    "kctl acl remove": (
        (
            "Show which ACLs a removal would match",
            "kctl acl remove --principal User:alice --topic orders --dry-run",
        ),
    ),
}
