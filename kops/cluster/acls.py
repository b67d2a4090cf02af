"""The cluster's ACLs as DescribeAcls answers them, and its SASL/SCRAM users as
DescribeUserScramCredentials does (the migration's snapshot keeps both: a ZooKeeper -> KRaft
migration carries them into the metadata log)."""

from __future__ import annotations


def read_acls(conn) -> tuple[list[list[str]], str]:
    """Every ACL (DescribeAcls, any resource), or none with a note when the cluster has no
    authorizer (SECURITY_DISABLED)."""
    from confluent_kafka.admin import (AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType,
                                       ResourceType)

    flt = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                           AclPermissionType.ANY)
    try:
        bindings = conn.admin().describe_acls(flt, request_timeout=conn.timeout_s).result()
    except Exception as e:  # noqa: BLE001 - told apart below
        text = str(e)
        if "SECURITY_DISABLED" in text or "No Authorizer" in text or "Security features are disabled" in text:
            return [], "no authorizer configured (DescribeAcls: SECURITY_DISABLED): no ACLs"
        raise conn.map_error(e, "describe ACLs") from None
    acls = sorted([b.restype.name, b.name, b.resource_pattern_type.name, b.principal, b.host, b.operation.name,
                   b.permission_type.name] for b in bindings)
    return acls, f"{len(acls)} ACLs"


def read_scram_users(conn) -> tuple[dict[str, list[str]], str]:
    """Every SCRAM user and its credentials' mechanism and iterations (never a salt or key), as
    ``{user: ["SCRAM-SHA-512/4096", ...]}``; none with a note where the cluster cannot tell
    (a Kafka before 2.7: UNSUPPORTED_VERSION)."""
    try:
        found = conn.admin().describe_user_scram_credentials(request_timeout=conn.timeout_s).result()
    except Exception as e:  # noqa: BLE001 - told apart below
        if "UNSUPPORTED_VERSION" in str(e) or "not supported" in str(e).lower():
            return {}, "SCRAM users not readable (DescribeUserScramCredentials unsupported)"
        raise conn.map_error(e, "describe SCRAM users") from None
    users = {u: sorted(f"{_mechanism(i.mechanism)}/{i.iterations}" for i in d.scram_credential_infos)
             for u, d in sorted(found.items())}
    return users, f"{len(users)} SCRAM users"


def _mechanism(m) -> str:
    """``SCRAM-SHA-512`` of confluent-kafka's ScramMechanism (``SCRAM_SHA_512``)."""
    return getattr(m, "name", str(m)).replace("_", "-")


__all__ = ["read_acls", "read_scram_users"]
