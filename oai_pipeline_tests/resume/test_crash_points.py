"""A CLI harvest that dies at a precise point (`os._exit`, like SIGKILL), then is rerun, ends
like an uninterrupted one: same target, same harvest records, and the same per-record run
statuses and counts in `status`.

A small deterministic slice of `crash_sweep.py` (the full sweep is run by hand, see its
docstring): each case injects the crash at the k-th call of one function or SQL statement.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from oai_pipeline.sample_endpoint.records import generate_datacite_records
from oai_pipeline.sample_endpoint.server import OAIEndpoint
from oai_pipeline_tests.resume import crash_sweep
from oai_pipeline_tests.resume.crash_sweep import EXIT_CODE, HARVESTER, PREFIX, Backend, Home

FIRST_DAY = datetime(2024, 1, 5, tzinfo=UTC)
CHANGE_DAY = FIRST_DAY + timedelta(days=10)
RECORDS = generate_datacite_records(
    100, seed=5, start=FIRST_DAY, span_days=2, prefixes=(PREFIX,), deleted_fraction=0.05
)
FULL = ["harvest", HARVESTER]
# From the first harvest's last day: records moved to other sets without a new datestamp
# (as DSpace and InvenioRDM servers do) are listed again.
RELISTED_SINCE = FIRST_DAY + timedelta(days=1)
INCREMENTAL = ["harvest", HARVESTER, "--since", RELISTED_SINCE.date().isoformat()]


def _harvest(home: Home, args: list[str], crash: str = "none") -> None:
    result = crash_sweep._cli(home, crash, args)
    expected = 0 if crash == "none" else EXIT_CODE
    assert result.returncode == expected, result.stdout + result.stderr[-3000:]


def _deleted_then_listed_again(endpoint: OAIEndpoint, home: Home, records: list[Any]) -> None:
    """The records vanish, a reconcile deletes them, and the source lists them again."""
    for record in records:
        endpoint.remove(record.identifier)
    _harvest(home, ["reconcile", HARVESTER])
    for record in records:
        endpoint.upsert(record)


class HarvestedSource:
    """An endpoint keeping no deletions (a reconcile finds them) serving the first 30
    records, and homes that harvested it: made once for the module (a harvest and a
    reconcile per test were most of its time), copied for each test, the endpoint given
    back its records first."""

    def __init__(self, endpoint: OAIEndpoint, root: Path, *, drafts: bool = False) -> None:
        self.endpoint = endpoint
        self.drafts = drafts  # its writer leaves drafts (`publish: false`)
        self.records = RECORDS[:30]
        self._root = root
        self._templates: dict[int, Home] = {}

    def restore(self) -> None:
        """The endpoint's records as at first, whatever a test removed or added."""
        for record in self.endpoint.records():
            self.endpoint.remove(record.identifier)
        for record in self.records:
            self.endpoint.upsert(record)

    def template(self, returned: int) -> Home:
        """A home that harvested the source and, if `returned`, whose reconcile deleted the
        first `returned` live records, which the source lists again."""
        if returned not in self._templates:
            self.restore()
            if returned == 0:
                home = Backend().new_home(self._root, "harvested")
                crash_sweep.register_harvester(
                    home, self.endpoint.base_url, batch_size=10, drafts=self.drafts
                )
                _harvest(home, FULL)
            else:
                home = Backend().new_home(self._root, f"returned-{returned}", self.template(0))
                live = [r for r in self.records if not r.deleted]
                _deleted_then_listed_again(self.endpoint, home, live[:returned])
            self._templates[returned] = home
        return self._templates[returned]


@pytest.fixture(scope="module")
def shared_source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HarvestedSource]:
    with OAIEndpoint(RECORDS[:30], page_size=10, deleted_record="no") as endpoint:
        yield HarvestedSource(endpoint, tmp_path_factory.mktemp("crash_points_reconcile"))


@pytest.fixture(scope="module")
def shared_drafts_source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HarvestedSource]:
    """`shared_source` harvested by a writer that leaves drafts (`publish: false`)."""
    with OAIEndpoint(RECORDS[:30], page_size=10, deleted_record="no") as endpoint:
        root = tmp_path_factory.mktemp("crash_points_reconcile_drafts")
        yield HarvestedSource(endpoint, root, drafts=True)


@contextmanager
def _harvested_source(
    shared: HarvestedSource, tmp_path: Path, name: str, returned: int = 0
) -> Iterator[tuple[OAIEndpoint, Home]]:
    """The shared source as at first, and a copy of a home that harvested it (`returned`:
    see `HarvestedSource.template`)."""
    template = shared.template(returned)
    shared.restore()
    yield shared.endpoint, Backend().new_home(tmp_path, name, template)


