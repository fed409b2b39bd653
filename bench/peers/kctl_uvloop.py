"""Run ``kctl`` (its broker) on uvloop's event loop instead of asyncio's: the peer harness's ``--uvloop``
(evaluation only; uvloop is not a kctl dependency).

Usage: python bench/peers/kctl_uvloop.py broker start ..."""

from __future__ import annotations

import asyncio
import sys

import uvloop

from kctl.__main__ import main

if __name__ == "__main__":
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    sys.exit(main(sys.argv[1:]))
