"""Declarative schemas of the Kafka APIs kctl speaks: one module per API (or small group).

Each module declares its request/response structs with ``kctl.protocol.types.struct`` and an
``ApiSchema`` (api key, valid versions, flexible versions), written from the facts of Apache Kafka's
published message specs (3.9). ``kctl.protocol.registry`` collects them by api key.
"""