def _outcome(home: Home, run_id: int) -> dict[str, Any]:
    """The home's target, harvest records and run statuses, and what `status` says."""
    from oai_pipeline.state.store import StateStore

    got = crash_sweep.snapshot(home, run_id)
    with StateStore(crash_sweep._settings(home).state_db_url) as state:
        status = state.run_status(run_id=run_id)
    got["status_records"] = status["records"]
    got["status_staged"] = status["counters"]["staged"]
    got.pop("tmp_files")  # an ad-hoc run's folders are its own: the rerun writes others
    return got


@dataclasses.dataclass
class Source:
    endpoint: OAIEndpoint
    empty: Home  # the harvester registered, nothing harvested
    first: dict[str, Any]  # the uninterrupted first harvest
    harvested: Home | None = None  # after an uninterrupted first harvest
    incremental: dict[str, Any] | None = None  # the uninterrupted harvest after the change


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Source]:
    root = tmp_path_factory.mktemp("crash_points")
    backend = Backend()
    with OAIEndpoint(RECORDS, page_size=20) as endpoint:
        empty = backend.new_home(root, "empty")
        crash_sweep.register_harvester(empty, endpoint.base_url, batch_size=10)
        reference = backend.new_home(root, "reference", empty)
        _harvest(reference, FULL)
        yield Source(endpoint, empty, _outcome(reference, 1))


@pytest.fixture(scope="module")
def changed(source: Source, tmp_path_factory: pytest.TempPathFactory) -> Source:
    """The source after updates, deletions, new records and records moved to other sets, and
    the uninterrupted incremental harvest of it (from a home that had harvested it all
    before, where users then edited and deleted records: the harvest brings them back)."""
    root = tmp_path_factory.mktemp("crash_points_changed")
    harvested = Backend().new_home(root, "harvested", source.empty)
    _harvest(harvested, FULL)
    changes = crash_sweep.change_source(
        source.endpoint, RECORDS, CHANGE_DAY, relisted_since=RELISTED_SINCE
    )
    assert changes["moved_without_datestamp"] and changes["moved_with_datestamp"]
    crash_sweep.edit_target_locally(harvested)
    reference = Backend().new_home(root, "reference", harvested)
    _harvest(reference, INCREMENTAL)
    assert crash_sweep.source_sets_mismatch(reference, source.endpoint) == []
    source.harvested = harvested
    source.incremental = _outcome(reference, 2)
    return source


@pytest.mark.parametrize(
    "crash",
    [
        # the target committed a batch of creations, the state store heard nothing of it
        "writer_apply:2:after",
        # the write stage's outcomes reached the state store, the run statuses did not
        "sql_run_status:1:before",
        # a Parquet part half written (its old file renamed away), then a clean rerun
        "write_part:2:mid",
        # the run finished, its lease not released: the rerun is a new run that lists every
        # record again as stored (one UPDATE per chunk; sets, XML and written state kept)
        "finish_run:1:after",
    ],
)
def test_a_first_harvest_killed_and_rerun_ends_like_an_uninterrupted_one(
    source: Source, tmp_path: Path, crash: str
) -> None:
    home = Backend().new_home(tmp_path, "home", source.empty)
    _harvest(home, FULL, crash)
    _harvest(home, FULL)

    got = _outcome(home, 1)
    assert got == source.first
    assert got["status_records"]["imported"] == sum(1 for r in RECORDS if not r.deleted)


@pytest.fixture(scope="module")
def drafts_source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Source]:
    """The source harvested by a writer that leaves drafts (`publish: false`)."""
    root = tmp_path_factory.mktemp("crash_points_drafts")
    with OAIEndpoint(RECORDS, page_size=20) as endpoint:
        empty = Backend().new_home(root, "empty")
        crash_sweep.register_harvester(empty, endpoint.base_url, batch_size=10, drafts=True)
        reference = Backend().new_home(root, "reference", empty)
        _harvest(reference, FULL)
        source = Source(endpoint, empty, _outcome(reference, 1))
        source.harvested = Backend().new_home(root, "harvested", reference)
        yield source


@pytest.fixture(scope="module")
def drafts_changed(drafts_source: Source, tmp_path_factory: pytest.TempPathFactory) -> Source:
    """`drafts_source` after updates, deletions and new records, and the uninterrupted
    incremental harvest of it."""
    assert drafts_source.harvested is not None
    root = tmp_path_factory.mktemp("crash_points_drafts_changed")
    crash_sweep.change_source(drafts_source.endpoint, RECORDS, CHANGE_DAY)
    reference = Backend().new_home(root, "reference", drafts_source.harvested)
    _harvest(reference, INCREMENTAL)
    drafts_source.incremental = _outcome(reference, 2)
    return drafts_source


