"""What the Jepsen-style checkers' verdicts share: counting each kind of violation they find and
keeping its first examples for the report.

`CheckerVerdict` is a trait of the verdicts of kctl.testing.jepsen (`Verdict`) and
kctl.testing.jepsen_eos (`EosVerdict`): each kind of violation is an int field of the verdict,
``note(kind, example)`` counts one and keeps the first `EXAMPLES` examples of that kind, and
``example_lines()`` are those examples as the report's lines."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

EXAMPLES = 10
"""How many examples of each kind of violation a verdict keeps."""


@dataclass
class CheckerVerdict:
    """The examples of each kind of violation a checker noted, by kind (the name of the verdict's
    counter field), in the order noted."""

    examples: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list), kw_only=True)

    def note(self, kind: str, example: str) -> None:
        """One more violation of ``kind``: its counter field goes up by one, and ``example`` is kept
        if fewer than `EXAMPLES` of that kind are."""
        setattr(self, kind, getattr(self, kind) + 1)
        if len(self.examples[kind]) < EXAMPLES:
            self.examples[kind].append(example)

    def example_lines(self) -> list[str]:
        """The kept examples, one indented line each (``  kind: example``), for an assertion
        message or a report."""
        return [f"  {kind}: {example}" for kind, examples in self.examples.items() for example in examples]
