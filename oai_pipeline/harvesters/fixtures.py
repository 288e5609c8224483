"""The fixture file `oai_harvesters.yaml`: harvesters as operators write them, dashed keys.

    - id: zenodo-cesnet
      name: Zenodo, CESNET community
      base-url: https://zenodo.org/oai2d
      metadata-prefix: oai_datacite
      setspec: user-cesnet
      model: rdm
      community: cesnet
      harvest-manager: [oai@example.org]

Loading validates every entry before it stores any, and loading the same file twice leaves
the same state. The file is a list of entries, or a mapping with a `harvesters` list.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, StrictInt, ValidationError, model_validator

from oai_pipeline.errors import ConfigurationError
from oai_pipeline.harvesters.model import Harvester, describe_validation_error
from oai_pipeline.harvesters.registry import HarvesterRegistry, UpsertResult
from oai_pipeline.oai.base_url import pasted_arguments_note

logger = logging.getLogger(__name__)


class _UniqueKeyLoader(yaml.SafeLoader):
    """safe_load that refuses a key given twice in one mapping: PyYAML keeps the last one
    silently, so a copy-pasted `base-url` would quietly replace the first."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base` may be overridden
                continue
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, Hashable):  # the base class reports unhashable keys
                continue
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key {key!r}",
                    key_node.start_mark,
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _dashed(name: str) -> str:
    return name.replace("_", "-")


class FixtureEntry(BaseModel):
    """One harvester of the fixture file; singular and plural keys both accepted."""

    model_config = ConfigDict(extra="forbid", alias_generator=_dashed, populate_by_name=True)

    id: str
    name: str = ""
    comment: str = ""
    base_url: str
    metadata_prefix: str
    setspec: str | None = None
    loader: str | None = None
    transformer: str | list[str] | None = None
    transformers: list[str] | None = None
    writer: str | list[str] | None = None
    writers: list[str] | None = None
    harvest_manager: str | list[str] | None = None
    harvest_managers: list[str] | None = None
    model: str | None = None
    community: str | None = None
    # Strict: YAML `true` is not the number 1.
    rate_limit_per_minute: StrictInt | None = None
    batch_size: StrictInt | None = None
    enabled: bool | None = None

    @model_validator(mode="after")
    def _not_both(self) -> FixtureEntry:
        for singular in ("transformer", "writer", "harvest_manager"):
            if getattr(self, singular) is not None and getattr(self, singular + "s") is not None:
                raise ValueError(f"give {_dashed(singular)} or {_dashed(singular)}s, not both")
        return self

    def to_harvester(self) -> Harvester:
        data: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "comment": self.comment,
            "base_url": self.base_url,
            "metadata_prefix": self.metadata_prefix,
            "setspec": self.setspec,
        }
        for field in ("transformer", "writer", "harvest_manager"):
            value = getattr(self, field + "s")
            if value is None:
                value = getattr(self, field)
            if value is not None:
                data[field + "s"] = [value] if isinstance(value, str) else list(value)
        for field in ("loader", "rate_limit_per_minute", "batch_size", "enabled"):
            if getattr(self, field) is not None:
                data[field] = getattr(self, field)
        return Harvester.from_input(data, model=self.model, community=self.community)


class FixtureFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    harvesters: list[FixtureEntry]


def read_fixture_file(path: Path, *, given_urls: dict[str, str] | None = None) -> list[Harvester]:
    """Parse and validate the whole file; the first problem is a ConfigurationError.
    `given_urls`, if given, is filled with each harvester's base URL as the file writes it
    (a harvester's may leave OAI-PMH arguments out: pasted_arguments_note)."""
    try:
        content = yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)
    except OSError as error:
        raise ConfigurationError(f"cannot read {path}: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        raise ConfigurationError(
            f"{path} is not UTF-8 text (byte {error.start}: {error.reason})"
        ) from None
    except yaml.YAMLError as error:
        raise ConfigurationError(f"{path} is not valid YAML: {error}".replace("\n", " ")) from None
    except RecursionError:
        raise ConfigurationError(f"{path} nests too deeply to be a harvester list") from None
    if content is None:
        return []
    if isinstance(content, list):
        content = {"harvesters": content}
    elif not isinstance(content, dict) or "harvesters" not in content:
        # pydantic said `harvesters: Field required; id: Extra inputs are not permitted; …`
        # of a single harvester written without its dash: not what to change.
        if isinstance(content, dict) and "id" in content:
            found = "a single harvester's keys: put `- ` before its first key"
        elif isinstance(content, dict):
            found = "a mapping without `harvesters`"
        else:
            found = f"a YAML {type(content).__name__} ({content!r:.40})"
        raise ConfigurationError(
            f"{path}: a fixture file is a list of harvesters, each entry starting with `- ` "
            f"(or a mapping with a `harvesters` list), not {found}"
        )
    try:
        entries = FixtureFile.model_validate(content).harvesters
    except ValidationError as error:
        raise ConfigurationError(f"{path}: {describe_validation_error(error)}") from None
    harvesters: list[Harvester] = []
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        try:
            harvester = entry.to_harvester()
        except ValidationError as error:
            problem = describe_validation_error(error)
            raise ConfigurationError(
                f"{path}: harvester {entry.id!r} (entry {index}): {problem}"
            ) from None
        if harvester.id in seen:
            raise ConfigurationError(f"{path}: harvester {harvester.id!r} is listed twice")
        seen.add(harvester.id)
        harvesters.append(harvester)
        if given_urls is not None:
            given_urls[harvester.id] = entry.base_url
    return harvesters


def load_fixture_file(
    path: Path,
    registry: HarvesterRegistry,
    queued_runs: Callable[[str], list[str]] | None = None,
) -> list[tuple[str, UpsertResult]]:
    """Create or update every harvester of the file: all of them, or none if one is wrong.
    A base URL registered without the OAI-PMH arguments the file gives it is logged, as is
    what a change means for the next runs (`change_warnings`; `queued_runs`: see
    `HarvesterRegistry.upsert_many`)."""
    given_urls: dict[str, str] = {}
    harvesters = read_fixture_file(Path(path), given_urls=given_urls)
    for harvester_id, given in given_urls.items():
        if note := pasted_arguments_note(given):
            logger.warning("%s: harvester %s: %s", path, harvester_id, note)
    changes: dict[str, list[str]] = {}
    results = registry.upsert_many(harvesters, warnings=changes, queued_runs=queued_runs)
    for harvester_id, warnings in changes.items():
        for warning in warnings:
            logger.warning("%s: harvester %s: %s", path, harvester_id, warning)
    return results