def test_a_first_harvest_into_drafts_killed_after_a_batch_reports_it_created(
    drafts_source: Source, tmp_path: Path
) -> None:
    """`publish: false`: killed after the target took a batch of new drafts and before the
    state store heard of it, the rerun reported those records updated (`publish_draft`),
    not imported as the uninterrupted harvest does."""
    home = Backend().new_home(tmp_path, "home", drafts_source.empty)
    _harvest(home, FULL, "writer_apply:2:after")
    _harvest(home, FULL)

    got = _outcome(home, 1)
    assert got == drafts_source.first
    assert got["status_records"]["updated"] == 0
    assert {row[1] for row in got["target"]} == {"draft"}


def test_a_resumed_harvest_killed_as_it_resumes_ends_like_an_uninterrupted_one(
    source: Source, tmp_path: Path
) -> None:
    """Killed half way, then killed again right after its rerun took the run up again
    (`resume_run`: the only harvest that calls it is one that resumes a run)."""
    home = Backend().new_home(tmp_path, "home", source.empty)
    _harvest(home, FULL, "writer_apply:2:after")
    _harvest(home, FULL, "resume_run:1:after")
    _harvest(home, FULL)

    assert _outcome(home, 1) == source.first


@pytest.mark.parametrize("changed_source", ["changed", "drafts_changed"])
def test_an_incremental_harvest_killed_after_its_writes_reports_what_they_did(
    changed_source: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Killed after the target took the batch (updates, creations, deletions) and before
    the state store heard of it: the rerun writes nothing again and still reports the
    records created as imported and those deleted as gone (not updated and unchanged).
    Into drafts (`publish: false`), the rerun reported the drafts it had deleted
    unchanged, their target ids kept on their harvest records."""
    changed: Source = request.getfixturevalue(changed_source)
    assert changed.harvested is not None and changed.incremental is not None
    home = Backend().new_home(tmp_path, "home", changed.harvested)
    _harvest(home, INCREMENTAL, "writer_apply:1:after")
    _harvest(home, INCREMENTAL)

    got = _outcome(home, 2)
    assert got == changed.incremental
    statuses = got["status_records"]
    assert statuses["gone"] > 0 and statuses["imported"] > 0 and statuses["updated"] > 0


def test_a_harvest_killed_before_saving_what_it_brought_back_brings_it_back_when_rerun(
    changed: Source, tmp_path: Path
) -> None:
    """Killed after the target took back the records users changed, before the state store
    heard of it: the rerun finds them again and remembers their revisions (the target had
    already stopped calling them changed locally: the state store kept the revisions of
    before, and the next harvest took the records for changed locally and rewrote them)."""
    assert changed.harvested is not None and changed.incremental is not None
    home = Backend().new_home(tmp_path, "home", changed.harvested)
    _harvest(home, INCREMENTAL, "save_write_outcomes:1:before")
    _harvest(home, INCREMENTAL)

    assert _outcome(home, 2) == changed.incremental


def test_a_reconcile_killed_before_its_deletions_deletes_them_when_rerun(
    shared_source: HarvestedSource, tmp_path: Path
) -> None:
    """Killed after the sweep, before the target took the deletions: the rerun deletes them
    (the records were marked gone first, and a rerun looked for vanished ones among the
    records still marked live only: the target kept them live for ever)."""
    records = RECORDS[:30]
    with _harvested_source(shared_source, tmp_path, "home") as (endpoint, home):
        gone = sorted(r.identifier for r in records if not r.deleted)[:3]
        for identifier in gone:
            endpoint.remove(identifier)

        _harvest(home, ["reconcile", HARVESTER], "writer_apply:1:before")
        _harvest(home, ["reconcile", HARVESTER])

    target = {r[0]: r[1] for r in crash_sweep.snapshot(home)["target"]}
    assert {identifier: target[identifier] for identifier in gone} == dict.fromkeys(
        gone, "tombstone"
    )
    assert sum(state == "live" for state in target.values()) == (
        sum(1 for r in records if not r.deleted) - len(gone)
    )


@pytest.mark.parametrize(
    "crash",
    [
        # the target tombstoned the vanished records, the state store heard nothing of it
        "save_write_outcomes:1:before",
        # the store saved those deletions, the records were not marked gone yet
        "save_write_outcomes:1:after",
    ],
)
def test_a_reconcile_killed_before_saving_its_deletions_remembers_them_when_rerun(
    shared_source: HarvestedSource, tmp_path: Path, crash: str
) -> None:
    """Killed after the target tombstoned the vanished records, before the state store saved
    those outcomes: the rerun finds them deleted already and still remembers the revision
    the target holds, and reports them deleted (it skipped them, their harvest records kept
    the revision before the deletion, and its report said nothing was deleted). Killed after
    the store saved them, before they were marked gone: the rerun reports them deleted too
    (it found them as remembered and reported them `skip`)."""
    records = RECORDS[:30]
    with _harvested_source(shared_source, tmp_path, "harvested") as (endpoint, harvested):
        gone = sorted(r.identifier for r in records if not r.deleted)[:3]
        for identifier in gone:
            endpoint.remove(identifier)
        reference = Backend().new_home(tmp_path, "reference", harvested)
        home = Backend().new_home(tmp_path, "home", harvested)
        reconcile = ["reconcile", HARVESTER, "--json"]

        expected = crash_sweep._cli(reference, "none", reconcile)
        _harvest(home, reconcile, crash)
        rerun = crash_sweep._cli(home, "none", reconcile)
        assert rerun.returncode == 0, rerun.stderr[-3000:]

        assert json.loads(rerun.stdout)["actions"] == json.loads(expected.stdout)["actions"]
        assert json.loads(rerun.stdout)["actions"] == {"delete": len(gone)}
        got, want = crash_sweep.snapshot(home), crash_sweep.snapshot(reference)
        assert got["target"] == want["target"]
        assert got["harvest_records"] == want["harvest_records"]

        # back at the source: restored alike, as records the reconcile deleted
        for record in records:
            if record.identifier in gone:
                endpoint.upsert(record)
        returned = [crash_sweep._cli(h, "none", reconcile) for h in (reference, home)]
    assert [json.loads(r.stdout)["returned_actions"] for r in returned] == [
        {"restore": len(gone)}
    ] * 2
    assert crash_sweep.snapshot(home)["target"] == crash_sweep.snapshot(reference)["target"]
    assert (
        crash_sweep.snapshot(home)["harvest_records"]
        == crash_sweep.snapshot(reference)["harvest_records"]
    )


# the uninterrupted harvest's home and the killed one's (`_reports_killed_and_rerun`)
_HOMES = ("reference", "home")


def _reports_killed_and_rerun(
    changed: Source, tmp_path: Path, crash: str, harvest: list[str] = INCREMENTAL
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The incremental harvest's --json report uncrashed, and its rerun's after `crash`."""
    assert changed.harvested is not None
    reference, home = (Backend().new_home(tmp_path, n, changed.harvested) for n in _HOMES)
    harvest = [*harvest, "--json"]
    expected = json.loads(crash_sweep._cli(reference, "none", harvest).stdout)
    _harvest(home, harvest, crash)
    rerun = crash_sweep._cli(home, "none", harvest)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    return expected, json.loads(rerun.stdout)


def test_a_harvest_killed_while_bringing_records_back_reports_them_brought_back(
    changed: Source, tmp_path: Path
) -> None:
    """Killed after the target took back the records users changed, before the state store
    heard of it: the rerun reports them brought back, by this run, with the same actions
    as an uninterrupted harvest (it found them holding the harvested data already and
    reported `nothing`, none brought back; then `update` for those it had restored: the
    record's revisions before the run tell that it was a tombstone)."""
    expected, got = _reports_killed_and_rerun(changed, tmp_path, "save_write_outcomes:1:before")

    assert expected["local_changes_undone"] > 0
    assert got["local_changes_undone"] == expected["local_changes_undone"]
    assert expected["local_changes_undone_actions"].get("restore")
    assert got["local_changes_undone_actions"] == expected["local_changes_undone_actions"]


@pytest.fixture(scope="module")
def drafts_deposits_changed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Source]:
    """A writer that leaves drafts (`publish: false`) took users' deposits of some DOIs over
    (published records, given the harvest's edit drafts), users then changed some of them
    (an edit draft left, an edit published, deleted), and the source changed (`changed`)."""
    root = tmp_path_factory.mktemp("crash_points_drafts_deposits")
    with OAIEndpoint(RECORDS, page_size=20) as endpoint:
        empty = Backend().new_home(root, "empty")
        crash_sweep.register_harvester(empty, endpoint.base_url, batch_size=10, drafts=True)
        crash_sweep.deposit_dois(empty, RECORDS)
        harvested = Backend().new_home(root, "harvested", empty)
        _harvest(harvested, FULL)
        crash_sweep.change_source(endpoint, RECORDS, CHANGE_DAY, relisted_since=RELISTED_SINCE)
        assert crash_sweep.edit_target_locally(harvested) == dict.fromkeys(
            ("drafted", "published", "deleted"), 3
        )
        yield Source(endpoint, empty, {}, harvested)


