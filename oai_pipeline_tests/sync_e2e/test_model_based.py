"""A seeded, randomised differential test of the sync rules over many harvests.

A FakeSource evolves over epochs (records created, changed, touched, deleted or vanished,
brought back, DOIs changed and swapped, metadata broken and fixed, sets moved) while users
of the target edit, delete and deposit; after each epoch the harvester runs (incremental by
default, sometimes full, update_all or a reconcile, sometimes hit by a transient fault that
fails the run so that the next one resumes it). After each successful run the target must be
what a small model of DESIGN.md's sync rules predicts:

- every record the harvester could know as live holds exactly one live target record with
  the data of its last write (the source's current data unless the skip rule kept it);
- every record deleted at the source (a deleted header, or vanished and reconciled) has none;
- no DOI is held by two live records; a user's deposit whose DOI a new source record
  carries becomes that record;
- a record that failed carries its error on its harvest record and is written once fixed
  (skipped only when its datestamp is unchanged, its last write had no errors and the
  local record is still as harvested).

Seeds: OAI_MODEL_SEEDS=N runs seeds 0..N-1 on SQLite (default: a few) and the regression
seeds, OAI_MODEL_SEEDS=A-B seeds A..B only (both included: an audit of a range not run
before), OAI_MODEL_SEED=S one seed, OAI_MODEL_EPOCHS the epochs per seed;
OAI_MODEL_POSTGRES_SEEDS=N runs seeds 0..N-1 (or A-B) with the state store and the target on
PostgreSQL (default 2: most other scenarios of sync_e2e/ run on SQLite only; 0 for none);
OAI_MODEL_DRAFTS_SEEDS=N (or A-B, default 2; OAI_MODEL_POSTGRES_DRAFTS_SEEDS on PostgreSQL,
default 0) runs seeds with a writer that leaves drafts (`publish: false`) and a reviewer who
publishes some: the target then holds, once each draft is published, what the model says. A
failure names its seed and the operations so far.
"""

from __future__ import annotations

import dataclasses
import os
import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from xml.sax.saxutils import escape

import pytest

from oai_pipeline.defs.partitions import window_partitions
from oai_pipeline.defs.schedules import incremental_window_range, last_complete_sweep
from oai_pipeline.errors import PipelineError
from oai_pipeline.harvesters.registry import HarvesterRegistry
from oai_pipeline.oai.errors import HarvestProtocolError
from oai_pipeline.oai.reader import OAIPMHReader
from oai_pipeline.pipeline import reconcile as reconcile_module
from oai_pipeline.pipeline.options import RunOptions
from oai_pipeline.pipeline.reconcile import reconcile
from oai_pipeline.pipeline.runner import run_harvest
from oai_pipeline.pipeline.scope import HarvestScope, Window
from oai_pipeline.pipeline.services import Services
from oai_pipeline.settings import Settings
from oai_pipeline.targets.base import pid_of
from oai_pipeline.targets.embedded.repository import EmbeddedRepository
from oai_pipeline_tests.oai.fake_source import (
    FakeRecord,
    FakeSource,
    expire_tokens,
    status,
    truncated,
)
from oai_pipeline_tests.postgres import fresh_database
from oai_pipeline_tests.support import harvest_fake_source

HARVESTER = "sample"
OVERLAP = timedelta(hours=2)  # OAI_PIPELINE_INCREMENTAL_OVERLAP_HOURS's default
START = datetime(2024, 3, 1, 6, 0, tzinfo=UTC)
GRID_FIRST = window_partitions.get_first_partition_key()
# setSpec -> community; the `sx…` communities do not exist until the operator creates them.
SET_COMMUNITIES = {"sa": "c-a", "sb": "c-b", **{f"sx{n}": f"cx{n}" for n in range(6)}}
TRANSFORMER = (
    'oai-import{model:"rdm", set_communities:{'
    + ", ".join(f'{s}:"{c}"' for s, c in SET_COMMUNITIES.items())
    + "}}"
)
# The drafts' seeds' writer: each harvest leaves drafts, a reviewer publishes some.
DRAFTS_WRITER = 'oai-service{model:"rdm", publish:false}'
FAKE_RESPONSE_DATE = b"<responseDate>2026-01-01T00:00:00Z</responseDate>"


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


class ClockedSource(FakeSource):
    """A FakeSource whose responseDate is the simulated clock."""

    now: datetime = START

    def xml(self, verb, body, status=200):  # type: ignore[no-untyped-def]
        response = super().xml(verb, body, status)
        response._content = response.content.replace(  # noqa: SLF001
            FAKE_RESPONSE_DATE, f"<responseDate>{stamp(self.now)}</responseDate>".encode()
        )
        return response


@dataclasses.dataclass(frozen=True)
class Content:
    title: str
    doi: str | None
    creators: tuple[str, ...]
    sets: tuple[str, ...]
    bad: bool = False  # no title: the transform fails

    def communities(self) -> set[str]:
        return {SET_COMMUNITIES[s] for s in self.sets if s in SET_COMMUNITIES}

    def xml(self) -> str:
        title = "" if self.bad else escape(self.title)
        doi = f"<dc:identifier>https://doi.org/{self.doi}</dc:identifier>" if self.doi else ""
        creators = "".join(f"<dc:creator>{escape(c)}</dc:creator>" for c in self.creators)
        return (
            '<oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" '
            'xmlns:dc="http://purl.org/dc/elements/1.1/">'
            f"<dc:title>{title}</dc:title>{creators}<dc:date>2020</dc:date>{doi}"
            "</oai_dc:dc>"
        )


