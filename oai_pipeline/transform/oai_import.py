"""`oai-import`: the first transformer of a harvester, from an OAI <record> to record data."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from lxml import etree
from pydantic import AfterValidator, BaseModel, ConfigDict, StringConstraints, ValidationError

from oai_pipeline.harvesters.model import check_slug
from oai_pipeline.oai.pages import is_deleted_status
from oai_pipeline.transform.base import Transformer, TransformItem
from oai_pipeline.transform.dates import normalize_date
from oai_pipeline.transform.failure import (
    MALFORMED_XML,
    MISSING_METADATA,
    UNKNOWN_ROOT,
    VALIDATION,
    TransformFailure,
    missing_field,
    shown,
)
from oai_pipeline.transform.imports import find_import, supported_formats
from oai_pipeline.transform.rdm_record import RDMRecord, error_location
from oai_pipeline.xml_safety import parse_untrusted

OAI_NAMESPACE = "http://www.openarchives.org/OAI/2.0/"
_RECORD_TAG = f"{{{OAI_NAMESPACE}}}record"
_HEADER_TAG = f"{{{OAI_NAMESPACE}}}header"
_METADATA_TAG = f"{{{OAI_NAMESPACE}}}metadata"

# A bug in an import must not stop the batch: the record gets this error type instead.
IMPORT_FAILURE = "transformer_failure"
# A DOI prefix: the registrant code, `10.` and dot-separated digits.
DOI_PREFIX = r"^10\.\d+(\.\d+)*$"
# What a value checked by a pattern of the schema must be, for the error message.
_PATTERN_FORMS = {"pids.doi.identifier": "a DOI (a DOI looks like 10.1234/abc)"}


def _community_slug(value: str) -> str:
    return check_slug(value, "community slug", max_length=None)


# Refused when the harvester is registered, not as every record's missing_community.
CommunitySlug = Annotated[str, AfterValidator(_community_slug)]


class OAIImportTransformer(Transformer):
    """Chooses the import by the metadata's root element and validates the result as an
    RDMRecord; every failure is the record's error, the rest of the batch goes on."""

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid")

        model: Literal["rdm"] = "rdm"
        """The output data model; `rdm` (InvenioRDM-shaped records) is the only one."""
        set_communities: dict[str, CommunitySlug] = {}
        """setSpec -> community slug: a record in the set goes to the community."""
        doi_provider: Literal["external", "datacite"] = "external"
        """`external`: the source manages the DOI; `datacite`: the target's own DOI prefix."""
        own_doi_prefixes: list[Annotated[str, StringConstraints(pattern=DOI_PREFIX)]] | None = None
        """DOI prefixes (`10.5281`) of the source's own DOIs. Unset, the DOI an import finds
        (Dublin Core: the first in dc:identifier) is the record's persistent identifier, by
        which a user's deposit of that DOI is taken over. Set it for feeds that list other
        works' DOIs there (arXiv: the journal article's): a DOI of another prefix becomes a
        related identifier, and the record gets no DOI."""

    options: Options

    def __init__(self, options: BaseModel | None = None) -> None:
        super().__init__(options if options is not None else self.Options())

    def transform(self, items: list[TransformItem]) -> None:
        for item in items:
            if item.xml is None:
                continue
            try:
                self._transform_one(item, item.xml)
            except TransformFailure as failure:
                item.error = failure.to_record_error()

    def _transform_one(self, item: TransformItem, xml: bytes) -> None:
        try:
            root = parse_untrusted(xml)
        except (etree.XMLSyntaxError, ValueError) as error:
            raise TransformFailure(
                MALFORMED_XML, f"the record XML does not parse: {error}"
            ) from None
        metadata = _metadata_root(root)
        if metadata is None:
            return  # deleted, or no metadata: the sync stage decides, nothing to transform
        data = _import(metadata)
        _default_publication_date(data, item.datestamp)
        communities = self._communities(item.set_specs)
        if communities:
            existing = data.get("parent", {}).get("communities", {}).get("ids", [])
            ids = list(dict.fromkeys([*existing, *communities]))
            data["parent"] = {"communities": {"ids": ids}}
        if self.options.own_doi_prefixes is not None:
            _keep_own_doi(data, self.options.own_doi_prefixes)
        doi = data.get("pids", {}).get("doi")
        if isinstance(doi, dict):
            doi["provider"] = self.options.doi_provider
        record = _validate(data)
        # JSON text straight from pydantic: the bytes `json_codec.dumps` makes of
        # `model_dump(mode="json")`, in less than half the time and without building the dict
        # (decoded only if something reads `item.data`).
        item.set_data_json(record.model_dump_json(exclude_none=True))
        item.pid = record.pids.doi.identifier.lower() if record.pids.doi is not None else None
        if record.parent is not None:
            item.communities = list(
                dict.fromkeys([*item.communities, *record.parent.communities.ids])
            )

    def _communities(self, set_specs: list[str]) -> list[str]:
        mapping = self.options.set_communities
        return list(dict.fromkeys(mapping[spec] for spec in set_specs if spec in mapping))


