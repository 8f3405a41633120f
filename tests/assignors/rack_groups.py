"""Random groups with racks (KIP-881) for the rack-aware assignor tests: topics, the racks of
each partition's replicas, and members with racks, subscriptions and owned partitions."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

from aiogroup.assignors.base import PartitionRacks
from aiogroup.protocol.types import Subscription

RACKS = ("a", "b", "c", "d")


@dataclass
class RackGroup:
    partitions_per_topic: dict[str, int]
    partition_racks: dict[str, list[frozenset[str]]]
    subscriptions: dict[str, Subscription] = field(default_factory=dict)

    @property
    def racks(self) -> PartitionRacks:
        return self.partition_racks


@st.composite
def rack_groups(
    draw: st.DrawFn,
    *,
    max_topics: int = 4,
    max_partitions: int = 9,
    max_members: int = 6,
    equal_subscriptions: bool | None = None,
    static: bool = False,
) -> RackGroup:
    """A group: topics (some with equal counts, to be co-partitioned), each partition's racks
    (a random subset of a few racks, or the same for all), members with a rack, none, or ""."""
    racks = draw(st.lists(st.sampled_from(RACKS), min_size=1, max_size=4, unique=True))
    ntopics = draw(st.integers(1, max_topics))
    counts = draw(st.lists(st.integers(1, max_partitions), min_size=1, max_size=3))
    ppt = {f"t{k}": draw(st.sampled_from(counts)) for k in range(ntopics)}
    rack_sets = st.frozensets(st.sampled_from(racks), max_size=len(racks))
    same = draw(st.booleans()) and draw(st.booleans())  # a quarter: every partition alike
    shared = draw(rack_sets)
    partition_racks = {
        t: [shared if same else draw(rack_sets) for _ in range(n)] for t, n in ppt.items()
    }
    topics = sorted(ppt)
    nmembers = draw(st.integers(1, max_members))
    uniform = draw(st.booleans()) if equal_subscriptions is None else equal_subscriptions
    member_racks = st.one_of(st.sampled_from(racks), st.none(), st.just(""))
    subscriptions: dict[str, Subscription] = {}
    for i in range(nmembers):
        subscribed = (
            topics
            if uniform
            else sorted(draw(st.sets(st.sampled_from(topics), min_size=1, max_size=len(topics))))
        )
        instance = None
        if static and draw(st.booleans()):
            instance = f"i{draw(st.integers(0, 99)):02d}-{i}"
        subscriptions[f"m{i}"] = Subscription(
            subscribed, rack_id=draw(member_racks), group_instance_id=instance
        )
    return RackGroup(ppt, partition_racks, subscriptions)