@dataclasses.dataclass
class SourceRecord:
    identifier: str
    datestamp: datetime
    content: Content
    deleted: bool = False
    vanished: bool = False  # no longer listed at all (a source that keeps no deletions)
    doi_given_away: bool = False  # deleted, and its DOI now carried by another record


@dataclasses.dataclass
class Memory:
    """What the model says the harvester did with a record last."""

    granule: str  # the datestamp as the source gave it
    deleted: bool  # the status the source gave
    error: bool  # the last write had errors
    written: Content | None  # what the target holds for it (None: never written)
    written_granule: str | None  # the datestamp `written` was transformed from
    target_deleted: bool  # deleted in the target (by the source's word)
    communities: set[str] = dataclasses.field(default_factory=set)  # never removed
    listed: Content | None = None  # what the source listed last (live)
    gone: bool = False  # vanished by a reconcile's word, listed by no harvest since
    reviewed: bool = False  # (publish: false) a reviewer published what was written last


@dataclasses.dataclass
class Deposit:
    record_id: str
    doi: str
    title: str
    taken_by: str | None = None  # the source identifier that took it over
    named_by: str | None = None  # the source record that carries its DOI


class Divergence(AssertionError):
    pass


class Simulation:
    def __init__(
        self,
        seed: int,
        settings: Settings,
        source: ClockedSource,
        granularity: str,
        *,
        publishes: bool = True,
    ):
        self.seed = seed
        self.publishes = publishes  # False: the writer leaves drafts that a reviewer publishes
        self.rng = random.Random(seed)
        self.settings = settings
        self.source = source
        self.granularity = granularity
        self.deleted_record = source.deleted_record
        self.now = START
        self.records: dict[str, SourceRecord] = {}
        self.memory: dict[str, Memory] = {}
        self.deposits: list[Deposit] = []
        self.next_number = 0
        self.next_doi = 0
        self.last_response: datetime | None = None  # of the last succeeded harvest
        self.created_communities: set[str] = {"c-a", "c-b"}
        self.pending: set[str] = set()  # swapped DOIs not harvested yet: left alone
        self.local_changes: dict[str, str] = {}  # identifier -> what a user did
        # ever marked for purge or hard deleted by a user: its target record gave up its DOI
        self.purged: set[str] = set()
        self.drafts: set[str] = set()  # never published when the harvest began (`publish: false`)
        self.log: list[str] = []

    # -- helpers -----------------------------------------------------------------------
    def granule(self, moment: datetime) -> str:
        return moment.strftime("%Y-%m-%d") if self.granularity == "day" else stamp(moment)

    def day_not_over(self, granule: str) -> bool:
        """A day's datestamp listed before its day (and two days' slack, by the source's
        clock) is over: the record may have changed since under the same datestamp, so the
        harvester compares what the source lists with the copy it stored."""
        if self.granularity != "day":
            return False
        day = datetime.strptime(granule, "%Y-%m-%d").replace(tzinfo=UTC)
        return self.now < day + timedelta(days=2)

    def fresh_doi(self) -> str:
        self.next_doi += 1
        return f"10.5072/m{self.seed}-{self.next_doi}"

    def random_content(self, doi: str | None = None) -> Content:
        sets = tuple(sorted(self.rng.sample(["sa", "sb", "other"], self.rng.randint(0, 2))))
        return Content(
            title=f"Title {self.rng.randrange(10**6)}",
            doi=doi if doi is not None else (self.fresh_doi() if self.rng.random() < 0.9 else None),
            creators=tuple(
                f"Creator{self.rng.randrange(100)}, A" for _ in range(self.rng.randint(1, 3))
            ),
            sets=sets,
        )

    def sync_source(self) -> None:
        records = [
            FakeRecord(
                identifier=r.identifier,
                datestamp=stamp(r.datestamp),
                deleted=r.deleted,
                sets=list(r.content.sets),
                raw_metadata=r.content.xml(),
            )
            for r in self.records.values()
            if not r.vanished
        ]
        self.rng.shuffle(records)  # not in datestamp order
        self.source.records = records

    def moment(self, previous: datetime | None) -> datetime:
        """When a change happens: in this epoch, on a boundary, or indexed late (within the
        overlap before the last harvest's responseDate)."""
        low = self.last_response or START - timedelta(days=1)
        choice = self.rng.random()
        if choice < 0.1:
            moment = self.now
        elif choice < 0.2:
            moment = low  # exactly the last responseDate
        elif choice < 0.3:
            moment = self.now.replace(hour=0, minute=0, second=0)  # midnight, a window's start
        elif choice < 0.35:
            moment = self.now.replace(hour=0, minute=0, second=0) - timedelta(seconds=1)
        elif choice < 0.45 and self.last_response is not None:
            moment = low - timedelta(seconds=self.rng.randint(0, int(OVERLAP.total_seconds())))
        else:
            moment = low + timedelta(
                seconds=self.rng.randint(0, int((self.now - low).total_seconds()))
            )
        moment = min(max(moment, low - OVERLAP), self.now)
        if previous is not None and moment <= previous:
            moment = self.now if self.now > previous else previous + timedelta(seconds=1)
        return moment

    def live_source(self) -> list[SourceRecord]:
        return [
            r
            for r in self.records.values()
            if not r.deleted and not r.vanished and r.identifier not in self.pending
        ]

    def written_live(self) -> list[str]:
        return [
            i
            for i, m in self.memory.items()
            if m.written is not None and not m.target_deleted and i not in self.local_changes
        ]

    # -- the source --------------------------------------------------------------------
    def op_create(self, touched: set[str]) -> None:
        self.next_number += 1
        identifier = f"oai:fake.test:{self.next_number}"
        doi = None
        free = [d for d in self.deposits if d.named_by is None]
        if free and self.rng.random() < 0.3:
            deposit = self.rng.choice(free)
            doi, deposit.named_by = deposit.doi, identifier
            self.log.append(f"create {identifier} with the DOI of a user's deposit {doi}")
        gone = [
            r
            for r in self.records.values()
            if (r.deleted or r.vanished)
            and r.content.doi
            and not r.doi_given_away
            and r.identifier not in touched
            and r.identifier not in self.purged
            and (memory := self.memory.get(r.identifier)) is not None
            and memory.target_deleted
            # under review, a deleted record's tombstone holds the DOI it was published with
            and (self.publishes or self.tombstone_holds(r.identifier, r.content.doi))
        ]
        if doi is None and gone and self.rng.random() < 0.2:
            old = self.rng.choice(gone)
            doi, old.doi_given_away = old.content.doi, True
            # its target record goes to the new one: brought back, it gets a fresh one
            self.memory[old.identifier].communities = set()
            touched.add(old.identifier)
            self.log.append(f"create {identifier} with the DOI of deleted {old.identifier}")
        content = self.random_content(doi)
        self.records[identifier] = SourceRecord(identifier, self.moment(None), content)
        touched.add(identifier)
        self.log.append(f"create {identifier} {content} at {self.records[identifier].datestamp}")

    def change(self, record: SourceRecord, content: Content, what: str, *, touch=True) -> None:
        if touch:
            record.datestamp = self.moment(record.datestamp)
        record.content = content
        self.log.append(f"{what} {record.identifier} -> {content} at {stamp(record.datestamp)}")

    def op_update(self, touched: set[str]) -> None:
        candidates = [r for r in self.live_source() if r.identifier not in touched]
        if not candidates:
            return
        record = self.rng.choice(candidates)
        touched.add(record.identifier)
        old = record.content
        kind = self.rng.choice(["title", "doi", "creators", "sets", "all"])
        fresh = self.random_content()
        content = dataclasses.replace(
            old,
            title=fresh.title if kind in ("title", "all") else old.title,
            doi=self.fresh_doi() if kind in ("doi", "all") else old.doi,
            creators=fresh.creators if kind in ("creators", "all") else old.creators,
            sets=fresh.sets if kind in ("sets", "all") else old.sets,
        )
        self.change(record, content, f"update ({kind})")

    def op_doi_of_a_deposit(self, touched: set[str]) -> None:
        """A record already in the target gets the DOI of a user's deposit: refused
        (duplicate_pid, only a record new to the target takes a deposit over)."""
        free = [d for d in self.deposits if d.named_by is None]
        candidates = [r for r in self.live_source() if r.identifier not in touched]
        if not free or not candidates:
            return
        record, deposit = self.rng.choice(candidates), self.rng.choice(free)
        touched.add(record.identifier)
        deposit.named_by = record.identifier
        self.change(record, dataclasses.replace(record.content, doi=deposit.doi), "deposit's DOI")

    def op_touch(self, touched: set[str]) -> None:
        candidates = [r for r in self.live_source() if r.identifier not in touched]
        if candidates:
            record = self.rng.choice(candidates)
            touched.add(record.identifier)
            self.change(record, record.content, "touch")

    def op_silent_title(self, touched: set[str]) -> None:
        """Changed without a new datestamp: only update_all (or a later change) brings it."""
        candidates = [
            r for r in self.live_source() if r.identifier not in touched and not r.content.bad
        ]
        if candidates:
            record = self.rng.choice(candidates)
            touched.add(record.identifier)
            content = dataclasses.replace(record.content, title=f"Quiet {self.rng.randrange(999)}")
            self.change(record, content, "silent title change", touch=False)

    def op_delete(self, touched: set[str]) -> None:
        candidates = [r for r in self.live_source() if r.identifier not in touched]
        if not candidates:
            return
        record = self.rng.choice(candidates)
        touched.add(record.identifier)
        header = self.deleted_record == "persistent" or (
            self.deleted_record == "transient" and self.rng.random() < 0.5
        )
        if header:
            record.deleted = True
            record.datestamp = self.moment(record.datestamp)
            self.log.append(f"delete {record.identifier} at {stamp(record.datestamp)}")
        else:
            record.vanished = True
            self.log.append(f"vanish {record.identifier}")

    def op_bring_back(self, touched: set[str]) -> None:
        candidates = [
            r
            for r in self.records.values()
            if (r.deleted or r.vanished)
            and r.identifier not in touched
            and (self.publishes or not self.given_to_unwritten(r))
        ]
        if not candidates:
            return
        record = self.rng.choice(candidates)
        touched.add(record.identifier)
        record.deleted = record.vanished = False
        content = record.content
        if record.doi_given_away:
            content = dataclasses.replace(content, doi=self.fresh_doi())
            record.doi_given_away = False
        if self.rng.random() < 0.5:
            content = dataclasses.replace(content, title=f"Back {self.rng.randrange(999)}")
        self.change(record, content, "bring back")

    def given_to_unwritten(self, record: SourceRecord) -> bool:
        """Its DOI given to a new record no harvest wrote yet. Brought back now, both are
        listed together: the target restores its own tombstone (`coming_back`), whose
        published version holds the DOI under `publish: false` until a reviewer publishes
        its draft, so the new record fails `duplicate_pid` till then, where the model gives
        it the tombstone (seed 840 of the drafts seeds); a publishing writer frees the DOI
        in the same batch. `test_writer_takeovers` holds the target to both."""
        return record.doi_given_away and any(
            r.identifier != record.identifier
            and r.content.doi == record.content.doi
            and ((memory := self.memory.get(r.identifier)) is None or memory.written is None)
            for r in self.records.values()
        )

    def op_swap_dois(self, touched: set[str]) -> None:
        """Two records exchange DOIs, each with a new datestamp (both are written again).
        Not one whose DOI is a user's deposit it was refused (see refused_deposit_doi): the
        other would be refused it in turn and keep its old DOI, which the first then cannot
        take (the product stores that error; seed 3077's model wrote it). Under `publish:
        false` only drafts never published swap: a published record holds its DOI until a
        reviewer publishes its draft, so the other is refused it (each waits for the other)."""
        drafts = set() if self.publishes else self.never_published_ids()
        candidates = [
            r
            for r in self.live_source()
            if r.identifier not in touched
            and not self.fails(r.content)
            and not self.refused_deposit_doi(r.content, self.memory.get(r.identifier))
            and r.content.doi
            and self.rewritten_next(r)
            and (self.publishes or r.identifier in drafts)
        ]
        if len(candidates) < 2:
            return
        first, second = self.rng.sample(candidates, 2)
        touched.update({first.identifier, second.identifier})
        moment = self.moment(max(first.datestamp, second.datestamp))
        if not (self.rewritten_at(first, moment) and self.rewritten_at(second, moment)):
            return
        doi_a, doi_b = first.content.doi, second.content.doi
        first.datestamp = second.datestamp = moment
        self.change(first, dataclasses.replace(first.content, doi=doi_b), "swap", touch=False)
        self.change(second, dataclasses.replace(second.content, doi=doi_a), "swap", touch=False)
        self.pending.update({first.identifier, second.identifier})

    def rewritten_next(self, record: SourceRecord) -> bool:
        memory = self.memory.get(record.identifier)
        return memory is not None and memory.written is not None and not memory.target_deleted

    def tombstone_holds(self, identifier: str, doi: str) -> bool:
        with EmbeddedRepository(self.settings.target_db_url) as repository:
            rows = repository.list(harvester=HARVESTER, state="tombstone")
        return any(r["source_identifier"] == identifier and r["doi"] == doi for r in rows)

    def never_published_ids(self) -> set[str]:
        """The records whose target record is a draft never published (`publish: false`)."""
        with EmbeddedRepository(self.settings.target_db_url) as repository:
            rows = repository.list(harvester=HARVESTER, state="draft")
        return {row["source_identifier"] for row in rows}

    def rewritten_at(self, record: SourceRecord, moment: datetime) -> bool:
        memory = self.memory[record.identifier]
        return self.granule(moment) != memory.granule and not memory.error

    def op_break(self, touched: set[str]) -> None:
        candidates = [
            r for r in self.live_source() if r.identifier not in touched and not r.content.bad
        ]
        if not candidates:
            return
        record = self.rng.choice(candidates)
        touched.add(record.identifier)
        if self.rng.random() < 0.6:
            self.change(record, dataclasses.replace(record.content, bad=True), "break (no title)")
        else:
            missing = [s for s, c in SET_COMMUNITIES.items() if c not in self.created_communities]
            if not missing:
                return
            sets = tuple(sorted({*record.content.sets, self.rng.choice(missing)}))
            self.change(
                record,
                dataclasses.replace(record.content, sets=sets),
                "move to a missing community",
            )

    def op_fix(self, touched: set[str]) -> None:
        candidates = [
            r for r in self.live_source() if r.identifier not in touched and r.content.bad
        ]
        if not candidates:
            return
        record = self.rng.choice(candidates)
        touched.add(record.identifier)
        silently = self.rng.random() < 0.4
        self.change(
            record,
            dataclasses.replace(record.content, bad=False),
            "fix" + (" (same datestamp)" if silently else ""),
            touch=not silently,
        )

    def op_create_community(self, touched: set[str]) -> None:
        missing = sorted(set(SET_COMMUNITIES.values()) - self.created_communities)
        if missing:
            community = missing[0]
            with EmbeddedRepository(self.settings.target_db_url) as repository:
                repository.create_community(community)
            self.created_communities.add(community)
            self.log.append(f"operator creates community {community}")

    # -- the target's users ------------------------------------------------------------
    def op_local(self, touched: set[str]) -> None:
        candidates = [i for i in self.written_live() if i not in touched]
        if not candidates:
            return
        identifier = self.rng.choice(candidates)
        local = self.target_record(identifier)
        if local is None:
            return
        if local["state"] == "draft":  # left for review (publish: false): edited or discarded
            what = self.rng.choice(["edit", "delete"])
            if what == "delete":  # withdrawn: the harvest brings it back in today's communities
                self.memory[identifier].communities = set()
        else:
            what = self.rng.choice(
                ["edit", "edit+publish", "delete", "delete+purge", "hard_delete"]
            )
        with EmbeddedRepository(self.settings.target_db_url) as repository:
            if what.startswith("edit"):
                repository.edit(local["id"], {"metadata.title": "edited locally"})
                if what == "edit+publish":
                    repository.publish(local["id"])
            elif what.startswith("delete"):
                repository.delete(local["id"], purge=what.endswith("purge"))
            else:
                repository.hard_delete(local["id"])
        self.local_changes[identifier] = what
        self.memory[identifier].reviewed = False  # the next harvest undoes it: a draft again
        # A purged tombstone or a hard deleted record gives its DOI up: a new identifier with
        # it is a new record, not re-identified (the model took a hard deleted one for
        # re-identified: seed 5656 on PostgreSQL, a deposit taken over, then hard deleted).
        if what in ("delete+purge", "hard_delete"):
            self.purged.add(identifier)
        self.log.append(f"user {what} of {identifier} ({local['id']})")

    def op_review(self, touched: set[str]) -> None:
        """(publish: false) A reviewer publishes a draft the harvest left: accepted, no local
        change; the next harvest of an unchanged source leaves it as published."""
        candidates = [i for i in self.written_live() if i not in touched]
        if self.publishes or not candidates:
            return
        identifier = self.rng.choice(candidates)
        local = self.target_record(identifier)
        if local is None or local["draft"] is None:
            return
        with EmbeddedRepository(self.settings.target_db_url) as repository:
            repository.publish(local["id"])
        self.memory[identifier].reviewed = True
        self.log.append(f"reviewer publishes {identifier} ({local['id']})")

    def op_deposit(self, touched: set[str]) -> None:
        doi = self.fresh_doi()
        title = f"Deposit {self.rng.randrange(999)}"
        with EmbeddedRepository(self.settings.target_db_url) as repository:
            record_id = repository.deposit(
                {
                    "metadata": {"title": title},
                    "pids": {"doi": {"identifier": doi.upper(), "provider": "external"}},
                },
                publish=True,
            )
        self.deposits.append(Deposit(record_id, doi, title))
        self.log.append(f"user deposit {record_id} with {doi}")

    OPS = (
        ("create", 8),
        ("update", 6),
        ("touch", 2),
        ("silent_title", 1),
        ("delete", 3),
        ("bring_back", 2),
        ("swap_dois", 2),
        ("break", 2),
        ("fix", 3),
        ("create_community", 1),
        ("local", 3),
        ("deposit", 1),
        ("doi_of_a_deposit", 1),
    )

    @property
    def ops(self) -> tuple[tuple[str, int], ...]:
        # a writer that publishes draws as it always did: the seeds found before replay
        return self.OPS if self.publishes else (*self.OPS, ("review", 3))

    @property
    def counting(self) -> tuple[str, ...]:
        """The target states of a record the harvest wrote and the source did not delete."""
        return ("live",) if self.publishes else ("live", "draft")

    def mutate(self) -> None:
        names = [name for name, _ in self.ops]
        weights = [weight for _, weight in self.ops]
        touched: set[str] = set(self.pending)
        for _ in range(self.rng.randint(1, 6)):
            getattr(self, f"op_{self.rng.choices(names, weights)[0]}")(touched)
        self.sync_source()

    # -- the clock ---------------------------------------------------------------------
    def advance(self) -> None:
        choice = self.rng.random()
        if choice < 0.15:  # the next midnight exactly
            self.now = (self.now + timedelta(days=1)).replace(hour=0, minute=0, second=0)
        elif choice < 0.25:
            self.now = self.now.replace(hour=23, minute=59, second=59)
            if self.now <= (self.last_response or START):
                self.now += timedelta(days=1)
        else:
            self.now += timedelta(minutes=self.rng.randint(30, 40 * 60))
        self.source.now = self.now

    # -- harvests ----------------------------------------------------------------------
    def incremental_scope(self, services: Services) -> HarvestScope:
        last = last_complete_sweep(services.state, HARVESTER) or {}
        first, last_key = incremental_window_range(last.get("response_date"), self.now)
        # The model's own range: from the day of (last responseDate - overlap) to today.
        expected_first = (
            max(GRID_FIRST, (self.last_response - OVERLAP).strftime("%Y-%m-%d"))
            if self.last_response is not None
            else GRID_FIRST
        )
        self.check(
            (first, last_key) == (expected_first, self.now.strftime("%Y-%m-%d")),
            f"incremental range {first}..{last_key}, the model expects "
            f"{expected_first}..{self.now:%Y-%m-%d}",
        )
        return self.scope(first, last_key)

    def scope(self, first: str, last: str) -> HarvestScope:
        windows = []
        day = datetime.fromisoformat(first).replace(tzinfo=UTC)
        while day.strftime("%Y-%m-%d") <= last:
            key = day.strftime("%Y-%m-%d")
            windows.append(Window(key, None if key == GRID_FIRST else day, day + timedelta(1)))
            day += timedelta(days=1)
        return HarvestScope(HARVESTER, tuple(windows))

    def listed(self, scope: HarvestScope) -> list[SourceRecord]:
        """What a sweep of the scope lists: the range is inclusive, at the source's
        granularity, from the first window's start (open for the grid's first) to the end
        of the last window's day."""
        low = scope.windows[0].start
        high = scope.windows[-1].end - timedelta(seconds=1)  # type: ignore[operator]
        return [
            r
            for r in self.records.values()
            if not r.vanished
            and (low is None or self.granule(r.datestamp) >= self.granule(low))
            and self.granule(r.datestamp) <= self.granule(high)
        ]

    def harvest(self, services: Services, mode: str, update_all: bool) -> None:
        if mode == "full":
            scope = self.scope(GRID_FIRST, self.now.strftime("%Y-%m-%d"))
        else:
            scope = self.incremental_scope(services)
        listed = self.listed(scope)
        self.drafts = self.never_published_ids()
        options = RunOptions(update_all=update_all)
        fault = self.rng.random() < 0.2
        self.log.append(
            f"harvest {mode}{' update_all' if update_all else ''} {scope.keys[0]}..{scope.keys[-1]}"
            f" at {stamp(self.now)}{' with a fault' if fault else ''}"
        )
        if fault:
            kind = self.rng.choice(["5xx", "cut", "token"])
            at = len(self.source.requests) + self.rng.randint(2, 4)
            fault_of = {"5xx": status(500), "cut": truncated, "token": expire_tokens(self.source)}
            repeats = 1 if kind == "token" else 12
            self.source.faults = {at + n: fault_of[kind] for n in range(repeats)}
            try:
                run_harvest(services, scope, options, progress=lambda _m: None)
            except (HarvestProtocolError, PipelineError) as error:
                self.log.append(f"  the run failed: {type(error).__name__}: {error}")
            else:
                self.log.append("  the run succeeded nonetheless")
            self.source.faults = {}
            if self.rng.random() < 0.5:
                options = RunOptions()  # the resumed run keeps update_all as it started
        run_harvest(services, scope, options, progress=lambda _m: None)
        self.last_response = self.now
        self.apply_harvest(listed, update_all)

    def deleted_at_source(self, identifier: str) -> None:
        memory = self.memory[identifier]
        memory.target_deleted = True
        if identifier in self.drafts:  # its draft deleted: the target holds nothing of it
            memory.written, memory.communities = None, set()

    def apply_harvest(self, listed: list[SourceRecord], update_all: bool) -> None:
        """The model of one successful harvest: DESIGN.md's sync rules."""
        for record in listed:
            granule = self.granule(record.datestamp)
            memory = self.memory.get(record.identifier)
            if memory is not None:
                memory.gone = False
            if record.deleted:
                if memory is None:
                    memory = self.memory[record.identifier] = Memory(
                        granule, True, False, None, None, True
                    )
                memory.granule, memory.deleted, memory.error = granule, True, False
                self.deleted_at_source(record.identifier)
                continue
            content = record.content
            same = (
                memory is not None
                and not update_all
                and memory.written is not None
                and memory.written_granule == granule
                and not memory.error
                and not (self.day_not_over(granule) and content != memory.listed)
                # other sets, same datestamp: moved (DSpace, InvenioRDM), written again
                and memory.listed is not None
                and content.sets == memory.listed.sets
            )
            if same:  # skipped, or a local change undone from the stored transform
                assert memory is not None
                memory.deleted, memory.target_deleted = False, False
                continue
            fails = self.fails(content) or self.refused_deposit_doi(record.content, memory)
            if memory is None:
                memory = self.memory[record.identifier] = Memory(
                    granule, False, False, None, None, True
                )
            memory.granule, memory.deleted, memory.listed = granule, False, content
            if fails:
                memory.error = True
                continue
            memory.error = False
            new = memory.written is None
            memory.written, memory.written_granule = content, granule
            memory.reviewed = False
            memory.target_deleted = False
            memory.communities |= content.communities()
            if content.doi is not None:
                for deposit in self.deposits:
                    taken = deposit.doi == content.doi and deposit.taken_by is None
                    # re-identified: a new record takes the tombstone a deleted one left
                    reidentified = (
                        new
                        and deposit.taken_by is not None
                        and (taker := self.memory[deposit.taken_by]).target_deleted
                        and taker.written is not None
                        and taker.written.doi == content.doi
                    )
                    if taken or reidentified:
                        deposit.taken_by = record.identifier
        for identifier in listed:
            self.pending.discard(identifier.identifier)
        # A record changed locally is written back from what the source listed last, also
        # when the harvest did not list it: a failed one that can be written now is.
        listed_ids = {r.identifier for r in listed}
        for identifier in set(self.local_changes) - listed_ids:
            memory = self.memory[identifier]
            content = memory.listed
            if (
                memory.error
                and not memory.deleted
                and content is not None
                and not self.fails(content)
                and not self.refused_deposit_doi(content, memory)
            ):
                memory.error = False
                memory.written, memory.written_granule = content, memory.granule
                memory.reviewed = False
                memory.target_deleted = False
                memory.communities |= content.communities()
        # Every harvest undoes them, but for a record that fails: what the source reports
        # cannot be written, and the user's change stays next to the record's error.
        self.local_changes = {
            i: what for i, what in self.local_changes.items() if self.memory[i].error
        }

    def refused_deposit_doi(self, content: Content, memory: Memory | None) -> bool:
        """A record with a target record of its own cannot take a user's deposit over."""
        return (
            memory is not None
            and memory.written is not None
            and any(d.doi == content.doi and d.taken_by is None for d in self.deposits)
        )

    def fails(self, content: Content) -> bool:
        return content.bad or any(
            SET_COMMUNITIES[s] not in self.created_communities
            for s in content.sets
            if s in SET_COMMUNITIES
        )

    def run_reconcile(self, services: Services) -> None:
        live = [i for i, m in self.memory.items() if not m.deleted]
        present = {r.identifier for r in self.records.values() if not r.vanished and not r.deleted}
        vanished = [i for i in live if i not in present]
        force = bool(vanished) and (len(vanished) > 0.5 * len(live) or not present)
        self.log.append(f"reconcile (vanished: {vanished}{', forced' if force else ''})")
        # Those an earlier reconcile found vanished that the source lists again are
        # harvested again by identifier (`returned`), as a harvest listing them would.
        returned = [
            r
            for r in self.records.values()
            if r.identifier in present
            and (memory := self.memory.get(r.identifier)) is not None
            and memory.gone
        ]
        self.drafts = self.never_published_ids()
        report = reconcile(services, HARVESTER, force=force)
        self.check(
            sorted(report.vanished) == sorted(vanished), f"reconcile found {report.vanished}"
        )
        self.check(
            report.returned == sorted(r.identifier for r in returned),
            f"reconcile found listed again {report.returned}, the model expects "
            f"{sorted(r.identifier for r in returned)}",
        )
        for identifier in vanished:
            memory = self.memory[identifier]
            memory.deleted, memory.error, memory.gone = True, False, True
            self.deleted_at_source(identifier)
        if returned:
            self.log.append(f"  harvested again: {sorted(r.identifier for r in returned)}")
            self.apply_harvest(returned, update_all=False)

    # -- the checks --------------------------------------------------------------------
    def check(self, condition: bool, message: str) -> None:
        if not condition:
            raise Divergence(
                f"seed {self.seed}: {message}\n  operations:\n    " + "\n    ".join(self.log)
            )

    def target_record(self, identifier: str) -> dict | None:
        """The record's live target record (or, publish: false, its draft never published)."""
        with EmbeddedRepository(self.settings.target_db_url) as repository:
            rows = [
                r
                for r in repository.list(harvester=HARVESTER)
                if r["source_identifier"] == identifier and r["state"] in self.counting
            ]
            return repository.show(rows[0]["id"]) if rows else None

    def verify(self, services: Services) -> None:
        with EmbeddedRepository(self.settings.target_db_url) as repository:
            rows = repository.list()
            shown = {r["id"]: repository.show(r["id"]) for r in rows if r["state"] in self.counting}
        live_by_source: dict[str, list[dict]] = {}
        for record in shown.values():
            if record["source_harvester"] == HARVESTER:
                live_by_source.setdefault(record["source_identifier"], []).append(record)
        expected_live = {
            i: m for i, m in self.memory.items() if m.written is not None and not m.target_deleted
        }
        for identifier, memory in sorted(self.memory.items()):
            found = live_by_source.get(identifier, [])
            if identifier in self.local_changes and not memory.target_deleted:
                # A reconcile is no harvest: the user's change stays until the next one.
                self.check(len(found) <= 1, f"{identifier}: {len(found)} live target records")
            elif identifier not in expected_live:
                self.check(not found, f"{identifier} should not be live in the target: {found}")
            else:
                written = memory.written
                assert written is not None
                self.check(len(found) == 1, f"{identifier}: {len(found)} live target records")
                local = found[0]
                data, doi = reviewed(local)
                self.check(
                    (data["metadata"]["title"], doi) == (written.title, written.doi),
                    f"{identifier}: the target holds {data['metadata']['title']!r} "
                    f"{doi}, the model expects {written.title!r} {written.doi}",
                )
                names = [c["person_or_org"]["name"] for c in data["metadata"]["creators"]]
                self.check(
                    len(names) == len(written.creators),
                    f"{identifier}: creators {names}, expected {written.creators}",
                )
                if self.publishes or memory.reviewed:
                    self.check(local["draft"] is None, f"{identifier}: a draft is left: {local}")
                self.check(
                    memory.communities <= set(local["communities"]),
                    f"{identifier}: communities {local['communities']}, "
                    f"expected at least {sorted(memory.communities)}",
                )
            harvest_record = services.state.get_record(identifier, HARVESTER)
            self.check(harvest_record is not None, f"{identifier}: no harvest record")
            assert harvest_record is not None
            errors = harvest_record["errors"]
            self.check(
                bool(errors) == memory.error,
                f"{identifier}: errors on its harvest record {errors}, "
                f"the model expects {'some' if memory.error else 'none'}",
            )
        unexpected = set(live_by_source) - set(self.memory)
        self.check(not unexpected, f"live target records nobody harvested: {unexpected}")
        dois = [doi for r in shown.values() if (doi := reviewed(r)[1])]
        self.check(len(dois) == len(set(dois)), f"a DOI held twice: {sorted(dois)}")
        every = {r["id"]: r for r in rows}
        for deposit in self.deposits:
            record = shown.get(deposit.record_id)
            if deposit.taken_by is not None and (
                deposit.taken_by not in expected_live or deposit.taken_by in self.local_changes
            ):
                self.check(
                    every[deposit.record_id]["source_identifier"] == deposit.taken_by,
                    f"deposit {deposit.record_id} was not taken over by {deposit.taken_by}",
                )
                continue
            self.check(record is not None, f"deposit {deposit.record_id} is not live")
            assert record is not None
            if deposit.taken_by is None:
                self.check(
                    record["source_harvester"] is None
                    and record["data"]["metadata"]["title"] == deposit.title,
                    f"deposit {deposit.record_id} changed: {record}",
                )
            else:
                self.check(
                    record["source_identifier"] == deposit.taken_by,
                    f"deposit {deposit.record_id} was not taken over by {deposit.taken_by}: "
                    f"{record['source_identifier']}",
                )

    # -- an epoch ----------------------------------------------------------------------
    def epoch(self, services: Services, number: int) -> None:
        self.log.append(f"-- epoch {number}")
        self.advance()
        if number > 0:
            self.mutate()
        choice = self.rng.random()
        if number == 0 or choice < 0.15:
            self.harvest(services, "full", self.rng.random() < 0.2)
        elif choice < 0.3:
            self.run_reconcile(services)
            if self.rng.random() < 0.5:
                self.harvest(services, "incremental", False)
        else:
            self.harvest(services, "incremental", self.rng.random() < 0.1)
        self.verify(services)