@pytest.mark.parametrize(
    ("since", "crash"),
    [
        # the records users changed listed again: the write stage's drafts reached the
        # target, the state store heard nothing of them
        (RELISTED_SINCE, "save_written:1:before"),
        # listed only what the source changed: the records users changed taken back, the
        # state store heard nothing of it
        (CHANGE_DAY, "save_write_outcomes:1:before"),
    ],
)
def test_a_harvest_into_drafts_killed_after_its_drafts_reports_what_they_did(
    drafts_deposits_changed: Source, tmp_path: Path, since: datetime, crash: str
) -> None:
    """`publish: false`, killed after the target took the harvest's drafts, before the state
    store heard of them: the rerun reports what they did. A draft makes no new revision, so
    the skip rule took a record whose user's edit draft the killed attempt had overwritten
    for as harvested (`skip`, unchanged, where the uninterrupted harvest updated it), and
    the records users deleted that the attempt had restored were `update`d, not restored."""
    harvest = ["harvest", HARVESTER, "--since", since.date().isoformat()]
    expected, got = _reports_killed_and_rerun(drafts_deposits_changed, tmp_path, crash, harvest)

    undone = expected["local_changes_undone_actions"]
    assert expected["actions"].get("restore", 0) + undone.get("restore", 0) == 3
    for key in ("actions", "local_changes_undone", "local_changes_undone_actions"):
        assert got[key] == expected[key], key
    # the run statuses too (`unchanged` for the record skipped)
    reference, home = (Home(tmp_path / n, crash_sweep._base_env(tmp_path / n)) for n in _HOMES)
    assert _outcome(home, 2) == _outcome(reference, 2)


