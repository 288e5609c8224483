"""Rewriting a prefix of OAI identifiers (`harvesters rekey`): what the state store and the
targets share of it, in SQL that SQLite and PostgreSQL run alike.

A source that moves or upgrades may change its identifier namespace (`oai:old.example.org:`
becomes `oai:repo.example.org:`). Harvest records and target records are found by OAI
identifier, so the stores rewrite the prefix of each before the next harvest lists the new
ones: that harvest then finds them as known records instead of creating new ones.
"""

from __future__ import annotations

import dataclasses
import shlex
from dataclasses import dataclass, field

import sqlalchemy as sa

from oai_pipeline.errors import PipelineError

# How many rewritten identifiers a plan shows, and how many clashes a refusal names.
EXAMPLES = 5


class RekeyRefused(PipelineError):
    """The rekey cannot be done as asked, or not now; nothing was changed (exit 2)."""


class RekeyPending(RekeyRefused):
    """A rekey of the harvester began and did not finish (`PendingRekey`): what would read or
    write its identifiers waits for it to be finished or undone."""


@dataclass(frozen=True)
class PendingRekey:
    """A rekey saved before it rewrote the targets, whose state store's rewrite has not
    committed: the target may hold identifiers under `new_prefix` that the state store holds
    under `old_prefix`. Its rerun finishes it; its reverse undoes it (what it rewrote in the
    targets goes back, and the state store has nothing to rewrite)."""

    harvester_id: str
    old_prefix: str
    new_prefix: str
    started_at: str

    def allows(self, old: str, new: str) -> bool:
        """Whether a rekey from `old` to `new` finishes or undoes this one."""
        pending = (self.old_prefix, self.new_prefix)
        return (old, new) in (pending, pending[::-1])

    def _command(self, old: str, new: str) -> str:
        return shlex.join(
            ["oai-pipeline", "harvesters", "rekey", self.harvester_id]
            + ["--from-prefix", old, "--to-prefix", new]
        )

    @property
    def finish_command(self) -> str:
        """The command that finishes this rekey (it again)."""
        return self._command(self.old_prefix, self.new_prefix)

    @property
    def undo_command(self) -> str:
        """The command that undoes this rekey (its reverse)."""
        return self._command(self.new_prefix, self.old_prefix)

    def to_dict(self) -> dict[str, str]:
        """As `status --json` and `harvesters show --json` give it."""
        return {
            **dataclasses.asdict(self),
            "finish_command": self.finish_command,
            "undo_command": self.undo_command,
        }

    def refusal(self, what: str) -> RekeyPending:
        """`what` (a harvest, another rekey) refused while this rekey is pending, in one line
        with the commands that finish or undo it."""
        return RekeyPending(
            f"{what} refused: the rekey of harvester {self.harvester_id} from "
            f"{self.old_prefix!r} to {self.new_prefix!r} begun at {self.started_at} did not "
            "finish (the target may hold the new identifiers, the state store holds the old "
            f"ones); finish it with `{self.finish_command}` or undo it "
            f"with `{self.undo_command}`; nothing was changed"
        )


def jsonable_pending_rekey(pending: PendingRekey | None) -> dict[str, str] | None:
    """A harvester's pending rekey, or None, as `status`, `status --each-harvester` and
    `harvesters show` give it in JSON."""
    return None if pending is None else pending.to_dict()


def check_prefixes(old: str, new: str) -> None:
    """Refuse prefixes that make no rewrite, or one that is a prefix of the other: then an
    identifier already rewritten would match the old prefix again, and a rerun (which must
    finish a killed rekey) would rewrite it twice."""
    if not old:
        raise RekeyRefused("--from-prefix is empty: give the prefix the identifiers have now")
    if not new:
        raise RekeyRefused("--to-prefix is empty: give the prefix the source uses now")
    if old == new:
        raise RekeyRefused(f"--from-prefix and --to-prefix are the same ({old!r}): nothing to do")
    if new.startswith(old) or old.startswith(new):
        raise RekeyRefused(
            f"one prefix begins with the other ({old!r}, {new!r}): an identifier rewritten "
            "would match again; give prefixes that differ where they begin"
        )


