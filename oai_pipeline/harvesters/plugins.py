"""Plug-in readers, transformers, writers and models, found through Python entry points.

A harvester names its plug-ins as `name` or `name{json5 options}` (unquoted keys allowed),
e.g. `oai-service{model:"rdm", community:"cesnet"}`. A user package adds a plug-in by
declaring an entry point in the group `oai_pipeline.<group>`; the built-ins register the
same way, so nothing here knows the concrete classes.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import sys
from importlib.metadata import EntryPoint, PackageNotFoundError, entry_points, version
from typing import TYPE_CHECKING, Any, Literal

import json5
from pydantic import BaseModel, ValidationError

from oai_pipeline.errors import ConfigurationError
from oai_pipeline.transform.base import OUTPUT_REVISION

if TYPE_CHECKING:
    from collections.abc import Mapping

    from oai_pipeline.harvesters.model import Harvester
    from oai_pipeline.settings import Settings
    from oai_pipeline.targets.base import Writer
    from oai_pipeline.transform.base import Transformer

PluginGroup = Literal["readers", "transformers", "writers", "models"]

# How an error message names one plug-in of a group.
_SINGULAR = {
    "readers": "reader",
    "transformers": "transformer",
    "writers": "writer",
    "models": "model",
}

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")


class PluginSpec(BaseModel):
    """A parsed `name{options}`: which plug-in, and the options it is given."""

    name: str
    options: dict[str, Any] = {}

    def render(self) -> str:
        """Back to the `name{options}` text (options as JSON, which is valid JSON5)."""
        if not self.options:
            return self.name
        return f"{self.name}{json.dumps(self.options, ensure_ascii=False, sort_keys=True)}"


class ModelSpec(BaseModel):
    """A target data model: the transformer and writer that `--model` fills in."""

    name: str
    transformer: str
    writer: str


RDM_MODEL = ModelSpec(
    name="rdm",
    transformer='oai-import{model:"rdm"}',
    writer='oai-service{model:"rdm"}',
)

# Models shipped with the project; an entry point of the same name overrides nothing.
_BUILTIN_MODELS = {RDM_MODEL.name: RDM_MODEL}


def parse_spec(text: str) -> PluginSpec:
    """Parse `name` or `name{json5 options}`; a malformed spec is a ConfigurationError."""
    name, options = _parsed_spec(text.strip())
    return PluginSpec(name=name, options=json.loads(options))


@functools.cache
def _parsed_spec(text: str) -> tuple[str, str]:
    """The name and the options as JSON text. Cached: json5 is a slow parser and every
    harvester loaded from the state store parses its specs again (a copy each call keeps a
    caller's changes to the options its own)."""
    brace = text.find("{")
    name = text if brace < 0 else text[:brace].strip()
    if not name or not _NAME.match(name):
        raise ConfigurationError(
            f"{text!r} is not a plug-in spec: expected name or name{{options}}"
        )
    if brace < 0:
        return name, "{}"
    try:
        options = json5.loads(text[brace:])
    except (ValueError, RecursionError) as error:  # RecursionError: nested too deeply
        raise ConfigurationError(f"options of {name!r} do not parse as JSON5: {error}") from None
    if not isinstance(options, dict):
        raise ConfigurationError(f"options of {name!r} must be an object {{key: value}}")
    return name, json.dumps(options)


def available(group: PluginGroup) -> dict[str, EntryPoint]:
    """The plug-ins installed for a group, by name (entry points `oai_pipeline.<group>`)."""
    return dict(_entry_points(f"oai_pipeline.{group}", _installed()))


def _installed() -> tuple[tuple[str, int], ...]:
    """What decides which distributions Python finds: the import path, and when each of its
    folders last changed (installing, upgrading or removing a package adds or removes a
    `*.dist-info` folder there). Reading every distribution's metadata takes ~15 ms, and a
    harvest looks its plug-ins up dozens of times."""
    key = []
    for entry in sys.path:
        try:
            key.append((entry, os.stat(entry or ".").st_mtime_ns))
        except OSError:
            key.append((entry, -1))
    return tuple(key)


@functools.lru_cache(maxsize=32)
def _entry_points(group: str, installed: tuple[tuple[str, int], ...]) -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=group)}


