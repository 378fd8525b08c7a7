"""Scopes and visibility: which containers a fact names, who holds them, and how that filters.

A fact is readable by a caller holding every container its scope names: its user (being that
user), its org and its project (granted on the token). A conversation's facts (`threadId`,
`sessionId`, `participantId`) belong to their project: holding the project reaches them; outside
a project only a tenant admin does. A tenant admin reads and writes everything in the tenant.

In the index each fact carries one visibility tag per container kind (`v:org:<id>`, or
`v:org:-` when absent) and a caller is given one group per kind (`v:org:-` plus each org it
holds): the engine's any-of groups then admit exactly the visible facts, inside the search and
before the limit. A retrieve's own `scope` filter is all-of `s:<key>=<value>` tags.

Each fact also carries ONE tag naming all four at once (`w:["<user>","<org>","<project>","<conv>"]`),
and a caller with few grants is given the one group of every combination it may see instead:
a single clause of rare terms costs tantivy a fraction of four clauses of common ones
(bench/retrieve.py at 100k: keyword 37 → 13 ms with the filter, on a busy machine).
"""

from __future__ import annotations

from typing import Any

import orjson

from engram_index.kindgi.auth import Principal
from engram_index.kindgi.errors import KindgiError

CONTAINERS = ("userId", "orgId", "projectId", "threadId", "sessionId", "participantId")
CONVERSATION = ("threadId", "sessionId", "participantId")
# The SQL columns of the containers, in CONTAINERS order.
COLUMNS = ("user_id", "org_id", "project_id", "thread_id", "session_id", "participant_id")


def parse_scope(raw: Any, *, field: str = "scope", partial: bool = False) -> dict[str, Any]:
    """A scope object checked: `tenantId` a string (unless partial), containers non-empty strings."""
    if not isinstance(raw, dict):
        raise KindgiError("bad-input", f"Field `{field}` must be an object")
    if not partial or "tenantId" in raw:
        if not isinstance(raw.get("tenantId"), str) or not raw["tenantId"]:
            raise KindgiError("bad-input", f"Field `{field}.tenantId` must be a non-empty string")
    for key in CONTAINERS:
        if key in raw and (not isinstance(raw[key], str) or not raw[key]):
            raise KindgiError("bad-input", f"Field `{field}.{key}` must be a non-empty string when present")
    if "participantId" in raw and "projectId" not in raw and not partial:
        raise KindgiError("validation-failed",
                          f"`{field}.participantId` needs `{field}.projectId`: an app's end users belong to a project")
    return raw


def check_tenant(scope: dict[str, Any] | None, principal: Principal) -> None:
    """400 scope-mismatch when a scope names another tenant than the caller's."""
    if scope is not None and "tenantId" in scope and scope["tenantId"] != principal.tenant:
        raise KindgiError("scope-mismatch", "`scope.tenantId` does not match the caller tenant.")


def can_read(principal: Principal, scope: dict[str, Any]) -> bool:
    """Whether the caller holds every container the scope names."""
    if principal.admin:
        return True
    if "userId" in scope and scope["userId"] != principal.user:
        return False
    if "orgId" in scope and scope["orgId"] not in principal.orgs:
        return False
    if "projectId" in scope and scope["projectId"] not in principal.projects:
        return False
    if any(k in scope for k in CONVERSATION) and "projectId" not in scope:
        return False
    return True


def write_problem(principal: Principal, scope: dict[str, Any]) -> str | None:
    """Why the caller may not write a fact in this scope, if it may not."""
    if principal.admin:
        return None
    if not any(k in scope for k in CONTAINERS):
        return "Writing tenant-wide memory needs admin on the tenant."
    if "userId" in scope and scope["userId"] != principal.user:
        return "Only that user (or a tenant admin) can write a user's memory."
    if "projectId" in scope and scope["projectId"] not in principal.projects:
        return f'Writing memory in project "{scope["projectId"]}" needs write on it.'
    if "orgId" in scope and scope["orgId"] not in principal.orgs:
        return f'Writing memory in org "{scope["orgId"]}" needs write on it.'
    if any(k in scope for k in CONVERSATION) and "projectId" not in scope:
        return "Writing a conversation's memory outside a project needs admin on the tenant."
    return None


def _tag_value(value: Any) -> str:
    """A scope value as it appears in a tag (strings as they are, anything else as JSON)."""
    return value if isinstance(value, str) else orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


