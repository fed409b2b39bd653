"""The process's open-file limit: a broker raises its soft ``RLIMIT_NOFILE`` to the hard limit at
start, as the JVM does for Kafka (``-XX:+MaxFDLimit``), since it holds a descriptor per hosted log
and per connection; a distribution's default soft limit (often 1,024) runs out at a few hundred
partitions. Beyond the hard limit only the operator can go (``ulimit -Hn``, systemd's
``LimitNOFILE``)."""

from __future__ import annotations

import logging

__all__ = ["raise_open_files_limit"]

log = logging.getLogger("kctl.broker")


def raise_open_files_limit() -> tuple[int, int]:
    """Raise the soft limit of open files to the hard one; returns (soft, hard) as they now are.
    Where the platform has no such limit, or refuses, the limit stays and (-1, -1) or the
    unchanged figures are returned."""
    try:
        import resource
    except ImportError:  # not a POSIX platform
        return -1, -1
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft >= hard:
        return soft, hard
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as error:
            log.warning("could not raise the open-files limit from %d to %d: %s", soft, target, error)
            return soft, hard
        log.info("open-files limit raised from %d to %d", soft, target)
        soft = target
    return soft, hard