def test_a_harvest_killed_after_saving_what_it_brought_back_still_reports_it(
    changed: Source, tmp_path: Path
) -> None:
    """Killed once the state store saved the records it brought back, before its run was
    finished: the rerun resumes the run and reports them brought back by it, with the same
    actions (it found them settled, or its rules skipped them, and reported none undone)."""
    expected, got = _reports_killed_and_rerun(changed, tmp_path, "save_write_outcomes:1:after")

    assert got["run_id"] == expected["run_id"]
    assert expected["local_changes_undone"] > 0
    assert got["local_changes_undone"] == expected["local_changes_undone"]
    assert got["local_changes_undone_actions"] == expected["local_changes_undone_actions"]


@pytest.mark.parametrize(
    "crash",
    [
        # the harvest of the records listed again staged them, then died before writing
        "writer_apply:1:before",
        # it wrote them, and died before its run was finished
        "finish_run:1:before",
    ],
)
def test_a_reconcile_killed_while_harvesting_returned_records_finishes_it_when_rerun(
    shared_source: HarvestedSource, tmp_path: Path, crash: str
) -> None:
    """A reconcile that harvests again the records an earlier one deleted (the source lists
    them again), killed in that harvest: the rerun resumes it. Before, the records staged
    were no longer marked gone, so the rerun harvested nothing: they stayed deleted in the
    target while the source had them, and the run stayed unfinished."""
    back, _, expected, got, want, snapshot = _reconcile_killed_and_rerun(
        shared_source, tmp_path, crash, 3, 0
    )
    assert got["returned"] == expected["returned"] == sorted(r.identifier for r in back)
    for key in ("target", "harvest_records", "last_run_status", "unfinished_runs"):
        assert snapshot[key] == want[key], key


@pytest.mark.parametrize(
    "crash",
    [
        # the vanished records deleted and marked gone, the report not printed yet
        "mark_gone:1:after",
        # the harvest of the records listed again (after the deletions' write) started,
        # then died
        "writer_apply:2:before",
        # that harvest succeeded, then the reconcile died before closing its run
        "finish_run:1:after",
        # everything done, the reconcile run not closed yet
        "finish_reconcile_run:1:before",
    ],
)
def test_a_reconcile_killed_after_marking_records_gone_reports_them_when_rerun(
    shared_source: HarvestedSource, tmp_path: Path, crash: str
) -> None:
    """Killed once it had deleted the vanished records and marked them gone: the rerun
    reports them vanished and deleted, as the uninterrupted reconcile does (marked gone,
    no sweep found them vanished again: the rerun said nothing vanished, nothing deleted,
    while this reconcile had deleted them), and what it harvested again of those listed
    again as written before."""
    back, dropped, expected, got, want, snapshot = _reconcile_killed_and_rerun(
        shared_source, tmp_path, crash, 2, 3
    )
    assert expected["vanished"] == sorted(r.identifier for r in dropped)
    assert expected["actions"] == {"delete": len(dropped)}
    for key in ("vanished", "actions", "errors", "returned"):
        assert got[key] == expected[key], key
    # what the killed attempt's harvest wrote is `already_written`, as a resumed harvest says
    assert sum(expected["returned_actions"].values()) == len(back)
    assert not crash_sweep._union_differs(got["returned_actions"], expected["returned_actions"])
    for key in ("target", "harvest_records", "unfinished_runs"):
        assert snapshot[key] == want[key], key


