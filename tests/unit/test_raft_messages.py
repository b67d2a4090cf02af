"""KIP-853's AddRaftVoter and RemoveRaftVoter as kops builds them for kafka-python
(kops/cluster/raft_messages.py, kops/cluster/kp_client.py): the bytes each version puts on the
wire, laid out by hand from Kafka's protocol (flexible versions: compact strings and arrays,
tagged fields), the answers decoded, and the refusal of a quorum that cannot change."""

from __future__ import annotations

import asyncio
import struct
import uuid

import pytest

from kops.cluster import raft_voters
from kops.cluster.features import Features, FeatureState
from kops.cluster.kp_client import KopsAdminClient
from kops.cluster.raft_messages import (
    AddRaftVoterRequest, AddRaftVoterResponse, RemoveRaftVoterRequest, RemoveRaftVoterResponse, directory_text,
    directory_uuid,
)
from kops.errors import BadInput

DIR = uuid.UUID("6a1f1c4e-93b2-4d1c-8e57-0b2a1d9c3f10")


def _compact(text: str | None) -> bytes:
    """A compact (nullable) string: unsigned varint length + 1 (0 for null), then UTF-8 (all
    lengths here are below 128: one byte)."""
    if text is None:
        return b"\x00"
    raw = text.encode()
    return bytes([len(raw) + 1]) + raw


def test_add_raft_voter_v0_and_v1_on_the_wire():
    listener = AddRaftVoterRequest.Listener
    req = AddRaftVoterRequest(cluster_id="c-1", timeout_ms=30000, voter_id=1003, voter_directory_id=DIR,
                              listeners=[listener(name="CONTROLLER", host="127.0.0.1", port=19093)],
                              ack_when_committed=True)
    v0 = (_compact("c-1") + struct.pack(">ii", 30000, 1003) + DIR.bytes
          + b"\x02" + _compact("CONTROLLER") + _compact("127.0.0.1") + struct.pack(">H", 19093) + b"\x00"
          + b"\x00")
    assert req.encode(version=0) == v0
    v1 = v0[:-1] + b"\x01" + b"\x00"  # AckWhenCommitted (v1+) before the tagged fields
    assert req.encode(version=1) == v1
    back = AddRaftVoterRequest.decode(v1, version=1)
    assert (back.voter_id, back.voter_directory_id, back.timeout_ms) == (1003, DIR, 30000)
    assert [(x.name, x.host, x.port) for x in back.listeners] == [("CONTROLLER", "127.0.0.1", 19093)]
    assert AddRaftVoterRequest.API_KEY == 80 and AddRaftVoterRequest.max_version == 1


def test_remove_raft_voter_v0_on_the_wire_with_a_null_cluster_id():
    req = RemoveRaftVoterRequest(cluster_id=None, voter_id=1000, voter_directory_id=DIR)
    assert req.encode(version=0) == b"\x00" + struct.pack(">i", 1000) + DIR.bytes + b"\x00"
    assert RemoveRaftVoterRequest.API_KEY == 81 and RemoveRaftVoterRequest.max_version == 0


@pytest.mark.parametrize(("cls", "version"), [(AddRaftVoterResponse, 0), (AddRaftVoterResponse, 2),
                                              (RemoveRaftVoterResponse, 0)])
def test_answers_decode(cls, version):
    wire = struct.pack(">ih", 7, 35) + _compact("Cluster doesn't support adding voter") + b"\x00"
    got = cls.decode(wire, version=version)
    assert (got.throttle_time_ms, got.error_code, got.error_message) == (7, 35, "Cluster doesn't support adding voter")
    ok = cls.decode(struct.pack(">ih", 0, 0) + b"\x00\x00", version=version)
    assert ok.error_code == 0 and ok.error_message is None


def test_the_connection_decodes_the_answers_with_these_classes():
    """kafka-python's connection picks the response class by the request header's API key."""
    from kafka.protocol.api_header import ResponseClassRegistry, RequestHeader

    for req, resp in ((AddRaftVoterRequest, AddRaftVoterResponse), (RemoveRaftVoterRequest, RemoveRaftVoterResponse)):
        header = RequestHeader(request_api_key=req.API_KEY, request_api_version=0, correlation_id=1, client_id="kops")
        assert ResponseClassRegistry.get_response_class(header).name == resp.name


def test_directory_ids_in_kafkas_text_form():
    text = directory_text(DIR)
    assert len(text) == 22 and "=" not in text
    assert directory_uuid(text) == DIR and directory_uuid(str(DIR)) == DIR
    assert directory_text(uuid.UUID(int=0)) is None and directory_text(None) is None
    with pytest.raises(ValueError, match="not a Kafka Uuid"):
        directory_uuid("nope")


class _Manager:
    """kafka-python's connection manager reduced to one canned answer; keeps what was sent."""

    def __init__(self, answer):
        self.answer, self.sent = answer, []

    async def send(self, request, node_id=None, request_timeout_ms=None):
        self.sent.append((request, request_timeout_ms))
        return self.answer

    def run(self, coro, *args):
        return asyncio.run(coro(*args))


def _client(answer):
    client = object.__new__(KopsAdminClient)
    client._manager = _Manager(answer)
    return client


def test_the_client_sends_add_and_remove_and_raises_the_leaders_error():
    import kafka.errors as Errors

    client = _client(AddRaftVoterResponse(version=0, throttle_time_ms=0, error_code=0, error_message=None))
    client.add_raft_voter(1003, directory_text(DIR), [("CONTROLLER", "127.0.0.1", 19093)], timeout_ms=20000)
    (req, timeout_ms), = client._manager.sent
    assert isinstance(req, AddRaftVoterRequest) and req.voter_directory_id == DIR and timeout_ms > 20000
    refused = RemoveRaftVoterResponse(version=0, throttle_time_ms=0, error_code=35,
                                      error_message="Cluster doesn't support removing voter")
    with pytest.raises(Errors.UnsupportedVersionError, match="removing voter"):
        _client(refused).remove_raft_voter(1000, DIR)


@pytest.mark.parametrize(("state", "needs"), [
    (None, "Kafka 3.9 or later (KIP-853: AddRaftVoter v0)"),
    (FeatureState("kraft.version", 0, 0, None), "Kafka 3.9 or later (KIP-853: AddRaftVoter v0)"),
    (FeatureState("kraft.version", 0, 1, None), "this cluster's quorum is static (kraft.version finalized at 0"),
    (FeatureState("kraft.version", 0, 1, 0), "kraft.version feature level 1"),
])
def test_a_quorum_that_cannot_change_is_named(state, needs):
    mv = FeatureState("metadata.version", 7, 21, 21)
    problem = raft_voters.dynamic_quorum_problem(Features((mv, state) if state else (mv,)))
    assert problem is not None and needs in problem


def test_a_dynamic_quorum_passes():
    assert raft_voters.dynamic_quorum_problem(Features((FeatureState("kraft.version", 0, 1, 1),))) is None


def test_unsupported_is_bad_input():
    assert issubclass(raft_voters.Unsupported, BadInput)
