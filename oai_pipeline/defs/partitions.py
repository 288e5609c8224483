"""harvester (dynamic, follows the registry) × window (time windows, daily by default)."""

from __future__ import annotations

import hashlib
import os
import re
from collections import defaultdict
from collections.abc import Callable, Mapping
from datetime import UTC, datetime

import dagster as dg

from oai_pipeline.errors import ConfigurationError
from oai_pipeline.pipeline.scope import HarvestScope, Window
from oai_pipeline.state.harvester_lock import source_key

HARVESTER = "harvester"
WINDOW = "window"

DEFAULT_WINDOW_START = "2024-01-01"
_WINDOW_KINDS = {
    "daily": dg.DailyPartitionsDefinition,
    "weekly": dg.WeeklyPartitionsDefinition,
    "monthly": dg.MonthlyPartitionsDefinition,
}

# The tags of a single-run range (what Dagster puts on a range backfill's run).
RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"
# The harvester of a run launched by a schedule or the CLI: one run per harvester at a time
# (dagster.yaml's tag limit).
HARVESTER_TAG = "oai_pipeline/harvester"
# The source's server (`source_key`): runs of harvesters of one server queue one after the
# other (dagster.yaml), instead of waiting in a pool slot for the server's lease.
SOURCE_TAG = "oai_pipeline/source"
# What asked for a run (incremental, full, reconcile, prune_run_history, automation, cli,
# demo): the Runs page filters by it.
TRIGGER_TAG = "oai_pipeline/trigger"


def source_tag(base_url: str) -> str:
    """The SOURCE_TAG value of a harvester harvesting `base_url`."""
    return source_key(base_url).removeprefix("source:")


# What Dagster tags a run of one partition key with (launched in the UI): the key, and each
# of its parts, split by position.
PARTITION_TAG = "dagster/partition"
PARTITION_HARVESTER_TAG = f"{PARTITION_TAG}/{HARVESTER}"
PARTITION_WINDOW_TAG = f"{PARTITION_TAG}/{WINDOW}"
# Between a key's harvester and window (Dagster's multi-partition key delimiter).
KEY_DELIMITER = "|"

# How a tag names several harvesters (or servers) of one run: harvester ids and host names
# never hold it, so such a value is never taken for one harvester.
SEVERAL = "+"
_MAX_SEVERAL_LENGTH = 200


# A run holds the limit of each harvester (and server) it harvests under a tag key of its
# own, `oai_pipeline/harvester.<id>`: a tag holds one value, so a run over several
# harvesters cannot name each of them under HARVESTER_TAG (see run_coordinator.py).
ONE_VALUE_SEPARATOR = "."


# Dagster's tag keys: each `/` section at most 63 of these characters (else deprecated).
_TAG_KEY_SECTION = re.compile(r"[A-Za-z0-9_.-]{1,63}")


def one_value_key(tag_key: str, value: str) -> str:
    """The tag key of one harvester (or server) of a run: `tag_key`'s limit per value holds
    for every run naming `value` this way, alone or with others. A value Dagster would not
    take in a key (`host:8080`, a long id) is named by its tidied start and a digest."""
    key = f"{tag_key}{ONE_VALUE_SEPARATOR}{value}"
    if _TAG_KEY_SECTION.fullmatch(key.rpartition("/")[2]):
        return key
    digest = hashlib.sha256(value.encode()).hexdigest()[:12]
    tidied = re.sub(r"[^A-Za-z0-9_.-]", "_", value)[:32]
    return f"{tag_key}{ONE_VALUE_SEPARATOR}{tidied}-{digest}"


def several_tag(values: set[str]) -> str:
    """The one tag value of a run over several harvesters (or servers): the same for every
    run over the same ones, so that the tag limit queues those runs one after the other.
    A long list is shortened to its ends, its count and a digest of the whole."""
    names = sorted(values)
    joined = SEVERAL.join(names)
    if len(joined) <= _MAX_SEVERAL_LENGTH:
        return joined
    digest = hashlib.sha1(joined.encode()).hexdigest()[:10]
    return SEVERAL.join((names[0], f"{len(names) - 2}-more", names[-1], digest))