def test_a_reconcile_killed_after_closing_its_run_is_followed_by_a_new_one(
    shared_source: HarvestedSource,
    tmp_path: Path,
) -> None:
    """Killed releasing its leases, its run closed: the rerun is a new reconcile (another
    run id) of a source that did not change, reporting nothing of the first's deletions as
    its own, and leaving what the uninterrupted reconcile leaves."""
    _, _, expected, got, want, snapshot = _reconcile_killed_and_rerun(
        shared_source, tmp_path, "lock_release:2:after", 2, 3
    )
    assert expected["actions"] == {"delete": 3}
    assert got["run_id"] == expected["run_id"] + 1
    assert (got["vanished"], got["actions"], got["returned"]) == ([], {}, [])
    for key in ("target", "harvest_records", "unfinished_runs"):
        assert snapshot[key] == want[key], key


@pytest.mark.parametrize(
    "crash",
    [
        # the target deleted the vanished records' drafts, the state store heard nothing of it
        "writer_apply:1:after",
        # the store saved the drafts' deletions, the records not marked gone yet
        "mark_gone:1:before",
        # the records listed again written as drafts, the state store heard nothing of it
        "writer_apply:2:after",
    ],
)
def test_a_reconcile_of_drafts_killed_after_its_writes_ends_like_an_uninterrupted_one(
    shared_drafts_source: HarvestedSource, tmp_path: Path, crash: str
) -> None:
    """A writer that leaves drafts: a reconcile killed after the target deleted the drafts
    of the vanished records, or after it wrote the records listed again as new drafts, before
    the state store heard of it, or once it saved the deletions, before it marked the records
    gone. The rerun reports and remembers what the uninterrupted reconcile does. Before, the
    datestamp as written made each a skip: the harvest records of the deleted drafts kept
    their ids, the new drafts' were never linked to them, and the report said `skip`."""
    back, dropped, expected, got, want, snapshot = _reconcile_killed_and_rerun(
        shared_drafts_source, tmp_path, crash, 2, 3
    )
    assert expected["actions"] == {"delete_draft": len(dropped)}
    assert expected["returned_actions"] == {"create": len(back)}
    for key in ("vanished", "actions", "errors", "returned", "returned_actions"):
        assert got[key] == expected[key], key
    for key in ("target", "harvest_records", "run_record_statuses", "unfinished_runs"):
        assert snapshot[key] == want[key], key


