"""The ACL APIs: DescribeAcls (key 29), CreateAcls (key 30), DeleteAcls (key 31), v0–3 each, flexible
from v2. v1 added the resource pattern type (LITERAL before it). Enum values: kctl.protocol.acl_types."""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import INT8, INT16, INT32, STRING, Field, array, struct

DescribeAclsRequest = struct(
    "DescribeAclsRequest",
    Field("resource_type_filter", INT8),
    Field("resource_name_filter", STRING, nullable="0+", default=None),
    Field("pattern_type_filter", INT8, "1+", default=3),
    Field("principal_filter", STRING, nullable="0+", default=None),
    Field("host_filter", STRING, nullable="0+", default=None),
    Field("operation", INT8),
    Field("permission_type", INT8),
)

AclDescription = struct(
    "AclDescription",
    Field("principal", STRING),
    Field("host", STRING),
    Field("operation", INT8),
    Field("permission_type", INT8),
)

DescribeAclsResource = struct(
    "DescribeAclsResource",
    Field("resource_type", INT8),
    Field("resource_name", STRING),
    Field("pattern_type", INT8, "1+", default=3),
    Field("acls", array(AclDescription)),
)

DescribeAclsResponse = struct(
    "DescribeAclsResponse",
    Field("throttle_time_ms", INT32),
    Field("error_code", INT16),
    Field("error_message", STRING, nullable="0+", default=None),
    Field("resources", array(DescribeAclsResource)),
)

DESCRIBE_ACLS = ApiSchema(29, "DescribeAcls", "0-3", "2+", DescribeAclsRequest, DescribeAclsResponse)

AclCreation = struct(
    "AclCreation",
    Field("resource_type", INT8),
    Field("resource_name", STRING),
    Field("resource_pattern_type", INT8, "1+", default=3),
    Field("principal", STRING),
    Field("host", STRING),
    Field("operation", INT8),
    Field("permission_type", INT8),
)

CreateAclsRequest = struct("CreateAclsRequest", Field("creations", array(AclCreation)))

AclCreationResult = struct(
    "AclCreationResult",
    Field("error_code", INT16),
    Field("error_message", STRING, nullable="0+", default=None),
)

CreateAclsResponse = struct(
    "CreateAclsResponse",
    Field("throttle_time_ms", INT32),
    Field("results", array(AclCreationResult)),
)

CREATE_ACLS = ApiSchema(30, "CreateAcls", "0-3", "2+", CreateAclsRequest, CreateAclsResponse)

DeleteAclsFilter = struct(
    "DeleteAclsFilter",
    Field("resource_type_filter", INT8),
    Field("resource_name_filter", STRING, nullable="0+", default=None),
    Field("pattern_type_filter", INT8, "1+", default=3),
    Field("principal_filter", STRING, nullable="0+", default=None),
    Field("host_filter", STRING, nullable="0+", default=None),
    Field("operation", INT8),
    Field("permission_type", INT8),
)

DeleteAclsRequest = struct("DeleteAclsRequest", Field("filters", array(DeleteAclsFilter)))

DeleteAclsMatchingAcl = struct(
    "DeleteAclsMatchingAcl",
    Field("error_code", INT16),
    Field("error_message", STRING, nullable="0+", default=None),
    Field("resource_type", INT8),
    Field("resource_name", STRING),
    Field("pattern_type", INT8, "1+", default=3),
    Field("principal", STRING),
    Field("host", STRING),
    Field("operation", INT8),
    Field("permission_type", INT8),
)

DeleteAclsFilterResult = struct(
    "DeleteAclsFilterResult",
    Field("error_code", INT16),
    Field("error_message", STRING, nullable="0+", default=None),
    Field("matching_acls", array(DeleteAclsMatchingAcl)),
)

DeleteAclsResponse = struct(
    "DeleteAclsResponse",
    Field("throttle_time_ms", INT32),
    Field("filter_results", array(DeleteAclsFilterResult)),
)

DELETE_ACLS = ApiSchema(31, "DeleteAcls", "0-3", "2+", DeleteAclsRequest, DeleteAclsResponse)
