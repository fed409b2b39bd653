"""The broker's security: listeners' security protocols and TLS (``listeners.py``), SASL
authentication per connection (``sasl.py``: PLAIN and SCRAM-SHA-256/512, credentials from the
security store), ACL authorization with Kafka's model (``acls.py``), and their configuration
(``config.py``, part of BROKER_CONFIGS). The store itself (ZooKeeper or a file under the data
directory) is kctl.zk.security_store.

This ``__init__`` imports nothing: kctl.broker.config imports ``config.py`` from here."""
