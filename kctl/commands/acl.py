"""`kctl acl`: the jobs of ``kafka-acls.sh`` — add, list and remove ACLs through the brokers
(CreateAcls, DescribeAcls, DeleteAcls). Resources: ``--topic``, ``--group``, ``--transactional-id``
(repeatable) and ``--cluster``, literal (a name of ``*`` matches every name) or, with
``--resource-pattern-type prefixed``, every name starting with the given one. ``add`` and ``remove``
take ``--dry-run`` to show what would change without changing it."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kctl.commands.clients import admin_session
from kctl.commands.errors import ExitCode, KctlError
from kctl.commands.options import DEFAULT_FORMAT, ClusterOptions, FormatOption, cluster_options
from kctl.commands.output import info, render_rows

if TYPE_CHECKING:
    from kctl.client.admin.security import AclBinding
    from kctl.protocol.acl_types import AclResourceType

app = typer.Typer(
    help="Manage ACLs (who may do what on which topics, groups and the cluster).", no_args_is_help=True
)

COLUMNS = ["principal", "permission", "operation", "host", "resource_type", "pattern_type", "resource_name"]
STATUS_COLUMNS = [*COLUMNS, "status", "message"]

TopicOption = Annotated[list[str] | None, typer.Option("--topic", help="A topic (repeatable; * for all).")]
GroupOption = Annotated[
    list[str] | None, typer.Option("--group", help="A consumer group (repeatable; * for all).")
]
TransactionalIdOption = Annotated[
    list[str] | None, typer.Option("--transactional-id", help="A transactional id (repeatable).")
]
ClusterOption = Annotated[bool, typer.Option("--cluster", help="The cluster resource.")]
PatternOption = Annotated[
    str,
    typer.Option(
        "--resource-pattern-type",
        help="literal or prefixed (add); any, match, literal or prefixed (list, remove).",
    ),
]
OperationOption = Annotated[
    list[str] | None,
    typer.Option(
        "--operation",
        help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, "
        "IdempotentWrite or All (repeatable).",
    ),
]
DryRunOption = Annotated[bool, typer.Option("--dry-run", help="Show what would change; change nothing.")]


def _enum(cls: type, text: str, what: str) -> Any:
    from kctl.protocol.acl_types import parse_enum

    try:
        return parse_enum(cls, text)
    except ValueError:
        raise KctlError(f"unknown {what} {text!r}", ExitCode.USAGE) from None


def _resources(
    topics: list[str] | None, groups: list[str] | None, txn_ids: list[str] | None, cluster: bool
) -> list[tuple[AclResourceType, str]]:
    from kctl.protocol.acl_types import CLUSTER_NAME, AclResourceType

    out = [(AclResourceType.TOPIC, t) for t in topics or []]
    out += [(AclResourceType.GROUP, g) for g in groups or []]
    out += [(AclResourceType.TRANSACTIONAL_ID, t) for t in txn_ids or []]
    if cluster:
        out.append((AclResourceType.CLUSTER, CLUSTER_NAME))
    return out


def _check_principal(principal: str) -> str:
    if ":" not in principal:
        raise KctlError(f"principal {principal!r} is not TYPE:NAME (e.g. User:alice)", ExitCode.USAGE)
    return principal


@app.command("add")
@cluster_options
def add(
    allow_principal: Annotated[
        list[str] | None, typer.Option("--allow-principal", help="Principal allowed (User:NAME; repeatable).")
    ] = None,
    deny_principal: Annotated[
        list[str] | None, typer.Option("--deny-principal", help="Principal denied (User:NAME; repeatable).")
    ] = None,
    host: Annotated[
        list[str] | None, typer.Option("--host", help="Host the ACL applies to (default *).")
    ] = None,
    operation: OperationOption = None,
    topic: TopicOption = None,
    group: GroupOption = None,
    transactional_id: TransactionalIdOption = None,
    cluster_resource: ClusterOption = False,
    pattern: PatternOption = "literal",
    dry_run: DryRunOption = False,
    fmt: FormatOption = DEFAULT_FORMAT,
    *,
    cluster: ClusterOptions,
) -> None:
    """Add ACLs: every principal x host x operation x resource given.

    Exit status 2 without a principal, an operation or a resource; 1 if the broker refuses one (e.g.
    SECURITY_DISABLED when no authorizer is configured, CLUSTER_AUTHORIZATION_FAILED)."""
    from kctl.client.admin.security import AclBinding
    from kctl.protocol.acl_types import AclOperation, AclPermissionType, PatternType
    from kctl.protocol.errors import error_name

    resources = _resources(topic, group, transactional_id, cluster_resource)
    principals = [(_check_principal(p), AclPermissionType.ALLOW) for p in allow_principal or []]
    principals += [(_check_principal(p), AclPermissionType.DENY) for p in deny_principal or []]
    if not resources or not principals or not operation:
        raise KctlError("give a resource, --allow-principal/--deny-principal and --operation", ExitCode.USAGE)
    pattern_type = _enum(PatternType, pattern, "pattern type")
    if pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise KctlError("add takes --resource-pattern-type literal or prefixed", ExitCode.USAGE)
    operations = [_enum(AclOperation, o, "operation") for o in operation]
    bindings = [
        AclBinding(rtype, name, pattern_type, principal, h, op, permission)
        for (rtype, name), (principal, permission), h, op in itertools.product(
            resources, principals, host or ["*"], operations
        )
    ]
    if dry_run:
        rows = [{**b.row(), "status": "would add", "message": None} for b in bindings]
        render_rows(rows, STATUS_COLUMNS, fmt)
        return
    with admin_session(*cluster) as admin:
        results = admin.create_acls(bindings)
    rows = [
        {
            **r.binding.row(),
            "status": "added" if r.error_code == 0 else error_name(r.error_code),
            "message": r.error_message,
        }
        for r in results
    ]
    render_rows(rows, STATUS_COLUMNS, fmt)
    failed = [r for r in results if r.error_code]
    if failed:
        raise typer.Exit(ExitCode.FAILURE)
    info(f"added {len(results)} ACL(s)")


def _filters(
    topic: list[str] | None,
    group: list[str] | None,
    transactional_id: list[str] | None,
    cluster_resource: bool,
    pattern: str,
    principal: str | None,
    host: str | None,
    operation: list[str] | None,
    permission: str | None,
) -> list[AclBinding]:
    from kctl.client.admin.security import AclBinding
    from kctl.protocol.acl_types import AclOperation, AclPermissionType, AclResourceType, PatternType

    pattern_type = _enum(PatternType, pattern, "pattern type")
    resources: list[tuple[AclResourceType, str | None]] = list(
        _resources(topic, group, transactional_id, cluster_resource)
    ) or [(AclResourceType.ANY, None)]
    operations = [_enum(AclOperation, o, "operation") for o in operation or []] or [AclOperation.ANY]
    perm = _enum(AclPermissionType, permission, "permission") if permission else AclPermissionType.ANY
    return [
        AclBinding(rtype, name, pattern_type, principal, host, op, perm)
        for (rtype, name), op in itertools.product(resources, operations)
    ]


PrincipalFilter = Annotated[str | None, typer.Option("--principal", help="Only this principal's ACLs.")]
HostFilter = Annotated[str | None, typer.Option("--host", help="Only ACLs for this host.")]
PermissionFilter = Annotated[str | None, typer.Option("--permission", help="Allow or Deny.")]


@app.command("list")
@cluster_options
def list_acls(
    topic: TopicOption = None,
    group: GroupOption = None,
    transactional_id: TransactionalIdOption = None,
    cluster_resource: ClusterOption = False,
    pattern: PatternOption = "any",
    principal: PrincipalFilter = None,
    host: HostFilter = None,
    operation: OperationOption = None,
    permission: PermissionFilter = None,
    fmt: FormatOption = DEFAULT_FORMAT,
    *,
    cluster: ClusterOptions,
) -> None:
    """List ACLs (all, or those matching the filters; with --resource-pattern-type match, every ACL
    that applies to the named resources: literal, wildcard and prefixes)."""

    filters = _filters(
        topic, group, transactional_id, cluster_resource, pattern, principal, host, operation, permission
    )
    found: set[AclBinding] = set()
    with admin_session(*cluster) as admin:
        for f in filters:
            found.update(admin.describe_acls(f))
    render_rows([b.row() for b in sorted(found)], COLUMNS, fmt)


@app.command("remove")
@cluster_options
def remove(
    topic: TopicOption = None,
    group: GroupOption = None,
    transactional_id: TransactionalIdOption = None,
    cluster_resource: ClusterOption = False,
    pattern: PatternOption = "literal",
    principal: PrincipalFilter = None,
    host: HostFilter = None,
    operation: OperationOption = None,
    permission: PermissionFilter = None,
    dry_run: DryRunOption = False,
    fmt: FormatOption = DEFAULT_FORMAT,
    *,
    cluster: ClusterOptions,
) -> None:
    """Remove the ACLs matching the filters (a resource is required: --topic, --group,
    --transactional-id or --cluster). With --dry-run, list what would be removed.

    Exit status 3 if nothing matched."""
    from kctl.protocol.errors import error_name

    if not (topic or group or transactional_id or cluster_resource):
        raise KctlError("give the resource whose ACLs to remove", ExitCode.USAGE)
    filters = _filters(
        topic, group, transactional_id, cluster_resource, pattern, principal, host, operation, permission
    )
    with admin_session(*cluster) as admin:
        if dry_run:
            matched = sorted({b for f in filters for b in admin.describe_acls(f)})
            rows = [{**b.row(), "status": "would remove", "message": None} for b in matched]
        else:
            results = admin.delete_acls(filters)
            rows = [
                {
                    **r.binding.row(),
                    "status": "removed" if r.error_code == 0 else error_name(r.error_code),
                    "message": r.error_message,
                }
                for r in results
            ]
    render_rows(rows, STATUS_COLUMNS, fmt)
    if any(r["status"] not in ("removed", "would remove") for r in rows):
        raise typer.Exit(ExitCode.FAILURE)
    if not rows:
        raise KctlError("no ACL matched", ExitCode.NOT_FOUND)
    if not dry_run:
        info(f"removed {len(rows)} ACL(s)")
