"""Which memory a code branch reads when it has none of its own yet.

A branch's parent is recorded (by the post-checkout hook or on first use) in
the repository's config as ``gitmem.branch.<name>.parent``; without a record,
the default branch is the parent.
"""

from __future__ import annotations

from typing import List

import pygit2


def parent_chain(repo: pygit2.Repository, branch: str) -> List[str]:
    """Branches whose memory ``branch`` inherits, nearest first, without cycles."""
    from .store import config_get, default_branch

    chain: List[str] = []
    seen = {branch}
    current = branch
    while True:
        parent = config_get(repo, f"gitmem.branch.{current}.parent")
        if not parent or parent in seen:
            break
        chain.append(parent)
        seen.add(parent)
        current = parent
    default = default_branch(repo)
    if default not in seen:
        chain.append(default)
    return chain
