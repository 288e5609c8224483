"""Time a harvest that creates, one that changes and one that deletes N records, each timed
apart, into a writer with a community (its parent too), as operators register them, or into
the writer `--writer` names (`--join`: the harvester's writers are given the community
`sub` before the harvest that changes the records, so every record joins it then; `--review`:
a reviewer publishes every harvested draft before it, so each gets the harvest's edit draft;
`--reindex`: the "changed" records come with new datestamps only, their data as before;
`--restore`: a fourth harvest, of every deleted record listed live again, changed;
`--reidentify`: after the first harvest, the source deletes every record and lists it under a
new identifier with the same DOI, which takes its tombstone over;
`--edited`: before the update, a user leaves an edit draft on every record, which the update's
harvest drops;
`--purged`: before the update, a user hard deletes every record, which the update revives;
`--released`: before the update, the target's records are released, as when their harvester is
deleted, so that the update's harvest (the harvester created again) takes each over;
`--new-dois`: the records have no DOI at first, the update gives each one (a source that
began to register DOIs);
`--migrate`: each record has a DOI, which a user deposited in the target before the first
harvest, so that harvest takes every deposit over).

    .venv/bin/python benchmarks/write_batches.py --records 5000
    .venv/bin/python benchmarks/write_batches.py --records 5000 --postgres --network-ms 0.5
    .venv/bin/python benchmarks/write_batches.py --writer 'oai-service{publish:false}'
    .venv/bin/python benchmarks/write_batches.py --writer 'oai-service{}' --join
    .venv/bin/python benchmarks/write_batches.py --writer 'oai-service{}' --join --reindex
    .venv/bin/python benchmarks/write_batches.py --writer 'oai-service{}' --migrate
    .venv/bin/python benchmarks/write_batches.py --restore
    .venv/bin/python benchmarks/write_batches.py --reidentify
    .venv/bin/python benchmarks/write_batches.py --new-dois
    .venv/bin/python benchmarks/write_batches.py --writer 'oai-service{}' --released
    .venv/bin/python benchmarks/write_batches.py --writer 'oai-service{}' --edited
    .venv/bin/python benchmarks/write_batches.py --writer 'oai-service{}' --purged
    .venv/bin/python benchmarks/write_batches.py --writer 'oai-service{publish:false}' --review

The source is the tests' in-process fake (pages of 500 oai_dc records), so the figures are
the pipeline's and its stores'. `--postgres` puts the state store and the target on a
throwaway PostgreSQL server reached through a proxy that counts round trips and adds
`--network-ms` to each, as a server across a network would.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pytest  # noqa: E402

from oai_pipeline.harvesters.model import Harvester  # noqa: E402
from oai_pipeline.harvesters.registry import HarvesterRegistry  # noqa: E402
from oai_pipeline.pipeline.options import RunOptions  # noqa: E402
from oai_pipeline.pipeline.runner import run_harvest  # noqa: E402
from oai_pipeline.pipeline.services import Services  # noqa: E402
from oai_pipeline.settings import load_settings  # noqa: E402
from oai_pipeline.targets.embedded.repository import EmbeddedRepository  # noqa: E402
from oai_pipeline_tests.network_proxy import NetworkProxy, postgres_behind_network  # noqa: E402
from oai_pipeline_tests.oai.fake_source import FakeSource, make_records  # noqa: E402
from oai_pipeline_tests.support import (  # noqa: E402
    BASE_URL,
    EVERYTHING,
    harvest_fake_source,
    oai_dc,
    register,
)

STEPS = ("create", "update", "delete", "restore")
PAGE_SIZE = 500


def _prepare(
    source: FakeSource, step: str, *, reindex: bool, doi: bool, new_dois: bool = False
) -> None:
    """What the source says before the step's harvest: all new, all changed (`reindex`: only
    their datestamps; `new_dois`: each given a DOI), all deleted, all live again, changed
    (`doi`: the records have DOIs)."""
    if step == "reidentify":  # the same records, with the same DOIs, under new identifiers
        for record in list(source.records):
            datestamp = record.datestamp.replace("2024-03-", "2024-04-")
            renamed = record.identifier.replace("fake.test", "renamed.test")
            source.records.append(dataclasses.replace(record, identifier=renamed))
            source.records[-1].datestamp = record.datestamp = datestamp
            record.deleted = True
        return
    for number, record in enumerate(source.records):
        if step == "update":
            if not reindex:
                revised = f"Record {number}, revised"
                record.raw_metadata = _metadata(revised, number, doi=doi or new_dois)
            record.datestamp = record.datestamp.replace("2024-03-", "2024-04-")
        elif step == "delete":
            record.deleted = True
            record.datestamp = record.datestamp.replace("2024-04-", "2024-05-")
        elif step == "restore":
            record.deleted = False
            record.raw_metadata = _metadata(f"Record {number}, again", number, doi=doi)
            record.datestamp = record.datestamp.replace("2024-05-", "2024-06-")


def _metadata(title: str, number: int, *, doi: bool) -> str:
    """A record's oai_dc (`doi`: with its DOI)."""
    if not doi:
        return oai_dc(title)
    identifier = f"<dc:identifier>https://doi.org/{_doi(number)}</dc:identifier>"
    return oai_dc(title).replace("</oai_dc:dc>", f"{identifier}</oai_dc:dc>")


def _doi(number: int) -> str:
    return f"10.5555/bench.{number}"


