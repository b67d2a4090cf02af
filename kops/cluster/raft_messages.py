"""AddRaftVoter (API key 80) and RemoveRaftVoter (81), KIP-853's RPCs that change a dynamic KRaft
quorum's voter set, as kafka-python messages.

kafka-python 3.0.12 knows the API keys but has no message classes for them. Its ``ApiMessage``
metaclass builds a message from a JSON schema it loads by the class's name from a package: the
schemas in ``kops/cluster/raft_schemas/`` (written from the fields of Kafka's protocol spec) are
that package, so the classes below encode and decode like kafka-python's own messages, and
their answers are decoded by kafka-python's connection (a response class registers itself by
its API key). Sent by :class:`kops.cluster.kp_client.KopsAdminClient`. Drop this module once
the pinned kafka-python has the messages.

Kafka writes a directory id (``directory.id`` in ``meta.properties``, ``kafka-metadata-quorum``'s
output) as the base64url text of its 16 bytes (Kafka's ``Uuid.toString``); kafka-python's uuid
fields take a :class:`uuid.UUID`: :func:`directory_uuid` and :func:`directory_text` convert.
"""

from __future__ import annotations

import base64
import binascii
import uuid

from kafka.protocol.api_message import ApiMessage

from kops.cluster import raft_schemas


class AddRaftVoterRequest(ApiMessage, load_json=raft_schemas):
    pass


class AddRaftVoterResponse(ApiMessage, load_json=raft_schemas):
    pass


class RemoveRaftVoterRequest(ApiMessage, load_json=raft_schemas):
    pass


class RemoveRaftVoterResponse(ApiMessage, load_json=raft_schemas):
    pass


def directory_uuid(text: str | uuid.UUID) -> uuid.UUID:
    """A directory id as Kafka prints it (22 base64url characters) or in the 8-4-4-4-12 form ->
    :class:`uuid.UUID`. ValueError for anything else."""
    if isinstance(text, uuid.UUID):
        return text
    s = str(text).strip()
    if len(s) == 22:
        try:
            raw = base64.urlsafe_b64decode(s + "==")
        except (binascii.Error, ValueError):
            raw = b""
        if len(raw) == 16:
            return uuid.UUID(bytes=raw)
    try:
        return uuid.UUID(s)
    except ValueError:
        raise ValueError(f"directory id {text!r}: not a Kafka Uuid (22 base64url characters)") from None


def directory_text(value: str | uuid.UUID | None) -> str | None:
    """A directory id as Kafka prints it (base64url, no padding); None for None or the zero id
    (a replica whose directory the leader does not know)."""
    if value is None:
        return None
    u = directory_uuid(value)
    if u.int == 0:
        return None
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


__all__ = ["AddRaftVoterRequest", "AddRaftVoterResponse", "RemoveRaftVoterRequest", "RemoveRaftVoterResponse",
           "directory_text", "directory_uuid"]
