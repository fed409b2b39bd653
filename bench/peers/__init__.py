"""The peer harness (issue 18): kctl beside Apache Kafka (and Tansu when installed) in one interleaved run.

``brokers`` starts and stops each system (pinned to its own cores with ``taskset`` when the machine has
them) and reads its CPU and memory from /proc; ``workloads`` holds the measurements, each run against
one broker and answering a dict of named figures; ``cluster`` holds the ``--cluster`` systems (3 brokers
each, replication factor 3). ``bench/bench_peers.py`` is the command."""
