"""Import of the OpenAIRE Guidelines for Literature Repositories v4 (`oai_openaire`, root
`oaire:resource`): the default rich format of DSpace 7/8 and of many European repositories.

A v4 record is DataCite kernel-4 elements (creators, titles, identifiers, dates, subjects,
related identifiers, sizes, geoLocations) beside Dublin Core ones (descriptions, languages,
publisher, formats) and OpenAIRE's own (the COAR resource type, licence conditions, funding
references, files, the citation of the journal or book). The DataCite and Dublin Core
elements are read by the datacite and dublin_core imports' helpers; this module reads the rest.
"""

from __future__ import annotations

from typing import Any

from lxml import etree

from oai_pipeline.oai.pages import OAI_NAMESPACE
from oai_pipeline.transform import datacite
from oai_pipeline.transform import vocabularies as vocab
from oai_pipeline.transform.dublin_core import DC, languages
from oai_pipeline.transform.failure import missing_field
from oai_pipeline.transform.normalize import citation, element_text, file_link, text_or_none

OAIRE = "http://namespace.openaire.eu/schema/oaire/"
# IRIS (Cineca's DSpace-CRIS) writes a creator's nameIdentifier and affiliation unprefixed under
# its `xmlns="http://www.openarchives.org/OAI/2.0/"`, so in the OAI-PMH namespace.
_DATACITE = datacite.KernelTags(datacite.KERNEL_4, person_parts_also_in=(OAI_NAMESPACE,))
# ... and its Handle as a `datacite:identifier` in the kernel-3 namespace.
_KERNEL_3_IDENTIFIER = datacite.KernelTags(datacite.KERNEL_3).identifier
# The guidelines moved fundingReference from DataCite's namespace to OpenAIRE's (DSpace and
# OpenEdition write `oaire:fundingReference`); its parts are named as DataCite's. Its one part
# of its own, oaire:fundingStream (the funder's programme: `Horizon 2020 Framework Programme`),
# is not read: the target has no place for it (InvenioRDM keeps an award's programme only in
# its awards vocabulary and stores a harvested award as number, title and identifiers), and
# it is no award title (a programme funds many awards) nor the funder.
_OAIRE = datacite.KernelTags(OAIRE)


def _oaire(local: str) -> str:
    return f"{{{OAIRE}}}{local}"


def _dc(local: str) -> str:
    return f"{{{DC}}}{local}"


_RESOURCE_TYPE = _oaire("resourceType")
_LICENSE_CONDITION = _oaire("licenseCondition")
_VERSION = _oaire("version")
_FILE = _oaire("file")


def _listed(children: datacite.Children, wrapper: str, item: str) -> list[etree._Element]:
    """The `wrapper/item` elements, and `item` elements given without their wrapper: real
    sources leave it out (INSPIRE writes `datacite:date` so, the guidelines' draft samples
    `datacite:creator`)."""
    return datacite.nested(children, wrapper, item) + children.get(item, [])


def _unwrapped(elements: list[etree._Element], tag: str) -> list[etree._Element]:
    """The elements, one that wraps elements of its own tag replaced by those: IRIS writes
    its creators as `datacite:creator/datacite:creator`, and the wrapper, which has no name,
    failed the record."""
    result: list[etree._Element] = []
    for element in elements:
        inner = list(element.iterchildren(tag))
        result.extend(inner or (element,))
    return result