def reviewed(record: dict) -> tuple[dict, str | None]:
    """The data and DOI a target record holds once its draft is published (none: as is)."""
    if record["draft"] is None:
        return record["data"], record["doi"]
    return record["draft"], pid_of(record["draft"])


# Seeds that once found a bug, run with the default ones: 45 (a day-granular source changes
# a record twice on one day, a failed harvest between; the store judged "the day is not over"
# by our clock instead of the source's responseDate, so the change was skipped); 18 (a record
# a reconcile found vanished is brought back, and the next reconcile harvests it again: the
# model left it deleted); 90 (a day-granular record moved to another set on the day of its
# datestamp, harvested after that day: written again, which the model skipped). Seed 124 (such
# a record also changed on that day: the store wrote its old XML's data under the new sets) is
# kept as a focused test instead (test_model_regressions.py): about a second, the seed 14 s.
REGRESSION_SEEDS = [45, 18, 90]


def seeds(variable: str = "OAI_MODEL_SEEDS", default: int = 3) -> list[int]:
    if "OAI_MODEL_SEED" in os.environ:
        return [int(os.environ["OAI_MODEL_SEED"])]
    spec = os.environ.get(variable, str(default)).strip()
    first, dash, last = spec.partition("-")
    if dash:  # A-B: that range alone
        return list(range(int(first), int(last) + 1))
    count = int(spec)
    extra = REGRESSION_SEEDS if variable == "OAI_MODEL_SEEDS" and count else []
    return list(dict.fromkeys([*range(count), *extra]))


