"""Invariants of the controller's state machine under random request sequences (hypothesis)."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rmqpy.controller import replicas
from rmqpy.controller.elect import DefaultElectPolicy
from rmqpy.controller.state import ReplicasState, event_from_wire
from rmqpy.protocol.bodies.controller import SyncStateSet
from rmqpy.protocol.codes import ResponseCode

NAMES = ("a", "b")
ops = st.lists(st.tuples(
    st.sampled_from(["join", "register", "elect", "elect_ctl", "alter", "clean"]),
    st.sampled_from(NAMES),
    st.integers(1, 5),                     # a broker id / subset seed
    st.frozensets(st.integers(1, 5)),      # the alive brokers
    st.booleans(),
), max_size=60)


def step(state: ReplicasState, op, unclean: bool) -> replicas.Result:
    kind, name, n, alive_ids, flag = op
    alive = lambda c, b, i: i in alive_ids  # noqa: E731
    if kind == "join":
        next_id = replicas.next_broker_id(state, "c", name).header.nextBrokerId
        return replicas.apply_broker_id(state, "c", name, next_id, f"h{next_id}:1;{n}")
    if kind == "register":
        return replicas.register_broker(state, "c", name, n, f"h{n}:{2 if flag else 1}", alive)
    if kind in ("elect", "elect_ctl"):
        return replicas.elect_master(state, name, -1 if kind == "elect_ctl" else n, flag,
                                     DefaultElectPolicy(alive, None), unclean)
    if kind == "alter":
        info = state.sync_state.get(name)
        master = info.masterBrokerId if info else None
        epoch = info.masterEpoch if info else 0
        sss_epoch = info.syncStateSetEpoch if info else 0
        new = frozenset(i for i in range(1, 6) if (n >> (i - 1)) & 1 or i == master)
        return replicas.alter_sync_state_set(state, name, master, epoch, SyncStateSet(new, sss_epoch), alive)
    return replicas.clean_broker_data(state, "c", name, str(n), flag, alive)


@settings(max_examples=300, deadline=None)
@given(ops, st.booleans())
def test_invariants(sequence, unclean):
    state, log = ReplicasState(), []
    epochs: dict[str, tuple[int, int]] = {}
    cleaned = set()
    for op in sequence:
        result = step(state, op, unclean)
        if result.code != ResponseCode.SUCCESS:
            # a refused request changes nothing, except the controller's own failed election,
            # which records that the set has no master (Java's ElectMasterEvent(false))
            assert all(e.kind == "ElectMaster" and not e.newMasterElected for e in result.events)
        for event in result.events:
            wire = event.to_wire()
            log.append(wire)
            state.apply(event_from_wire(wire))
            if event.kind == "CleanBrokerData":
                cleaned.add(event.brokerName)
        for name, info in state.sync_state.items():
            before = epochs.get(name, (0, 0))
            if name not in cleaned:  # epochs never go back while a set lives
                assert info.masterEpoch >= before[0] and info.syncStateSetEpoch >= before[1]
                replica = state.replica_info[name]
                assert info.syncStateSet <= set(replica.brokers)
                if info.masterBrokerId is not None:
                    assert info.masterBrokerId in info.syncStateSet
                    assert info.masterBrokerId in replica.brokers
                assert replica.nextAssignBrokerId > max(replica.brokers, default=0)
            epochs[name] = (info.masterEpoch, info.syncStateSetEpoch)
    # determinism: the log alone rebuilds the same state, and a snapshot round-trips
    again = ReplicasState()
    for wire in log:
        again.apply(event_from_wire(list(wire)))
    assert again.dump() == state.dump()
    assert ReplicasState.load(state.dump()).dump() == state.dump()