# Above this many combinations a caller is given the four per-kind groups instead of one.
MAX_COMBINED = 256


def _combined(user: str, org: str, project: str, conv: str) -> str:
    """The one tag of a visibility combination (JSON: ids may hold any character)."""
    return "w:" + orjson.dumps([user, org, project, conv]).decode()


def _conv(scope: dict[str, Any]) -> str:
    """`-` for a fact of no conversation, `y` for one inside its project, `!` for one outside any."""
    if not any(k in scope for k in CONVERSATION):
        return "-"
    return "y" if "projectId" in scope else "!"


def visibility_tags(scope: dict[str, Any]) -> list[str]:
    """The index tags that say who may see a fact of this scope."""
    conv = _conv(scope)
    tags = [f"v:user:{scope.get('userId', '-')}", f"v:org:{scope.get('orgId', '-')}",
            f"v:project:{scope.get('projectId', '-')}",
            {"-": "v:conv:-", "!": "v:conv:!"}.get(conv, f"v:conv:{scope.get('projectId')}"),
            _combined(scope.get("userId", "-"), scope.get("orgId", "-"), scope.get("projectId", "-"), conv)]
    return tags


def scope_tags(scope: dict[str, Any]) -> list[str]:
    """One tag per key of a scope but the tenant: what a retrieve's scope filter matches."""
    return [f"s:{k}={_tag_value(v)}" for k, v in sorted(scope.items()) if k != "tenantId" and v is not None]


def reader_groups(principal: Principal) -> tuple[tuple[str, ...], ...]:
    """The any-of tag groups that admit the facts a caller may see (none for a tenant admin)."""
    if principal.admin:
        return ()
    users_ = ["-"] + ([principal.user] if principal.user else [])
    orgs_ = ["-", *sorted(principal.orgs)]
    places = [("-", "-"), *((p, c) for p in sorted(principal.projects) for c in ("-", "y"))]
    if len(users_) * len(orgs_) * len(places) <= MAX_COMBINED:
        return (tuple(_combined(u, o, p, c) for u in users_ for o in orgs_ for p, c in places),)
    users = ("v:user:-",) + ((f"v:user:{principal.user}",) if principal.user else ())
    return (
        users,
        ("v:org:-", *(f"v:org:{o}" for o in sorted(principal.orgs))),
        ("v:project:-", *(f"v:project:{p}" for p in sorted(principal.projects))),
        ("v:conv:-", *(f"v:conv:{p}" for p in sorted(principal.projects))),
    )


def _in(column: str, values: frozenset[str], params: list[Any]) -> str:
    """`column IN (...)` over values (false when there are none)."""
    if not values:
        return "FALSE"  # SQL both stores read as a condition (PostgreSQL takes no bare 0)
    params.extend(sorted(values))
    return f"{column} IN ({','.join('?' * len(values))})"


def sql_visible(principal: Principal, params: list[Any]) -> str:
    """The SQL condition (over kindgi_revisions) that admits the facts a caller may see."""
    if principal.admin:
        return "TRUE"
    if principal.user is not None:
        params.append(principal.user)
        user = "(user_id IS NULL OR user_id = ?)"
    else:
        user = "user_id IS NULL"
    org = f"(org_id IS NULL OR {_in('org_id', principal.orgs, params)})"
    project = f"(project_id IS NULL OR {_in('project_id', principal.projects, params)})"
    conv = ("((thread_id IS NULL AND session_id IS NULL AND participant_id IS NULL)"
            f" OR {_in('project_id', principal.projects, params)})")
    return f"{user} AND {org} AND {project} AND {conv}"


def sql_scope_filter(scope: dict[str, Any], params: list[Any]) -> str:
    """The SQL condition for a partial scope where every key given must match."""
    parts: list[str] = []
    for key, value in sorted(scope.items()):
        if key == "tenantId" or value is None:
            continue
        if key in CONTAINERS:
            parts.append(f"{COLUMNS[CONTAINERS.index(key)]} = ?")
            params.append(value)
        elif '"' in key or "\\" in key:
            # No JSON path can name such a key (SQLite finds nothing, PostgreSQL's jsonpath refuses it):
            # it matches no fact on either store, never a 500.
            parts.append("FALSE")
        else:  # a forward-compatible key: matched in the stored scope JSON
            parts.append("json_extract(body, ?) = json(?)")
            params += [f'$.scope."{key}"', orjson.dumps(value).decode()]
    return " AND ".join(parts) or "TRUE"
