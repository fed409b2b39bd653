"""The console producer and consumer as a library: what `kctl produce` and `kctl consume` do
between parsing their options and rendering, usable from Python.

Layering: above ``kctl.client``, below ``kctl.perf`` and ``kctl.commands``.

* ``formats``   — the JSON envelope of a record (bytes as text or {"base64": ...}), record
  templates (`%t %p %o %T %k %v %h`), readable timestamps.
* ``produce``   — input parsing (lines with key separator and null marker, JSON lines) and
  ``ProduceSession`` (send in input order, report outcomes in input order).
* ``consume``   — ``ReadLoop`` (read assigned partitions up to their ranges' ends), group reading,
  the default start.
* ``selection`` — checking and selecting topics and partitions, positioning a consumer.
"""
