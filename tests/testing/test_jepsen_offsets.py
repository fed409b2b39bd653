"""The committed-offsets checker (kctl.testing.jepsen_offsets) on observations and commit logs written
by hand: an answer older in the log than one seen before is a regression (a lower number the log
holds later is not), errors and cut lines are counted apart."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from kctl.testing.jepsen_offsets import CommittedOffsetsWatcher


def _watcher(
    tmp_path: Path, lines: list[str], history: Mapping[int, Sequence[int]]
) -> CommittedOffsetsWatcher:
    output = tmp_path / "offsets.jsonl"
    output.write_text("".join(line + "\n" for line in lines))
    watcher = CommittedOffsetsWatcher("127.0.0.1:1", "t", "g", output)
    watcher.stop(history)  # never started: only reads the file back
    return watcher


def test_a_committed_offset_that_goes_back_is_a_regression(tmp_path: Path) -> None:
    watcher = _watcher(
        tmp_path,
        [
            json.dumps({"offsets": {"0": 10, "1": 5}}),
            json.dumps({"error": "offset fetch: NOT_COORDINATOR"}),
            json.dumps({"offsets": {"0": 12, "1": 4}}),
            '{"offsets": {"0": 1',  # cut short by the stop
        ],
        {0: [10, 12], 1: [4, 5]},  # partition 1: 4 was committed before 5
    )
    assert watcher.regressions == [
        "t/1: committed offset went back: answer 1 is 4, a commit older in the log than the 5 answered before"
    ]
    assert watcher.observations == 2
    assert watcher.highest == {0: 12, 1: 5}
    assert watcher.errors == ["offset fetch: NOT_COORDINATOR"]


def test_offsets_that_follow_the_log_are_no_regression(tmp_path: Path) -> None:
    watcher = _watcher(tmp_path, [json.dumps({"offsets": {"0": n}}) for n in (1, 1, 7, 3)], {0: [1, 7, 3]})
    assert watcher.regressions == [] and watcher.observations == 4 and watcher.highest == {0: 7}