def _reconcile_killed_and_rerun(
    shared_source: HarvestedSource, tmp_path: Path, crash: str, returning: int, dropping: int
) -> tuple[list[Any], list[Any], dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Harvested and reconciled after `returning` live records vanished; then those are
    listed again and `dropping` others vanish. Reconciled once in a reference home, and in
    another killed at `crash` and rerun: (the records back, those dropped, the reference's
    report, the rerun's, the reference's snapshot, the rerun's)."""
    records = RECORDS[:30]
    with _harvested_source(shared_source, tmp_path, "reconciled", returning) as (
        endpoint,
        reconciled,
    ):
        live = [r for r in records if not r.deleted]
        back, dropped = live[:returning], live[returning : returning + dropping]
        for record in dropped:
            endpoint.remove(record.identifier)
        reference = Backend().new_home(tmp_path, "reference", reconciled)
        home = Backend().new_home(tmp_path, "home", reconciled)
        reconcile = ["reconcile", HARVESTER, "--json"]

        expected = json.loads(crash_sweep._cli(reference, "none", reconcile).stdout)
        _harvest(home, reconcile, crash)
        rerun = crash_sweep._cli(home, "none", reconcile)
        assert rerun.returncode == 0, rerun.stderr[-3000:]
    got = json.loads(rerun.stdout)
    return back, dropped, expected, got, crash_sweep.snapshot(reference), crash_sweep.snapshot(home)


@pytest.mark.parametrize(
    "crash",
    [
        # the target deleted the vanished records, the state store heard nothing of it
        "writer_apply:1:after",
        # the store saved the deletions' outcomes, the records not marked gone yet
        "mark_gone:1:before",
    ],
)
def test_a_record_a_killed_reconcile_deleted_comes_back_when_the_source_lists_it_again(
    shared_source: HarvestedSource, tmp_path: Path, crash: str
) -> None:
    """Killed after deleting the vanished records in the target, before marking them gone;
    then the source lists one of them again. The rerun harvests it again (the harvest wins)
    and reports it deleted and returned. Before, it stayed a tombstone for good: live in the
    store and listed, neither vanished nor gone, no reconcile or harvest looked at it."""
    records = RECORDS[:30]
    with _harvested_source(shared_source, tmp_path, "home") as (endpoint, home):
        dropped = [r for r in records if not r.deleted][:3]
        for record in dropped:
            endpoint.remove(record.identifier)
        reconcile = ["reconcile", HARVESTER, "--json"]
        _harvest(home, reconcile, crash)
        endpoint.upsert(dropped[0])  # the source lists it again
        rerun = crash_sweep._cli(home, "none", reconcile)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    report = json.loads(rerun.stdout)
    back = dropped[0].identifier
    assert report["vanished"] == sorted(r.identifier for r in dropped)
    assert report["actions"] == {"delete": 3}
    assert report["returned"] == [back]
    assert report["returned_actions"] == {"restore": 1}
    target = {row[0]: row[1] for row in crash_sweep.snapshot(home)["target"]}
    assert target[back] == "live"
    assert [target[r.identifier] for r in dropped[1:]] == ["tombstone", "tombstone"]


@pytest.mark.parametrize(
    "crash",
    [
        # the records listed again found and saved on the run, their harvest not begun
        "mark_gone:1:after",
        # that harvest's run created, nothing asked of the source yet: the rerun resumes it,
        # and GetRecord of the record dropped meanwhile answers idDoesNotExist
        "create_run:1:after",
        # that harvest's records staged, none written yet
        "writer_apply:2:before",
    ],
)
def test_a_record_listed_again_then_dropped_before_a_killed_reconcile_harvested_it(
    shared_source: HarvestedSource, tmp_path: Path, crash: str
) -> None:
    """A reconcile found two deleted records listed again and was killed before harvesting
    them; the source then dropped one again. The rerun brings back the other only: the one
    dropped stays deleted, is not reported returned (before: returned, `already_written`
    although no harvest wrote it, or a silent `skip`), a notice names it, and the harvest
    run succeeds."""
    records = RECORDS[:30]
    with _harvested_source(shared_source, tmp_path, "home", returned=2) as (endpoint, home):
        live = [r for r in records if not r.deleted]
        back, dropped = live[:2], live[2:4]
        for record in dropped:
            endpoint.remove(record.identifier)
        reconcile = ["reconcile", HARVESTER, "--json"]
        _harvest(home, reconcile, crash)
        endpoint.remove(back[0].identifier)  # gone again before it was harvested
        rerun = crash_sweep._cli(home, "none", reconcile)
    assert rerun.returncode == 0 and "Traceback" not in rerun.stderr, rerun.stderr[-3000:]
    report = json.loads(rerun.stdout)
    assert report["vanished"] == sorted(r.identifier for r in dropped)
    assert report["returned"] == [back[1].identifier]
    assert report["returned_actions"].get("already_written", 0) == 0
    assert any(back[0].identifier in notice for notice in report["notices"])
    got = crash_sweep.snapshot(home)
    target = {row[0]: row[1] for row in got["target"]}
    assert (target[back[0].identifier], target[back[1].identifier]) == ("tombstone", "live")
    assert got["last_run_status"] == "succeeded" and got["unfinished_runs"] == []


def test_a_reconcile_killed_twice_while_the_source_drops_more_reports_all_its_deletions(
    shared_source: HarvestedSource,
    tmp_path: Path,
) -> None:
    """Killed after marking two vanished records gone; the source drops a third, and the
    rerun is killed in the same place. The next rerun reports the three deletions of the
    run. Before, the second attempt's saved deletions replaced the first's: only the third
    was reported, the first two no longer said anywhere."""
    records = RECORDS[:30]
    with _harvested_source(shared_source, tmp_path, "home") as (endpoint, home):
        live = [r for r in records if not r.deleted]
        reconcile = ["reconcile", HARVESTER, "--json"]
        for record in live[:2]:
            endpoint.remove(record.identifier)
        _harvest(home, reconcile, "mark_gone:1:after")
        endpoint.remove(live[5].identifier)
        _harvest(home, reconcile, "mark_gone:1:after")
        rerun = crash_sweep._cli(home, "none", reconcile)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    report = json.loads(rerun.stdout)
    assert report["run_id"] == 1
    assert report["vanished"] == sorted(r.identifier for r in [*live[:2], live[5]])
    assert report["actions"] == {"delete": 3}


def test_a_record_a_resumed_reconcile_harvest_found_gone_comes_back_when_listed_again(
    shared_source: HarvestedSource,
    tmp_path: Path,
) -> None:
    """A reconcile killed as it began harvesting again the records listed again; the source
    drops one again, so the resumed harvest's GetRecord answers idDoesNotExist and deletes
    it. When the source lists it once more (its old datestamp: no incremental harvest lists
    it), the next reconcile harvests it again. Before, that harvest left it deleted but no
    longer marked gone: no reconcile looked at it again, a tombstone for good."""
    records = RECORDS[:30]
    with _harvested_source(shared_source, tmp_path, "home", returned=2) as (endpoint, home):
        back = [r for r in records if not r.deleted][:2]
        reconcile = ["reconcile", HARVESTER, "--json"]
        _harvest(home, reconcile, "create_run:1:after")
        endpoint.remove(back[0].identifier)
        _harvest(home, reconcile)
        endpoint.upsert(back[0])  # listed once more
        again = crash_sweep._cli(home, "none", reconcile)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout)["returned"] == [back[0].identifier]
    target = {row[0]: row[1] for row in crash_sweep.snapshot(home)["target"]}
    assert target[back[0].identifier] == "live"


def test_a_record_brought_back_then_dropped_between_two_kills_is_reported_returned(
    shared_source: HarvestedSource,
    tmp_path: Path,
) -> None:
    """A reconcile killed once it had harvested again the records listed again; the source
    drops one of them again, and the rerun is killed once it has deleted it again. The next
    rerun reports it returned (it was brought back) and vanished, as it happened; it was
    taken for one gone again before its harvest and left out of `returned`."""
    records = RECORDS[:30]
    with _harvested_source(shared_source, tmp_path, "home", returned=2) as (endpoint, home):
        live = [r for r in records if not r.deleted]
        back, dropped = live[:2], live[2]
        endpoint.remove(dropped.identifier)
        reconcile = ["reconcile", HARVESTER, "--json"]
        _harvest(home, reconcile, "finish_run:1:after")
        endpoint.remove(back[0].identifier)
        _harvest(home, reconcile, "mark_gone:1:after")
        rerun = crash_sweep._cli(home, "none", reconcile)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    report = json.loads(rerun.stdout)
    assert report["returned"] == sorted(r.identifier for r in back)
    assert report["vanished"] == sorted([back[0].identifier, dropped.identifier])
    assert report["notices"] == []


@pytest.mark.parametrize(
    "crash",
    [
        # the harvest of the records listed again succeeded, the reconcile died before
        # closing its run
        "finish_run:1:after",
        # everything done, the reconcile run not closed yet
        "finish_reconcile_run:1:before",
    ],
)
def test_a_reconcile_that_found_nothing_vanished_reports_what_it_brought_back_when_rerun(
    shared_source: HarvestedSource, tmp_path: Path, crash: str
) -> None:
    """A reconcile that found nothing vanished, only records listed again, killed once it had
    harvested them; the source then drops one of them again. The rerun reports both returned
    (and the one dropped vanished), as it does when the killed attempt also found records
    vanished. Before, the killed attempt saved what it brought back on its run only when
    something vanished: the rerun said `returned: []`."""
    records = RECORDS[:30]
    with _harvested_source(shared_source, tmp_path, "home", returned=2) as (endpoint, home):
        back = [r for r in records if not r.deleted][:2]
        reconcile = ["reconcile", HARVESTER, "--json"]
        _harvest(home, reconcile, crash)
        endpoint.remove(back[0].identifier)  # brought back, then dropped again
        rerun = crash_sweep._cli(home, "none", reconcile)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    report = json.loads(rerun.stdout)
    assert report["run_id"] == 2
    assert report["returned"] == sorted(r.identifier for r in back)
    assert report["returned_actions"] == {"already_written": len(back)}
    assert report["vanished"] == [back[0].identifier]
    assert report["actions"] == {"delete": 1}
    target = {row[0]: row[1] for row in crash_sweep.snapshot(home)["target"]}
    assert (target[back[0].identifier], target[back[1].identifier]) == ("tombstone", "live")