WRITER = 'oai-service{model:"rdm", community:"sub"}'
# The flags that change what the harvests meet (`measure`'s keywords), and what each does.
SCENARIOS = {
    "join": "the writers get community sub before the update",
    "review": "every draft is published before the update",
    "reindex": "the update changes datestamps only, not data",
    "migrate": "users deposited every record's DOI before",
    "restore": "then the source lists every record live again",
    "reidentify": "then the source lists every record under a new identifier (same DOI)",
    "new_dois": "the update gives every record a DOI",
    "released": "before the update, the records are released (their harvester deleted)",
    "edited": "a user edits every record before the update",
    "purged": "a user hard deletes every record before the update",
}


def measure(
    count: int,
    databases: dict[str, str],
    proxy: NetworkProxy | None,
    writer: str = WRITER,
    *,
    join: bool = False,
    review: bool = False,
    reindex: bool = False,
    migrate: bool = False,
    restore: bool = False,
    reidentify: bool = False,
    new_dois: bool = False,
    released: bool = False,
    edited: bool = False,
    purged: bool = False,
) -> dict:
    monkeypatch = pytest.MonkeyPatch()
    home = tempfile.mkdtemp(prefix="oai-write-batches-")
    settings = load_settings({"OAI_PIPELINE_HOME": home, **databases})
    settings.home.mkdir(parents=True, exist_ok=True)
    records = [
        dataclasses.replace(
            record, raw_metadata=_metadata(f"Record {number}", number, doi=migrate or reidentify)
        )
        for number, record in enumerate(make_records(count))
    ]
    source = harvest_fake_source(settings, monkeypatch, FakeSource(records, page_size=PAGE_SIZE))
    with EmbeddedRepository(settings.target_db_url) as repository:
        repository.create_community("top")
        repository.create_community("sub", parent="top")
        for number in range(count if migrate else 0):
            deposit = {"metadata": {"title": f"Deposit {number}"}}
            deposit["pids"] = {"doi": {"identifier": _doi(number), "provider": "external"}}
            repository.deposit(deposit, publish=True)
    register(
        settings,
        BASE_URL,
        metadata_prefix="oai_dc",
        writer=writer,
        batch_size=Harvester.model_fields["batch_size"].default,
    )
    figures = {}
    try:
        steps = ("create", "reidentify") if reidentify else STEPS if restore else STEPS[:-1]
        for step in steps:
            _prepare(source, step, reindex=reindex, doi=migrate, new_dois=new_dois)
            if join and step == "update":
                with Services(settings) as services:
                    HarvesterRegistry(services.state).update("sample", community="sub")
            if released and step == "update":  # its harvester deleted, then created again
                target = EmbeddedRepository(settings.target_db_url)
                with target, target.transaction() as transaction:
                    transaction.release("sample")
            if edited and step == "update":  # a user's edit draft on every record
                with EmbeddedRepository(settings.target_db_url) as repository:
                    for record in repository.list(harvester="sample", state="live", limit=count):
                        repository.edit(record["id"], {"metadata.title": "Edited by a user"})
            if review and step == "update":
                with EmbeddedRepository(settings.target_db_url) as repository:
                    for record in repository.list(harvester="sample", state="draft"):
                        repository.publish(record["id"])
            if purged and step == "update":  # a user's hard deletion of every record
                # (published: after a reviewer's, with --review)
                with EmbeddedRepository(settings.target_db_url) as repository:
                    for record in repository.list(harvester="sample", state="live", limit=count):
                        repository.hard_delete(record["id"])
            trips = proxy.round_trips if proxy else 0
            started = time.perf_counter()
            with Services(settings) as services:
                report = run_harvest(services, EVERYTHING, RunOptions(), progress=lambda _m: None)
            seconds = round(time.perf_counter() - started, 2)
            # one action for every record; re-identified, each old one deleted, each new restored
            alike = [count, count] if step == "reidentify" else [count]
            if list(report.actions.values()) != alike:
                raise SystemExit(
                    f"{step}: expected {count} records alike, the harvest did {report.actions}"
                )
            figures[step] = {"seconds": seconds, "actions": report.actions}
            if proxy:
                figures[step]["round_trips"] = proxy.round_trips - trips
    finally:
        monkeypatch.undo()
    return figures


def main() -> None:
    warnings.filterwarnings("ignore")
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=5_000)
    parser.add_argument("--postgres", action="store_true", help="state and target on PostgreSQL")
    parser.add_argument(
        "--network-ms", type=float, default=0.0, help="with --postgres: ms added per round trip"
    )
    parser.add_argument("--writer", default=WRITER, help=f"the writer spec (default {WRITER})")
    for name, meaning in SCENARIOS.items():
        parser.add_argument(f"--{name.replace('_', '-')}", action="store_true", help=meaning)
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        proxy, databases = None, {}
        if args.postgres:
            proxy, databases = stack.enter_context(postgres_behind_network(args.network_ms / 1000))
        where = f"postgresql +{args.network_ms} ms" if args.postgres else "sqlite"
        figures = measure(
            args.records,
            databases,
            proxy,
            args.writer,
            **{name: getattr(args, name) for name in SCENARIOS},
        )
        for step, figure in figures.items():
            trips = f", {figure['round_trips']} round trips" if "round_trips" in figure else ""
            actions = ", ".join(f"{n} {action}" for action, n in figure["actions"].items())
            seconds = f"{figure['seconds']} s{trips}"
            print(f"{where}: {step} {args.records} records: {seconds} ({actions})")


if __name__ == "__main__":
    main()
