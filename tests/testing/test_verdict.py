"""The checkers' shared verdict bookkeeping (kctl/testing/verdict.py): every violation is counted, only
the first examples of each kind are kept, and a verdict's own fields keep their positions."""

from __future__ import annotations

from dataclasses import dataclass

from kctl.testing.jepsen import Verdict
from kctl.testing.jepsen_eos import EosVerdict
from kctl.testing.verdict import EXAMPLES, CheckerVerdict


@dataclass
class _Tally(CheckerVerdict):
    lost: int = 0
    late: int = 0


def test_every_violation_is_counted_and_the_first_examples_kept() -> None:
    tally = _Tally()
    for n in range(EXAMPLES + 3):
        tally.note("lost", f"record {n}")
    tally.note("late", "record x")
    assert (tally.lost, tally.late) == (EXAMPLES + 3, 1)
    assert tally.examples["lost"] == [f"record {n}" for n in range(EXAMPLES)]
    lines = tally.example_lines()
    assert lines[0] == "  lost: record 0" and lines[-1] == "  late: record x"
    assert len(lines) == EXAMPLES + 1


def test_each_verdict_has_its_own_examples_and_its_fields_first() -> None:
    one, two = _Tally(), _Tally()
    one.note("lost", "a")
    assert two.examples == {} and two.example_lines() == []
    assert (Verdict(3, 4).acknowledged, Verdict(3, 4).read) == (3, 4)
    assert EosVerdict(7).records == 7