def build_window_partitions(
    granularity: str | None = None, start_date: str | None = None
) -> dg.TimeWindowPartitionsDefinition:
    granularity = granularity or os.environ.get("OAI_PIPELINE_WINDOW_GRANULARITY", "daily")
    start_date = start_date or os.environ.get("OAI_PIPELINE_WINDOW_START", DEFAULT_WINDOW_START)
    if granularity not in _WINDOW_KINDS:
        raise ConfigurationError(
            f"OAI_PIPELINE_WINDOW_GRANULARITY must be one of {', '.join(_WINDOW_KINDS)}, "
            f"not {granularity!r}"
        )
    try:
        start = datetime.strptime(start_date, "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError as error:
        raise ConfigurationError(
            f"OAI_PIPELINE_WINDOW_START must be YYYY-MM-DD, not {start_date!r}"
        ) from error
    if start > datetime.now(UTC):  # the grid ends with today's window: it would have none
        raise ConfigurationError(
            f"OAI_PIPELINE_WINDOW_START {start_date} is after today: the grid would have no window"
        )
    return _WINDOW_KINDS[granularity](start_date=start_date, end_offset=1)


harvester_partitions = dg.DynamicPartitionsDefinition(name=HARVESTER)
window_partitions = build_window_partitions()
harvest_partitions = dg.MultiPartitionsDefinition(
    {HARVESTER: harvester_partitions, WINDOW: window_partitions}
)


def ensure_harvester_partitions(instance: dg.DagsterInstance, harvester_ids: list[str]) -> None:
    """Add the harvesters' partitions now, not at the registry sensor's next tick: a run
    for a harvester without its partition is stored, then never starts."""
    if not harvester_ids:
        return
    missing = sorted(set(harvester_ids) - set(instance.get_dynamic_partitions(HARVESTER)))
    if missing:
        instance.add_dynamic_partitions(HARVESTER, missing)


def partition_key(harvester_id: str, window_key: str) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({HARVESTER: harvester_id, WINDOW: window_key})


def harvesters_of(tags: Mapping[str, str], registered: Callable[[], list[str]]) -> set[str]:
    """The harvesters a run harvests, from its tags: the CLI's and the schedules' name it;
    a run launched in the UI names its partitions only, one key or a range (a 2-D range spans
    the `registered` harvesters between its corners, in the order Dagster keeps them: the
    order they were added, not by name; its harvester tag names them all, `several_tag`).
    Empty for a run of anything else, or of a key that is not harvester|window."""
    if HARVESTER_TAG in tags and SEVERAL not in tags[HARVESTER_TAG]:
        return {tags[HARVESTER_TAG]}
    if key := tags.get(PARTITION_TAG):  # Dagster's dimension tags read it by position
        return {_harvester_of_key(key)} - {None}
    if PARTITION_HARVESTER_TAG in tags:
        window_key = tags.get(PARTITION_WINDOW_TAG)
        return (
            {tags[PARTITION_HARVESTER_TAG]}
            if window_key is None or is_window_key(window_key)
            else set()
        )
    start, end = tags.get(RANGE_START_TAG), tags.get(RANGE_END_TAG)
    if not (start and end):
        return set()
    first, last = _harvester_of_key(start), _harvester_of_key(end)
    if first is None or last is None:
        return set()
    keys = list(registered())
    if first in keys and last in keys and keys.index(first) <= keys.index(last):
        return set(keys[keys.index(first) : keys.index(last) + 1])
    return {first, last}  # a corner no longer registered: what lay between is unknown


def unread_keys(tags: Mapping[str, str]) -> list[str]:
    """The run's two-part partition keys (one key, a range's corners) that are not
    harvester|window, such as one typed window first."""
    keys = [tags.get(PARTITION_TAG), tags.get(RANGE_START_TAG), tags.get(RANGE_END_TAG)]
    return [
        key for key in keys if key and key.count(KEY_DELIMITER) == 1 and not _harvester_of_key(key)
    ]


def is_window_key(key: str) -> bool:
    """Whether `key` is written as a window of the grid (its date format): the window of a
    key typed the other way round is a harvester id."""
    try:
        datetime.strptime(key, window_partitions.fmt)
    except ValueError:
        return False
    return True


def _harvester_of_key(key: str) -> str | None:
    """The harvester of a harvester|window key: the partitions definition splits a key by
    position, so its window part must read as a window."""
    try:
        harvester_id, window_key = split_key(key)
    except Exception:  # noqa: BLE001 - a key of another partitions definition: not a harvest
        return None
    return harvester_id if is_window_key(window_key) else None


def split_key(key: str) -> tuple[str, str]:
    """(harvester, window) of a partition key, which may come as a plain string."""
    dims = harvest_partitions.get_partition_key_from_str(str(key)).keys_by_dimension
    return dims[HARVESTER], dims[WINDOW]


def scopes_for_keys(
    keys: list[str],
    windows: dg.TimeWindowPartitionsDefinition = window_partitions,
) -> list[HarvestScope]:
    """One scope per harvester and contiguous run of windows: one ListRecords sweep each.

    The first window of the grid is open to the past, so a full harvest also gets records
    older than the grid's start date.
    """
    first_key = windows.get_first_partition_key()
    by_harvester: dict[str, set[str]] = defaultdict(set)
    for key in keys:
        harvester_id, window_key = split_key(key)
        by_harvester[harvester_id].add(window_key)
    scopes = []
    for harvester_id, window_keys in sorted(by_harvester.items()):
        run: list[Window] = []
        for window_key in sorted(window_keys):
            span = windows.time_window_for_partition_key(window_key)
            start = None if window_key == first_key else span.start
            window = Window(window_key, start, span.end)
            if run and run[-1].end != span.start:
                scopes.append(HarvestScope(harvester_id, tuple(run)))
                run = []
            run.append(window)
        scopes.append(HarvestScope(harvester_id, tuple(run)))
    return scopes
