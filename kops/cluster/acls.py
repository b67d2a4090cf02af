"""The cluster's ACLs as DescribeAcls answers them (the migration's snapshot keeps them)."""

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


__all__ = ["read_acls"]