def starts_with(column: sa.ColumnElement[str], prefix: str) -> sa.ColumnElement[bool]:
    """The column's value begins with `prefix`, exactly: SQLite's LIKE ignores the case of
    ASCII letters, so the LIKE (which an index may serve) is checked by a comparison."""
    return sa.and_(
        column.startswith(prefix, autoescape=True),
        sa.func.substr(column, 1, len(prefix)) == prefix,
    )


def rest_after(column: sa.ColumnElement[str], prefix: str) -> sa.ColumnElement[str]:
    """What follows `prefix` in the column's value (which begins with it)."""
    return sa.func.substr(column, len(prefix) + 1)


def replaced(column: sa.ColumnElement[str], old: str, new: str) -> sa.ColumnElement[str]:
    """The column's value with `old` (its beginning) replaced by `new`."""
    return sa.literal(new, sa.String) + rest_after(column, old)


@dataclass
class RekeyPlan:
    """What one store would rewrite: how many identifiers, a few of them (the old ones, in
    order), those whose new identifier the store already holds (`taken`: the source was
    harvested under the new prefix already), and the longest new identifier's length."""

    store: str
    count: int = 0
    examples: list[str] = field(default_factory=list)
    taken: list[str] = field(default_factory=list)
    longest: int = 0
    limit: int | None = None

    def to_dict(self) -> dict[str, object]:
        return {"store": self.store, "identifiers": self.count, "examples": self.examples}


def plan_rekey(
    conn: sa.Connection,
    store: str,
    harvester: sa.Column[str],
    identifier: sa.Column[str],
    harvester_id: str,
    old: str,
    new: str,
) -> RekeyPlan:
    """What a rekey would rewrite in one store: its rows of `harvester_id` whose `identifier`
    begins with `old` (the state's harvest records, the target's records), and those whose
    new identifier another of them holds."""
    table = identifier.table
    ours = sa.and_(harvester == harvester_id, starts_with(identifier, old))
    count, longest = conn.execute(
        sa.select(sa.func.count(), sa.func.max(sa.func.length(identifier))).where(ours)
    ).one()
    examples = conn.execute(
        sa.select(identifier).where(ours).order_by(identifier).limit(EXAMPLES)
    ).scalars()
    holder = table.alias("holder")
    taken = conn.execute(
        sa.select(identifier)
        .where(
            ours,
            sa.exists().where(
                holder.c[harvester.name] == harvester_id,
                holder.c[identifier.name] == replaced(identifier, old, new),
            ),
        )
        .order_by(identifier)
        .limit(EXAMPLES)
    ).scalars()
    return RekeyPlan(
        store,
        count=int(count),
        examples=list(examples),
        taken=list(taken),
        longest=0 if not count else int(longest) - len(old) + len(new),
        limit=identifier.type.length,
    )


def taken_message(plan: RekeyPlan, harvester_id: str, old: str, new: str) -> str:
    """Why identifiers whose new form a store holds already cannot be rewritten, and what
    cleans up (the two are separate records now, as without a rekey)."""
    shown = ", ".join(f"{i} -> {new}{i[len(old) :]}" for i in plan.taken)
    where = "harvest records" if plan.store == "state" else f"{plan.store} records"
    return (
        f"harvester {harvester_id} has {where} under {new!r} already (e.g. {shown}): the "
        "source was harvested under the new prefix before this rekey, which must come before "
        "the first harvest after the source changed its identifiers; nothing was changed. "
        f"Those under {new!r} are new target records: `oai-pipeline reconcile {harvester_id}` "
        f"(add --force if it refuses) makes those under {old!r} that the source no longer "
        "lists tombstones"
    )


def too_long_message(plan: RekeyPlan, old: str, new: str) -> str:
    return (
        f"rewritten with {new!r} for {old!r}, an identifier of the {plan.store} would be "
        f"{plan.longest} characters long, more than it keeps ({plan.limit}); nothing was changed"
    )
