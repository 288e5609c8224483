"""Import of DataCite metadata (kernel-4 and kernel-3 `resource`, and the `oai_datacite` envelope).

The XPaths are compiled once per kernel namespace at import time; an import walks the already
parsed element tree of the record and never re-parses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lxml import etree

from oai_pipeline_tests.transform.reference import vocabularies as vocab
from oai_pipeline_tests.transform.reference.dates import normalize_date
from oai_pipeline_tests.transform.reference.failure import (
    INVALID_DATE,
    UNKNOWN_ROOT,
    TransformFailure,
    missing_field,
)
from oai_pipeline_tests.transform.reference.normalize import (
    file_link,
    is_ror,
    name_identifier,
    normalize_doi,
    normalize_ror,
    person_or_org,
    text_or_none,
    unescape_html_once,
)

KERNEL_4 = "http://datacite.org/schema/kernel-4"
KERNEL_3 = "http://datacite.org/schema/kernel-3"
OAI_DATACITE = "http://schema.datacite.org/oai/oai-1.1/"
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"


class _KernelPaths:
    """The compiled XPaths of one DataCite kernel namespace."""

    def __init__(self, namespace: str) -> None:
        def xp(expression: str) -> etree.XPath:
            return etree.XPath(expression, namespaces={"d": namespace})

        self.identifier = xp("d:identifier")
        self.creators = xp("d:creators/d:creator")
        self.contributors = xp("d:contributors/d:contributor")
        self.name = xp("d:creatorName | d:contributorName")
        self.given_name = xp("string(d:givenName)")
        self.family_name = xp("string(d:familyName)")
        self.name_identifiers = xp("d:nameIdentifier")
        self.affiliations = xp("d:affiliation")
        self.titles = xp("d:titles/d:title")
        self.publisher = xp("string(d:publisher)")
        self.publication_year = xp("string(d:publicationYear)")
        self.resource_type = xp("d:resourceType")
        self.subjects = xp("d:subjects/d:subject")
        self.dates = xp("d:dates/d:date")
        self.language = xp("string(d:language)")
        self.alternate_identifiers = xp("d:alternateIdentifiers/d:alternateIdentifier")
        self.related_identifiers = xp("d:relatedIdentifiers/d:relatedIdentifier")
        self.related_items = xp("d:relatedItems/d:relatedItem")
        self.related_item_identifier = xp("d:relatedItemIdentifier")
        self.sizes = xp("d:sizes/d:size/text()")
        self.formats = xp("d:formats/d:format/text()")
        self.version = xp("string(d:version)")
        self.rights = xp("d:rightsList/d:rights")
        self.descriptions = xp("d:descriptions/d:description")
        self.funding_references = xp("d:fundingReferences/d:fundingReference")
        self.funder_name = xp("string(d:funderName)")
        self.funder_identifier = xp("d:funderIdentifier")
        self.award_number = xp("d:awardNumber")
        self.award_title = xp("d:awardTitle")
        self.geo_locations = xp("d:geoLocations/d:geoLocation")
        self.geo_place = xp("string(d:geoLocationPlace)")
        self.geo_point = xp("d:geoLocationPoint")
        self.geo_box = xp("d:geoLocationBox")
        self.geo_polygon_points = xp("d:geoLocationPolygon/d:polygonPoint")
        self.latitude = xp("string(d:pointLatitude)")
        self.longitude = xp("string(d:pointLongitude)")
        self.west = xp("string(d:westBoundLongitude)")
        self.east = xp("string(d:eastBoundLongitude)")
        self.south = xp("string(d:southBoundLatitude)")
        self.north = xp("string(d:northBoundLatitude)")


_PATHS = {KERNEL_4: _KernelPaths(KERNEL_4), KERNEL_3: _KernelPaths(KERNEL_3)}
_ENVELOPE_PAYLOAD = etree.XPath("o:payload/*", namespaces={"o": OAI_DATACITE})


def _text(element: etree._Element) -> str | None:
    """All the text of an element (descriptions may hold <br/>), stripped; None when empty."""
    return text_or_none("".join(element.itertext()))


def _attribute(element: etree._Element, name: str) -> str | None:
    return text_or_none(element.get(name))


def _language(element: etree._Element) -> dict[str, str] | None:
    code = element.get(XML_LANG)
    language = vocab.language_id(code) if code else None
    return {"id": language} if language else None


def import_oai_datacite(envelope: etree._Element) -> dict[str, Any]:
    """The `oai_datacite` envelope: the DataCite resource in its `payload`."""
    payload = _ENVELOPE_PAYLOAD(envelope)
    if not payload or etree.QName(payload[0]).namespace not in _PATHS:
        found = etree.QName(payload[0]).text if payload else "nothing"
        raise TransformFailure(
            UNKNOWN_ROOT,
            f"the oai_datacite payload holds {found}, not a DataCite kernel-3/4 resource",
            "metadata.payload",
        )
    return import_resource(payload[0])


def import_resource(resource: etree._Element) -> dict[str, Any]:
    """A DataCite `resource` (kernel-4 or kernel-3) as RDMRecord-shaped data."""
    paths = _PATHS[etree.QName(resource).namespace]
    pids, identifiers = _identifiers(paths, resource)
    title, additional_titles = _titles(paths, resource)
    description, additional_descriptions = _descriptions(paths, resource)
    related_identifiers, file_links = _related_identifiers(paths, resource)
    metadata: dict[str, Any] = {
        "resource_type": _resource_type(paths, resource),
        "title": title,
        "additional_titles": additional_titles,
        "creators": _creatibutors(paths, paths.creators(resource), "metadata.creators"),
        "contributors": _creatibutors(
            paths, paths.contributors(resource), "metadata.contributors", contributors=True
        ),
        "publication_date": _publication_date(paths, resource),
        "description": description,
        "additional_descriptions": additional_descriptions,
        "subjects": [
            {"subject": text, "scheme": _attribute(subject, "subjectScheme")}
            for subject in paths.subjects(resource)
            if (text := _text(subject))
        ],
        "rights": _rights(paths, resource),
        "languages": _languages(paths, resource),
        "publisher": text_or_none(paths.publisher(resource)),
        "dates": _dates(paths, resource),
        "identifiers": identifiers,
        "related_identifiers": related_identifiers,
        "sizes": [size for text in paths.sizes(resource) if (size := text_or_none(text))],
        "formats": [form for text in paths.formats(resource) if (form := text_or_none(text))],
        "version": text_or_none(paths.version(resource)),
        "funding": _funding(paths, resource),
        "locations": _locations(paths, resource),
    }
    if not metadata["creators"]:
        raise missing_field("metadata.creators", "creator")
    return {"metadata": metadata, "pids": pids, "files": {"enabled": False, "links": file_links}}


def _resource_type(paths: _KernelPaths, resource: etree._Element) -> dict[str, str]:
    elements = paths.resource_type(resource)
    if not elements:
        raise missing_field("metadata.resource_type", "resourceType")
    return {"id": vocab.datacite_resource_type(elements[0].get("resourceTypeGeneral"))}


def _identifiers(
    paths: _KernelPaths, resource: etree._Element
) -> tuple[dict[str, Any], list[dict[str, str]]]:
    pids: dict[str, Any] = {}
    identifiers: list[dict[str, str]] = []
    for element in paths.identifier(resource):
        value = _text(element)
        if value is None:
            continue
        kind = (element.get("identifierType") or "").strip()
        if kind.upper() == "DOI":
            # An unrecognisable DOI is kept as given, so validation names it at pids.doi.
            pids["doi"] = {"identifier": normalize_doi(value) or value, "provider": "external"}
        else:
            identifiers.append({"identifier": value, "scheme": vocab.identifier_scheme(kind)})
    for element in paths.alternate_identifiers(resource):
        value, kind = _text(element), _attribute(element, "alternateIdentifierType")
        if value and kind:
            identifiers.append({"identifier": value, "scheme": vocab.identifier_scheme(kind)})
    return pids, identifiers


def _creatibutors(
    paths: _KernelPaths,
    elements: list[etree._Element],
    location: str,
    *,
    contributors: bool = False,
) -> list[dict[str, Any]]:
    result = []
    for index, element in enumerate(elements):
        names = paths.name(element)
        name = _text(names[0]) if names else None
        name_type = (names[0].get("nameType") or "").lower() if names else ""
        identifiers = [
            name_identifier(scheme, value)
            for identifier in paths.name_identifiers(element)
            if (value := _text(identifier))
            and (scheme := _attribute(identifier, "nameIdentifierScheme"))
        ]
        given = text_or_none(paths.given_name(element))
        family = text_or_none(paths.family_name(element))
        if name is None and family is None:
            raise missing_field(f"{location}[{index}].person_or_org.name", "name for a creator")
        entry: dict[str, Any] = {
            "person_or_org": person_or_org(
                name,
                kind={"personal": "personal", "organizational": "organizational"}.get(name_type),
                given=given,
                family=family,
                identifiers=identifiers,
            ),
            "affiliations": [
                affiliation
                for element in paths.affiliations(element)
                if (affiliation := _affiliation(element))
            ],
        }
        if contributors:
            entry["role"] = {"id": vocab.role(element.get("contributorType"))}
        result.append(entry)
    return result


def _affiliation(element: etree._Element) -> dict[str, str] | None:
    name = _text(element)
    identifier = _attribute(element, "affiliationIdentifier")
    scheme = (element.get("affiliationIdentifierScheme") or "").upper()
    ror = None
    if identifier and (scheme == "ROR" or "ror.org" in identifier) and is_ror(identifier):
        ror = normalize_ror(identifier)
    if name is None and ror is None:
        return None
    return {"id": ror, "name": name}


def _additional(
    pairs: list[tuple[etree._Element, str]],
    main: tuple[etree._Element, str],
    key: str,
    type_attribute: str,
    type_of: Callable[[str | None], str],
) -> list[dict[str, Any]]:
    """The pairs other than `main`, as RDM additional titles or descriptions."""
    return [
        {
            key: pair[1],
            "type": {"id": type_of(pair[0].get(type_attribute))},
            "lang": _language(pair[0]),
        }
        for pair in pairs
        if pair is not main
    ]


def _titles(paths: _KernelPaths, resource: etree._Element) -> tuple[str, list[dict[str, Any]]]:
    titles = [(element, text) for element in paths.titles(resource) if (text := _text(element))]
    if not titles:
        raise missing_field("metadata.title", "title")
    main = next((pair for pair in titles if not pair[0].get("titleType")), titles[0])
    return main[1], _additional(titles, main, "title", "titleType", vocab.title_type)


def _descriptions(
    paths: _KernelPaths, resource: etree._Element
) -> tuple[str | None, list[dict[str, Any]]]:
    descriptions = [
        (element, unescape_html_once(text))
        for element in paths.descriptions(resource)
        if (text := _text(element))
    ]
    if not descriptions:
        return None, []
    main = next(
        (
            pair
            for pair in descriptions
            if vocab.description_type(pair[0].get("descriptionType")) == "abstract"
        ),
        descriptions[0],
    )
    additional = _additional(
        descriptions, main, "description", "descriptionType", vocab.description_type
    )
    return main[1], additional


def _publication_date(paths: _KernelPaths, resource: etree._Element) -> str:
    """The Issued date when it is a valid date, else publicationYear."""
    candidates = [
        text
        for element in paths.dates(resource)
        if vocab.date_type(element.get("dateType")) == "issued" and (text := _text(element))
    ]
    if year := text_or_none(paths.publication_year(resource)):
        candidates.append(year)
    if not candidates:
        raise missing_field("metadata.publication_date", "publicationYear or Issued date")
    for candidate in candidates:
        try:
            return normalize_date(candidate)
        except ValueError:
            continue
    raise TransformFailure(
        INVALID_DATE,
        f"cannot read a publication date from {' or '.join(map(repr, candidates))}",
        "metadata.publication_date",
    )


def _dates(paths: _KernelPaths, resource: etree._Element) -> list[dict[str, Any]]:
    result = []
    for index, element in enumerate(paths.dates(resource)):
        text = _text(element)
        if text is None:
            continue
        try:
            date = normalize_date(text)
        except ValueError as error:
            raise TransformFailure(
                INVALID_DATE, str(error), f"metadata.dates[{index}].date"
            ) from None
        result.append(
            {
                "date": date,
                "type": {"id": vocab.date_type(element.get("dateType"))},
                "description": _attribute(element, "dateInformation"),
            }
        )
    return result


def _languages(paths: _KernelPaths, resource: etree._Element) -> list[dict[str, str]]:
    code = text_or_none(paths.language(resource))
    language = vocab.language_id(code) if code else None
    return [{"id": language}] if language else []


def _related_identifier(
    value: str, kind: str, relation: str, resource_type: str | None
) -> dict[str, Any]:
    scheme = vocab.identifier_scheme(kind)
    if scheme == "doi":
        value = normalize_doi(value) or value
    return {
        "identifier": value,
        "scheme": scheme,
        "relation_type": {"id": vocab.relation_type(relation)},
        "resource_type": {"id": vocab.datacite_resource_type(resource_type)}
        if resource_type
        else None,
    }


def _related_identifiers(
    paths: _KernelPaths, resource: etree._Element
) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """Related identifiers and items; a `HasPart` URL naming a file is also a file link."""
    related: list[dict[str, Any]] = []
    links: list[dict[str, str]] = []
    seen: set[tuple[str, str, str]] = set()

    def add(value: str | None, kind: str | None, relation: str | None, general: str | None) -> None:
        if not (value and kind and relation):
            return
        entry = _related_identifier(value, kind, relation, general)
        key = (entry["identifier"], entry["scheme"], entry["relation_type"]["id"])
        if key in seen:
            return
        seen.add(key)
        related.append(entry)
        if entry["scheme"] == "url" and entry["relation_type"]["id"] == "haspart":
            link = file_link(value)
            if link is not None:
                links.append(link)

    for element in paths.related_identifiers(resource):
        add(
            _text(element),
            _attribute(element, "relatedIdentifierType"),
            _attribute(element, "relationType"),
            _attribute(element, "resourceTypeGeneral"),
        )
    for item in paths.related_items(resource):
        for identifier in paths.related_item_identifier(item):
            add(
                _text(identifier),
                _attribute(identifier, "relatedItemIdentifierType"),
                _attribute(item, "relationType"),
                _attribute(item, "relatedItemType"),
            )
    return related, links


def _rights(paths: _KernelPaths, resource: etree._Element) -> list[dict[str, Any]]:
    """Licenses by id (rightsIdentifier, else a known rightsURI); the same license given in
    several languages becomes one entry with a multilingual title. eu-repo access terms
    (`info:eu-repo/semantics/openAccess`) are access rights, not licenses, and are skipped."""
    merged: dict[str, dict[str, Any]] = {}
    for element in paths.rights(resource):
        uri = _attribute(element, "rightsURI")
        identifier = _attribute(element, "rightsIdentifier")
        text = _text(element)
        if uri and uri.startswith("info:eu-repo/semantics/"):
            continue
        license_id = (
            vocab.license_id_from_identifier(identifier)
            if identifier
            else vocab.license_id_from_url(uri)
            if uri
            else None
        )
        key = license_id or uri or text
        if key is None:
            continue
        entry = merged.setdefault(key, {"id": license_id, "title": {}, "link": None})
        if uri and uri.startswith(("http://", "https://")) and entry["link"] is None:
            entry["link"] = uri
        if text:
            entry["title"].setdefault(vocab.i18n_key(element.get(XML_LANG)), text)
    for entry in merged.values():
        if not entry["title"]:
            entry["title"] = None if entry["id"] else {"en": entry["link"]}
    return list(merged.values())


def _funding(paths: _KernelPaths, resource: etree._Element) -> list[dict[str, Any]]:
    result = []
    for reference in paths.funding_references(resource):
        funder: dict[str, Any] = {
            "name": text_or_none(paths.funder_name(reference)),
            "identifiers": [],
        }
        for element in paths.funder_identifier(reference):
            value = _text(element)
            if value is None:
                continue
            kind = vocab.vocabulary_key(element.get("funderIdentifierType") or "")
            if kind == "ror" or (not kind and is_ror(value)):
                funder["id"] = normalize_ror(value)
            elif kind == "crossreffunderid":
                funder["identifiers"].append(
                    {"scheme": "doi", "identifier": normalize_doi(value) or value}
                )
            else:
                funder["identifiers"].append({"scheme": kind or "other", "identifier": value})
        award: dict[str, Any] = {"identifiers": []}
        for element in paths.award_number(reference):
            award["number"] = _text(element)
            if uri := _attribute(element, "awardURI"):
                award["identifiers"].append({"scheme": "url", "identifier": uri})
        titles = {
            vocab.i18n_key(element.get(XML_LANG)): text
            for element in paths.award_title(reference)
            if (text := _text(element))
        }
        if titles:
            award["title"] = titles
        has_award = award.get("number") or titles or award["identifiers"]
        result.append({"funder": funder, "award": award if has_award else None})
    return result


def _float(text: str) -> float:
    return float(text.strip())


def _locations(paths: _KernelPaths, resource: etree._Element) -> dict[str, Any] | None:
    """geoLocations as GeoJSON features; a coordinate that is not a number drops its geometry."""
    features = []
    for location in paths.geo_locations(resource):
        place = text_or_none(paths.geo_place(location))
        geometries: list[dict[str, Any]] = []
        try:
            for point in paths.geo_point(location):
                geometries.append(
                    {
                        "type": "Point",
                        "coordinates": [
                            _float(paths.longitude(point)),
                            _float(paths.latitude(point)),
                        ],
                    }
                )
            for box in paths.geo_box(location):
                west, east = _float(paths.west(box)), _float(paths.east(box))
                south, north = _float(paths.south(box)), _float(paths.north(box))
                ring = [[west, south], [east, south], [east, north], [west, north], [west, south]]
                geometries.append({"type": "Polygon", "coordinates": [ring]})
            polygon = [
                [_float(paths.longitude(point)), _float(paths.latitude(point))]
                for point in paths.geo_polygon_points(location)
            ]
            if polygon:
                geometries.append({"type": "Polygon", "coordinates": [polygon]})
        except ValueError:
            geometries = []
        if not geometries and place:
            features.append({"place": place})
        for geometry in geometries:
            features.append({"place": place, "geometry": geometry})
    return {"features": features} if features else None