@functools.lru_cache(maxsize=64)
def _provider(
    entry_point: EntryPoint, installed: tuple[tuple[str, int], ...]
) -> tuple[str | None, str | None]:
    """The name and version of the distribution that declares an entry point: each read of
    either parses the distribution's METADATA file anew."""
    dist = entry_point.dist
    return (dist.name, dist.version) if dist is not None else (None, None)


def _known_names(group: PluginGroup) -> list[str]:
    names = set(available(group))
    if group == "models":
        names |= set(_BUILTIN_MODELS)
    return sorted(names)


def _unknown(group: PluginGroup, name: str) -> ConfigurationError:
    known = ", ".join(_known_names(group)) or "none installed"
    return ConfigurationError(f"unknown {_SINGULAR[group]} {name!r} (known {group}: {known})")


def load_plugin_class(group: PluginGroup, name: str) -> type:
    """The class registered as `name` in `group`; unknown or broken -> ConfigurationError."""
    entry_point = available(group).get(name)
    if entry_point is None:
        raise _unknown(group, name)
    try:
        loaded = entry_point.load()
    except Exception as error:  # an installed but broken plug-in is a configuration problem
        raise ConfigurationError(
            f"{_SINGULAR[group]} {name!r} cannot be loaded from {entry_point.value}: {error}"
        ) from None
    if not isinstance(loaded, type):
        raise ConfigurationError(
            f"{_SINGULAR[group]} {name!r} ({entry_point.value}) is not a class"
        )
    return loaded


def load_model(name: str) -> ModelSpec:
    """A target model by name: the built-in `rdm`, or one a user package declares."""
    if name in _BUILTIN_MODELS:
        return _BUILTIN_MODELS[name]
    entry_point = available("models").get(name)
    if entry_point is None:
        raise _unknown("models", name)
    try:
        loaded = entry_point.load()
    except Exception as error:
        raise ConfigurationError(
            f"model {name!r} cannot be loaded from {entry_point.value}: {error}"
        ) from None
    try:
        return ModelSpec.model_validate(loaded, from_attributes=True)
    except ValidationError:
        raise ConfigurationError(
            f"model {name!r} ({entry_point.value}) is not a ModelSpec"
        ) from None


def _options_of(group: PluginGroup, spec: PluginSpec, plugin: type) -> BaseModel:
    """The plug-in's own `Options` model applied to the spec's options."""
    options_model: type[BaseModel] | None = getattr(plugin, "Options", None)
    if options_model is None:
        raise ConfigurationError(f"{_SINGULAR[group]} {spec.name!r} declares no Options model")
    try:
        return options_model.model_validate(spec.options)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in item['loc']) or 'options'}: {item['msg']}"
            for item in error.errors()
        )
        raise ConfigurationError(
            f"{_SINGULAR[group]} {spec.name!r} rejects its options: {problems}"
        ) from None


def validate_spec(group: PluginGroup, text: str) -> PluginSpec:
    """Parse a spec and check its options against the plug-in's `Options` model."""
    spec = parse_spec(text)
    _options_of(group, spec, load_plugin_class(group, spec.name))
    return spec


def _instantiate(group: PluginGroup, text: str, *args: Any) -> Any:
    spec = parse_spec(text)
    plugin = load_plugin_class(group, spec.name)
    return plugin(_options_of(group, spec, plugin), *args)


def build_reader(harvester: Harvester) -> Any:
    """The harvester's loader: `Reader(options, harvester)`."""
    return _instantiate("readers", harvester.loader, harvester)


def build_transformers(harvester: Harvester) -> list[Transformer]:
    """The harvester's transformer chain, in order: `Transformer(options)` each."""
    return [_instantiate("transformers", text) for text in harvester.transformers]


