"""The Kindgi retrieve's `whyFewer`: the tenant's facts, visibility, type and scope mapped onto the shared explanation."""

from __future__ import annotations

from typing import Any

from engram_index.engine.types import Filters
from engram_index.kindgi.auth import Principal
from engram_index.kindgi.facts import Facts, space_name
from engram_index.kindgi.models import Intent
from engram_index.kindgi.scope import reader_groups, scope_tags
from engram_index.shortfall import Condition, Target, why_fewer


def explain(facts: Facts, principal: Principal, intent: Intent, returned: int) -> dict[str, Any]:
    """Why a retrieve answered `returned` facts, fewer than its limit (filters in the order they narrow).

    Its items are the facts the token may see: how many others the tenant holds is not the caller's
    to learn (visibility is a boundary, not a filter).
    """
    conditions: list[Condition] = []
    if intent.type:
        conditions.append(Condition(f"type={intent.type}", Filters(tags=(f"t:{intent.type}",))))
    for key, value in sorted((intent.scope or {}).items()):
        conditions += [Condition(f"scope.{key}={value}", Filters(tags=(tag,))) for tag in scope_tags({key: value})]
    visible = Filters(any_tags=reader_groups(principal))
    return why_fewer(facts.collections, principal.tenant, [Target(space_name(principal.tenant), visible)],
                     returned=returned, conditions=conditions)