# The audit's kinds: (variable naming its seeds, default count, database, writer publishes).
KINDS = (
    ("OAI_MODEL_SEEDS", 3, "sqlite", True),
    ("OAI_MODEL_POSTGRES_SEEDS", 2, "postgresql", True),
    ("OAI_MODEL_DRAFTS_SEEDS", 2, "sqlite", False),
    ("OAI_MODEL_POSTGRES_DRAFTS_SEEDS", 0, "postgresql", False),
)


def cases() -> list:
    """(seed, database, writer publishes) triples of each of the KINDS."""
    return [
        pytest.param(
            (seed, database, publishes),
            id=str(seed)
            + ("-postgresql" if database == "postgresql" else "")
            + ("" if publishes else "-drafts"),
            marks=[pytest.mark.postgres] if database == "postgresql" else [],
        )
        for variable, default, database, publishes in KINDS
        for seed in seeds(variable, default)
    ]


def source_kinds(seed: int) -> tuple[str, str]:
    """(granularity, deletedRecord) of the seed's source."""
    rng = random.Random(f"kind-{seed}")
    return rng.choice(["seconds", "day"]), rng.choice(["persistent", "no", "transient"])


@pytest.fixture
def simulation(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Simulation]:
    seed, database, publishes = request.param
    if database == "postgresql":
        server = request.getfixturevalue("postgres_url")
        monkeypatch.setenv("OAI_PIPELINE_STATE_DB_URL", fresh_database(server))
        monkeypatch.setenv("OAI_PIPELINE_TARGET_DB_URL", fresh_database(server))
    settings: Settings = request.getfixturevalue("settings")
    granularity, deleted_record = source_kinds(seed)
    source = ClockedSource([], page_size=3, granularity=granularity, deleted_record=deleted_record)
    harvest_fake_source(settings, monkeypatch, source)
    monkeypatch.setattr(
        reconcile_module,
        "build_reader",
        lambda harvester: OAIPMHReader(
            None, harvester, transport=source.transport(), sleep=lambda _s: None
        ),
    )
    with Services(settings) as services:
        harvester = HarvesterRegistry(services.state).get(HARVESTER)
        writers = harvester.writers if publishes else [DRAFTS_WRITER]
        services.state.save_harvester(
            harvester.model_copy(update={"transformers": [TRANSFORMER], "writers": writers})
        )
    with EmbeddedRepository(settings.target_db_url) as repository:
        repository.create_community("c-a")
        repository.create_community("c-b")
    simulation = Simulation(seed, settings, source, granularity, publishes=publishes)
    for _ in range(simulation.rng.randint(3, 8)):  # records before the first harvest
        simulation.op_create(set())
    for record in simulation.records.values():  # some older than the grid's first window
        record.datestamp -= timedelta(days=simulation.rng.choice([1, 10, 70]))
    simulation.sync_source()
    yield simulation


@pytest.mark.parametrize("simulation", cases(), indirect=True)
def test_the_target_follows_the_model_over_many_harvests(simulation: Simulation) -> None:
    epochs = int(os.environ.get("OAI_MODEL_EPOCHS", "20"))
    with Services(simulation.settings) as services:
        for number in range(epochs):
            simulation.epoch(services, number)
