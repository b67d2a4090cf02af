"""Adapters to a live cluster: Admin API (confluent-kafka; kafka-python for the RPCs it lacks),
ZooKeeper (kazoo) and snapshot files. Everything else reaches a cluster only through here."""
