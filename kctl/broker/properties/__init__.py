"""The broker's property definitions, by area: each module defines one list of ConfigKeys built with
:func:`kctl.broker.properties.key.broker_key` (which gives a key Kafka's dynamic update mode), and
kctl.broker.config registers each list in ``BROKER_SECTIONS``, one line per area, in the order they
are documented. To add an area, add a module here and its line there.

This ``__init__`` imports nothing: kctl.broker.config imports the modules."""
