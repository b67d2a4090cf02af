"""Topic filters: which topics a planner or a cron job may touch (``--topics REGEX`` /
``--exclude-topics REGEX``).

A topic is kept when its *whole* name matches ``--topics`` (every topic when not given) and does
not match ``--exclude-topics``: ``orders`` keeps ``orders`` only, ``orders.*`` every topic whose
name starts with it. Python's ``re`` syntax (the common subset with Java's for names: ``.``,
``*``, ``|``, classes), checked by :func:`kops.inputs.values.topic_regex`. Kafka's internal topics (``__consumer_offsets``, ``__transaction_state``)
and kops' own (``__kops_journal``) are topics like the others: kept unless a filter leaves them
out, and when one does, what is left out names them, so a filter never drops them unseen.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kops.errors import BadInput
from kops.model import Topology

#: topics Kafka or kops create for themselves (besides those the metadata marks internal): named
#: apart in what a filter leaves out
INTERNAL = ("__consumer_offsets", "__transaction_state", "__kops_journal", "__kops_cordons")


@dataclass(frozen=True)
class TopicFilter:
    """``--topics`` / ``--exclude-topics``, compiled. :meth:`keeps` is what a planner asks."""

    include: re.Pattern[str] | None = None
    exclude: re.Pattern[str] | None = None

    @classmethod
    def of(cls, topics: re.Pattern[str] | None, exclude_topics: re.Pattern[str] | None) -> TopicFilter | None:
        """The filter of the two options (compiled by :func:`kops.inputs.values.topic_regex`); None
        when neither is given (every topic)."""
        if topics is None and exclude_topics is None:
            return None
        return cls(topics, exclude_topics)

    def keeps(self, topic: str) -> bool:
        if self.include is not None and not self.include.fullmatch(topic):
            return False
        return not (self.exclude is not None and self.exclude.fullmatch(topic))

    def describe(self) -> str:
        parts = []
        if self.include is not None:
            parts.append(f"--topics {self.include.pattern!r}")
        if self.exclude is not None:
            parts.append(f"--exclude-topics {self.exclude.pattern!r}")
        return " ".join(parts)

    def left_out(self, topology: Topology) -> dict[str, Any]:
        """What the filter leaves out of ``topology``'s topics, for a report: the filter, how
        many topics and partitions, the internal topics by name and up to 20 other names.
        BadInput when it keeps no topic: a mistyped regex must not plan nothing quietly."""
        partitions_of = {t.name: len(t.partitions) for t in topology.topics}
        flagged = {t.name for t in topology.topics if t.internal} | set(INTERNAL)
        out = sorted(t for t in partitions_of if not self.keeps(t))
        if partitions_of and len(out) == len(partitions_of):
            some = ", ".join(sorted(partitions_of)[:10]) + (" ..." if len(partitions_of) > 10 else "")
            raise BadInput(f"{self.describe()}: no topic of the cluster is kept (its topics: {some})")
        internal = [t for t in out if t in flagged]
        return {
            "filter": self.describe(),
            "topics": len(out),
            "partitions": sum(partitions_of[t] for t in out),
            "internal": internal,
            "examples": [t for t in out if t not in internal][:20],
            "topics_kept": len(partitions_of) - len(out),
        }

    def check_named(self, names: Iterable[str], what: str) -> None:
        """Topics named on the command line (``--topic``) that the filter leaves out: BadInput,
        the two contradict each other."""
        dropped = [t for t in names if not self.keeps(t)]
        if dropped:
            raise BadInput(f"{what}: {', '.join(dropped)} named and left out by {self.describe()}: "
                           "drop the topic or change the filter")


def left_out_text(left: dict[str, Any]) -> str:
    """One line for people: what a filter left out (:meth:`TopicFilter.left_out`)."""
    if not left["topics"]:
        return f"{left['filter']}: every topic kept ({left['topics_kept']})"
    names = [f"internal {t}" for t in left["internal"]] + left["examples"]
    more = left["topics"] - len(names)
    return (f"{left['filter']}: {left['topics']} topics ({left['partitions']} partitions) left out, not "
            f"touched: {', '.join(names)}" + (f" and {more} more" if more > 0 else ""))


__all__ = ["INTERNAL", "TopicFilter", "left_out_text"]