def _default_publication_date(data: dict[str, Any], datestamp: str) -> None:
    """A record whose metadata gives no publication date at all (oai_dc without dc:date) is
    dated by the day of its OAI datestamp, when the source last changed it: the nearest date
    the source gives, so the record is not rejected. Without a datestamp it is missing."""
    metadata = data.get("metadata")
    if not isinstance(metadata, dict) or metadata.get("publication_date") is not None:
        return
    try:
        metadata["publication_date"] = normalize_date(datestamp)
    except ValueError:
        raise missing_field(
            "metadata.publication_date", "publication date, nor an OAI datestamp"
        ) from None


def _keep_own_doi(data: dict[str, Any], prefixes: list[str]) -> None:
    """The record's DOI is the first one of an own prefix; the DOI the import chose, if of
    another prefix, is another version's: related as `isversionof`. The source gave it as an
    identifier of this very work (arXiv: the journal article of the preprint), so the record
    is a version of what it names. (`ispublishedin` would say the DOI is a container, a
    journal or proceedings, which it is not; `other` is no relation type of the target.)"""
    pids = data.get("pids")
    metadata = data.get("metadata")
    if not isinstance(pids, dict) or not isinstance(metadata, dict):
        return  # the validation names what is wrong
    chosen = pids.pop("doi", None)
    if isinstance(chosen, dict) and _prefix(chosen.get("identifier")) in prefixes:
        pids["doi"] = chosen
        return
    identifiers = list(metadata.get("identifiers") or [])
    for entry in identifiers:
        if isinstance(entry, dict) and _prefix(entry.get("identifier")) in prefixes:
            pids["doi"] = {"identifier": entry["identifier"], "provider": "external"}
            identifiers.remove(entry)
            metadata["identifiers"] = identifiers
            break
    if isinstance(chosen, dict):
        related = list(metadata.get("related_identifiers") or [])
        doi = chosen.get("identifier")
        if not any(isinstance(r, dict) and r.get("identifier") == doi for r in related):
            related.append(
                {"identifier": doi, "scheme": "doi", "relation_type": {"id": "isversionof"}}
            )
        metadata["related_identifiers"] = related


def _prefix(doi: object) -> str | None:
    return doi.partition("/")[0] if isinstance(doi, str) else None


def _metadata_root(root: etree._Element) -> etree._Element | None:
    """The element inside <metadata>; a bare metadata document (no OAI <record>) is itself.

    A <metadata> that holds no element (only a comment or text) is the record's error, with
    its location, as an empty <metadata/> is for the page reader."""
    if root.tag != _RECORD_TAG:
        return root
    if is_deleted_status(_header_status(root)):
        return None
    # The XPath `o:metadata/*`: the first element (not comment) inside any <metadata>. The
    # children's tags compared here (a comment's is a function): a tag matcher of lxml's
    # `iterchildren` costs more to set up than the few children of a record take.
    found = False
    for metadata in root:
        if metadata.tag != _METADATA_TAG:
            continue
        found = True
        for element in metadata:
            if isinstance(element.tag, str):
                return element
    if found:
        raise TransformFailure(
            MISSING_METADATA,
            "record is not deleted but its <metadata> holds no metadata element "
            "(only a comment or text)",
            "metadata",
        )
    return None


def _header_status(root: etree._Element) -> str:
    """The XPath `string(o:header/@status)`: the first status attribute of the headers, or ''."""
    for header in root:
        if header.tag == _HEADER_TAG and (status := header.get("status")) is not None:
            return status
    return ""


def _import(metadata: etree._Element) -> dict[str, Any]:
    function = find_import(metadata)
    if function is None:
        name = etree.QName(metadata)
        raise TransformFailure(
            UNKNOWN_ROOT,
            f"no import for the metadata root {{{name.namespace or ''}}}{name.localname}; "
            f"the supported metadata formats are {', '.join(supported_formats())}: harvest "
            "with the metadata prefix of one of them",
            "metadata",
        )
    try:
        return function(metadata)
    except TransformFailure:
        raise
    except Exception as error:  # a bug in one import must not lose the batch
        raise TransformFailure(
            IMPORT_FAILURE, f"{type(error).__name__} in {function.__name__}: {error}", "metadata"
        ) from error


def _validate(data: dict[str, Any]) -> RDMRecord:
    try:
        return RDMRecord.model_validate(data)
    except ValidationError as error:
        problems = error.errors()
        first = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        location = error_location(first["loc"])
        if first["type"] == "string_pattern_mismatch":
            # the value an operator can look for, not the regex it failed
            what = _PATTERN_FORMS.get(location, "of the form this field needs")
            message = f"{shown(first['input'])} is not {what}"
        else:
            message = first["msg"].removeprefix("Value error, ")  # the prefix says nothing
        raise TransformFailure(VALIDATION, f"{location}: {message}{more}", location) from None