def import_openaire(resource: etree._Element) -> dict[str, Any]:
    """An `oaire:resource` as RDMRecord-shaped data."""
    tags = _DATACITE
    children = datacite.children_by_tag(resource)
    title, additional_titles = datacite.titles(_listed(children, tags.titles, tags.title))
    creators = datacite.creatibutors(
        tags,
        _unwrapped(_listed(children, tags.creators, tags.creator), tags.creator),
        "metadata.creators",
        people=True,
    )
    if not creators:
        raise missing_field("metadata.creators", "creator (datacite:creators/datacite:creator)")
    dates = _listed(children, tags.dates, tags.date)
    pids, identifiers = _identifiers(children)
    description, additional_descriptions = datacite.descriptions(
        children.get(_dc("description"), [])
    )
    related, links = datacite.related(
        _listed(children, tags.related_identifiers, tags.related_identifier), [], tags
    )
    contributors = _listed(children, tags.contributors, tags.contributor)
    publishers = [
        text for e in children.get(_dc("publisher"), ()) if (text := text_or_none(element_text(e)))
    ]
    metadata: dict[str, Any] = {
        "resource_type": {"id": _resource_type(children)},
        "title": title,
        "additional_titles": additional_titles,
        "creators": creators,
        "contributors": datacite.creatibutors(
            tags,
            [c for c in contributors if not datacite.is_funder(c)],
            "metadata.contributors",
            contributors=True,
            people=True,
        ),
        "publication_date": datacite.publication_date(
            dates, None, 'Issued date (datacite:date dateType="Issued")'
        ),
        "description": description,
        "additional_descriptions": additional_descriptions + _citation(children),
        "subjects": datacite.subjects(_listed(children, tags.subjects, tags.subject)),
        "rights": datacite.licenses(children.get(_LICENSE_CONDITION, []), "uri"),
        "languages": languages(resource),
        "publisher": publishers[0] if publishers else None,
        "dates": datacite.other_dates(dates),
        "identifiers": identifiers,
        "related_identifiers": related,
        "sizes": datacite.line_texts(_listed(children, tags.sizes, tags.size)),
        "formats": datacite.line_texts(children.get(_dc("format"), [])),
        "version": _version(children),
        "funding": datacite.funding(
            _OAIRE, _listed(children, _OAIRE.funding_references, _OAIRE.funding_reference)
        )
        + datacite.funding(
            tags, _listed(children, tags.funding_references, tags.funding_reference)
        ),
        "locations": datacite.locations(
            tags, _listed(children, tags.geo_locations, tags.geo_location)
        ),
    }
    links = [link for e in children.get(_FILE, ()) if (link := _file(e))] + links
    return {"metadata": metadata, "pids": pids, "files": {"enabled": False, "links": links}}


def _resource_type(children: datacite.Children) -> str:
    """oaire:resourceType (mandatory) by its COAR URI, label or resourceTypeGeneral."""
    elements = children.get(_RESOURCE_TYPE)
    if not elements:
        raise missing_field("metadata.resource_type", "oaire:resourceType")
    element = elements[0]
    return vocab.coar_resource_type(
        element.get("uri"), text_or_none(element_text(element)), element.get("resourceTypeGeneral")
    )


def _identifiers(children: datacite.Children) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """datacite:identifier and the alternate identifiers. The record's DOI is its identifier
    when that is a DOI, else its first DOI alternateIdentifier: DSpace, IRIS and OpenEdition
    give the Handle or URL as the identifier and the DOI as an alternate one (IRIS the Handle
    in DataCite's kernel-3 namespace)."""
    tags = _DATACITE
    pids, identifiers = datacite.record_identifiers(
        children.get(tags.identifier, []) + children.get(_KERNEL_3_IDENTIFIER, []),
        _listed(children, tags.alternate_identifiers, tags.alternate_identifier),
    )
    if "doi" not in pids:
        doi = next((entry for entry in identifiers if entry["scheme"] == "doi"), None)
        if doi is not None:
            pids["doi"] = {"identifier": doi["identifier"], "provider": "external"}
            identifiers = [entry for entry in identifiers if entry is not doi]
    return pids, identifiers


def _citation(children: datacite.Children) -> list[dict[str, Any]]:
    """The journal, book or conference the work appeared in (oaire:citation*)."""

    def text(local: str) -> str | None:
        elements = children.get(_oaire(local))
        return text_or_none(element_text(elements[0])) if elements else None

    described = citation(
        text("citationTitle"),
        text("citationVolume"),
        text("citationIssue"),
        text("citationStartPage"),
        text("citationEndPage"),
        text("citationEdition"),
        text("citationConferencePlace"),
        text("citationConferenceDate"),
    )
    return [described] if described else []


def _version(children: datacite.Children) -> str | None:
    """oaire:version's text when it is a version (`1.0.3`). With a COAR version URI it is the
    publication status (`AM`, `VoR`), which is no version of the work: left out."""
    for element in children.get(_VERSION, ()):
        if not element.get("uri"):
            return text_or_none(element_text(element))
    return None


def _file(element: etree._Element) -> dict[str, str] | None:
    """An oaire:file (the full text at the source) as a file link."""
    url = text_or_none(element_text(element))
    return file_link(url) if url else None
