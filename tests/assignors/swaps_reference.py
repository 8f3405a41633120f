"""The general path's swaps as they were before they looked only at the partitions that can
raise the match (``aiogroup/assignors/balancer/racks.py`` at 945d21b, its ``_swaps``), kept as
the reference ``tests/assignors/test_racks_swaps.py`` compares the current swaps with: the same
swaps in the same order while the reference's budget lasts, so never a lower match. One fix
is in both: a partition that changes hands twice and comes back is listed once."""

from __future__ import annotations

from aiogroup.assignors.balancer import racks as balancer_racks
from aiogroup.assignors.balancer.layout import Plan
from aiogroup.assignors.balancer.racks import RackView


def reference_swaps(
    plan: Plan,
    held: list[list[int]],
    owned: list[list[int]],
    load: list[int],
    lowest: list[int],
    subs: list[list[int]],
    topics_of: list[list[int]],
    view: RackView,
) -> Plan:
    """Pairs of partitions change hands while that matches more (see the module doc)."""
    layout = plan.layout
    members = len(held)
    owner_of = [-1] * layout.total
    for i, ids in enumerate(owned):
        for g in ids:
            owner_of[g] = i
    holder = [-1] * layout.total
    for i, ids in enumerate(held):
        for g in ids:
            holder[g] = i
    topic_of = layout.topic_index_of
    member_class, kind_of, kind_racks = view.member_class, view.kind_of, view.kind_racks
    topic_sets = [frozenset(ks) for ks in topics_of]

    def may_hold(i: int, k: int) -> bool:
        return load[i] <= lowest[k] + 1

    receivers: dict[tuple[int, int], list[int]] = {}

    def takers(c: int, k: int) -> list[int]:
        found = receivers.get((c, k))
        if found is None:
            found = receivers[(c, k)] = [
                i for i in subs[k] if member_class[i] == c and may_hold(i, k)
            ]
        return found

    def givable(i: int) -> list[int]:
        """Member i's partitions that it did not own, those not matched first. What a member
        owns and still holds is never swapped: the swaps stop at a work budget, short of a
        local optimum, so moving owned partitions would let every round handed the previous
        one's result move (and, cooperatively, withhold) more, without end. Swapping only the
        partitions that change hands anyway keeps a group's own assignment as it is, and a
        cooperative follow-up round, whose only such partitions are the ones withheld and now
        released, withholds nothing."""
        c = member_class[i]
        return sorted(
            (g for g in held[i] if holder[g] == i and owner_of[g] != i),
            key=lambda g: (c in kind_racks[kind_of[g]], g),
        )

    work = balancer_racks.SWAP_WORK * (layout.total + members) + 10_000
    changed = False
    for a in range(members):
        ca = member_class[a]
        wanted_a = topic_sets[a]
        for g in givable(a):
            if work <= 0:
                break
            if holder[g] != a or ca in kind_racks[kind_of[g]]:
                continue
            k = topic_of[g]
            swapped = False
            for c in sorted(kind_racks[kind_of[g]]):
                for b in takers(c, k):
                    if b == a:
                        continue
                    for h in givable(b):
                        work -= 1
                        kh = topic_of[h]
                        if (
                            holder[h] == b
                            and kh in wanted_a
                            and may_hold(a, kh)
                            and (ca in kind_racks[kind_of[h]] or c not in kind_racks[kind_of[h]])
                        ):
                            holder[g], holder[h] = b, a
                            held[b].append(g)
                            held[a].append(h)
                            swapped = changed = True
                            break
                        if work <= 0:
                            break
                    if swapped or work <= 0:
                        break
                if swapped or work <= 0:
                    break
    if not changed:
        return plan
    kept: list[list[int]] = []
    added: list[list[int]] = []
    for i in range(members):
        mine = [g for g in dict.fromkeys(held[i]) if holder[g] == i]  # g may come back
        kept.append([g for g in mine if owner_of[g] == i])
        added.append([g for g in mine if owner_of[g] != i])
    return Plan(layout, plan.member_ids, kept, added, plan.claimed)