def transform_fingerprint(harvester: Harvester) -> str:
    """What a record's transform depends on besides the record: the format it is harvested
    in (its metadata prefix: a record's datestamp stays when the harvester asks for another
    format, so the old format's transform was kept and written as unchanged), the chain, its
    options, the versions of the packages that provide it and the revision of the shipped
    transformers' output. The same fingerprint and an unchanged datestamp mean the stored
    transform is what the chain would make again."""
    installed = _installed()
    chain: list[Any] = [
        ["oai-pipeline", _version("oai-pipeline", installed), OUTPUT_REVISION],
        ["metadata_prefix", harvester.metadata_prefix],
    ]
    for text in harvester.transformers:
        spec = parse_spec(text)
        entry_point = available("transformers").get(spec.name)
        dist_name, dist_version = (
            _provider(entry_point, installed) if entry_point is not None else (None, None)
        )
        chain.append([spec.name, spec.options, dist_name, dist_version])
    encoded = json.dumps(chain, sort_keys=True, default=str).encode()
    # 64 bits tell chains apart well enough, and keep the index of what was written small.
    return hashlib.sha256(encoded).hexdigest()[:16]


def written_fingerprint(transform: str, writer: Writer) -> str:
    """What a record a writer wrote depends on besides the record: the `transform`
    fingerprint and the writer's options that change what it writes (a `community`). A
    writer given one re-plans the records it wrote, and only its own. Without such options
    it is the transform's, as what every writer remembered before they counted."""
    options = writer.options.content_options()
    if not options:
        return transform
    encoded = json.dumps([transform, options], sort_keys=True, default=str).encode()
    return hashlib.sha256(encoded).hexdigest()[:16]


def rewritten_fingerprints(transforms: Mapping[str, str | None], writer: Writer) -> dict[str, str]:
    """What `writer` remembers writing when it writes stored transforms again (an undo of a
    local change, a take-over): each record's `written_fingerprint` of the chain that made
    its data (`transforms`: that chain's fingerprint by identifier), not of today's chain.
    A record of no known chain is left out: what the writer remembered before stays."""
    return {i: written_fingerprint(t, writer) for i, t in transforms.items() if t is not None}


def written_options(harvester: Harvester) -> dict[str, Any]:
    """Each writer's options that change what it writes (`content_options`, as its written
    fingerprint holds them), by writer name. A plug-in not installed: its spec's options."""
    found: dict[str, Any] = {}
    for text in harvester.writers:
        spec = parse_spec(text)
        try:
            options = _options_of("writers", spec, load_plugin_class("writers", spec.name))
            found[spec.name] = options.content_options()  # type: ignore[attr-defined]
        except (ConfigurationError, AttributeError):
            found[spec.name] = spec.options
    return found


@functools.lru_cache(maxsize=8)
def _version(name: str, installed: tuple[tuple[str, int], ...]) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def build_writers(harvester: Harvester, settings: Settings) -> list[Writer]:
    """The harvester's writers: `Writer(options, settings)` each."""
    return [_instantiate("writers", text, settings) for text in harvester.writers]


def missing_communities(harvester: Harvester, settings: Settings) -> list[str]:
    """The communities the harvester's configuration names (a writer's `community`, a
    transformer's `set_communities`) that a writer's target does not have: each record sent
    to one fails with `missing_community`, so the operator hears it when registering."""
    named_by_transformers = [
        slug
        for text in harvester.transformers
        if isinstance(sets := parse_spec(text).options.get("set_communities"), dict)
        for slug in sets.values()
        if isinstance(slug, str)
    ]
    missing: list[str] = []
    writers = build_writers(harvester, settings)
    try:
        for writer in writers:
            own = [writer.options.community] if writer.options.community else []
            wanted = list(dict.fromkeys([*own, *named_by_transformers]))
            if wanted:
                missing += [c for c in writer.missing_communities(wanted) if c not in missing]
    finally:
        for writer in writers:
            writer.close()
    return missing


def release_target_records(harvester: Harvester, settings: Settings) -> int:
    """Each writer's target lets go of the harvester's records (it is being deleted with
    its harvest records); returns how many records were released."""
    writers = build_writers(harvester, settings)
    try:
        return sum(writer.release(harvester.id) for writer in writers)
    finally:
        for writer in writers:
            writer.close()


def writers_update_all(harvester: Harvester) -> bool:
    """Whether a writer of the harvester rewrites every record (`update_all: true`)."""
    return any(parse_spec(text).options.get("update_all") is True for text in harvester.writers)


def with_option(text: str, key: str, value: Any) -> str:
    """The spec with one option set (e.g. the writer's `community`), re-rendered."""
    spec = parse_spec(text)
    return PluginSpec(name=spec.name, options={**spec.options, key: value}).render()
