"""Import of DataCite metadata (kernel-4, 3 and 2.x `resource`, and the `oai_datacite` envelope).

An import walks the already parsed element tree of the record once per level: each element's
children are grouped by tag in one pass (`children_by_tag`) instead of evaluating an XPath per
field, which was most of the import's time. The helpers reproduce the XPaths' results exactly
(document order, `string()`, `text()`); the tests compare them with the original XPath
implementation.
The public helpers take the elements to read, so the OpenAIRE import reads the DataCite
elements of its records with them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lxml import etree

from oai_pipeline.doi import normalize_doi
from oai_pipeline.transform import vocabularies as vocab
from oai_pipeline.transform.dates import first_date, read_date
from oai_pipeline.transform.failure import (
    UNKNOWN_ROOT,
    TransformFailure,
    missing_field,
    shown,
)
from oai_pipeline.transform.normalize import (
    citation,
    clean_unicode,
    collapse_whitespace,
    description_html,
    element_text,
    eu_repo_grant,
    file_link,
    is_ror,
    looks_like_organisation,
    name_identifier,
    name_or_none,
    normalize_ror,
    person_or_org,
    text_or_none,
    typed_identifier,
    unique_affiliations,
    unique_identifiers,
    untyped_identifier,
    without_et_al,
)

KERNEL_4 = "http://datacite.org/schema/kernel-4"
KERNEL_3 = "http://datacite.org/schema/kernel-3"
KERNEL_2_2 = "http://datacite.org/schema/kernel-2.2"
KERNEL_2_1 = "http://datacite.org/schema/kernel-2.1"
"""Kernel-2.x (2011-2013): the DOIs registered then still carry it, in DataCite's OAI-PMH feed
(its own oai_datacite example is a kernel-2.1 resource) and in repositories' datacite formats."""
OAI_DATACITE = "http://schema.datacite.org/oai/oai-1.1/"
OAI_DATACITE_1_0 = "http://schema.datacite.org/oai/oai-1.0/"
"""The older envelope (DataCite's OAI server offered it first); the same `payload` inside."""
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
CROSSREF_FUNDER_PREFIX = "10.13039"
"""The DOI prefix of Crossref's Funder Registry: a Crossref Funder ID is a DOI under it."""


def _clark(namespace: str, local: str) -> str:
    return f"{{{namespace}}}{local}"


class KernelTags:
    """The element names of one DataCite kernel namespace, in Clark notation."""

    def __init__(self, namespace: str, person_parts_also_in: tuple[str, ...] = ()) -> None:
        def q(local: str) -> str:
            return _clark(namespace, local)

        # A creator's or contributor's nameIdentifier and affiliation as a source writes them in
        # another namespace (IRIS: the OAI-PMH one), read as this kernel's. Only the namespaces
        # named: an element of any other is no part of the person.
        self.person_parts = {
            _clark(other, local): q(local)
            for other in person_parts_also_in
            for local in ("nameIdentifier", "affiliation")
        }

        # Kernel-2.x and 3 make resourceType optional (minOccurs=0); kernel-4 requires it.
        self.resource_type_required = namespace == KERNEL_4
        self.identifier = q("identifier")
        self.creators = q("creators")
        self.creator = q("creator")
        self.contributors = q("contributors")
        self.contributor = q("contributor")
        self.names = frozenset((q("creatorName"), q("contributorName")))
        self.contributor_name = q("contributorName")
        self.given_name = q("givenName")
        self.family_name = q("familyName")
        self.name_identifier = q("nameIdentifier")
        self.affiliation = q("affiliation")
        self.titles = q("titles")
        self.title = q("title")
        self.publisher = q("publisher")
        self.publication_year = q("publicationYear")
        self.resource_type = q("resourceType")
        self.subjects = q("subjects")
        self.subject = q("subject")
        self.dates = q("dates")
        self.date = q("date")
        self.language = q("language")
        self.alternate_identifiers = q("alternateIdentifiers")
        self.alternate_identifier = q("alternateIdentifier")
        self.related_identifiers = q("relatedIdentifiers")
        self.related_identifier = q("relatedIdentifier")
        self.related_items = q("relatedItems")
        self.related_item = q("relatedItem")
        self.related_item_identifier = q("relatedItemIdentifier")
        self.volume = q("volume")
        self.issue = q("issue")
        self.first_page = q("firstPage")
        self.last_page = q("lastPage")
        self.edition = q("edition")
        self.sizes = q("sizes")
        self.size = q("size")
        self.formats = q("formats")
        self.format = q("format")
        self.version = q("version")
        self.rights_list = q("rightsList")
        self.rights = q("rights")
        self.descriptions = q("descriptions")
        self.description = q("description")
        self.funding_references = q("fundingReferences")
        self.funding_reference = q("fundingReference")
        self.funder_name = q("funderName")
        self.funder_identifier = q("funderIdentifier")
        self.award_number = q("awardNumber")
        self.award_title = q("awardTitle")
        self.geo_locations = q("geoLocations")
        self.geo_location = q("geoLocation")
        self.geo_location_place = q("geoLocationPlace")
        self.geo_location_point = q("geoLocationPoint")
        self.geo_location_box = q("geoLocationBox")
        self.geo_location_polygon = q("geoLocationPolygon")
        self.polygon_point = q("polygonPoint")
        self.point_latitude = q("pointLatitude")
        self.point_longitude = q("pointLongitude")
        self.west_bound_longitude = q("westBoundLongitude")
        self.east_bound_longitude = q("eastBoundLongitude")
        self.south_bound_latitude = q("southBoundLatitude")
        self.north_bound_latitude = q("northBoundLatitude")


_TAGS = {
    namespace: KernelTags(namespace) for namespace in (KERNEL_4, KERNEL_3, KERNEL_2_2, KERNEL_2_1)
}
# The payload element of each oai_datacite envelope version, by the envelope's namespace.
_PAYLOADS = {
    namespace: _clark(namespace, "payload") for namespace in (OAI_DATACITE, OAI_DATACITE_1_0)
}

Children = dict[Any, list[etree._Element]]
"""An element's children grouped by tag, each group in document order."""


def children_by_tag(element: etree._Element) -> Children:
    """One pass over the children replaces an XPath per field: `d:a/d:b` is the `b` children of
    the `a` children, in document order, exactly as the XPath returns them."""
    groups: Children = {}
    for child in element:
        group = groups.get(child.tag)
        if group is None:
            groups[child.tag] = [child]
        else:
            group.append(child)
    return groups


def nested(children: Children, outer: str, inner: str) -> list[etree._Element]:
    """The XPath `outer/inner` of the element whose children these are. The tags compared
    as strings (a comment's or processing instruction's tag is a function, never equal):
    what `iterchildren(inner)` finds, in a third less time than its tag matcher costs."""
    return [
        element for parent in children.get(outer, ()) for element in parent if element.tag == inner
    ]


def _string(children: Children, tag: str) -> str:
    """The XPath `string(tag)`: all the text of the first such child, or ''."""
    found = children.get(tag)
    if not found:
        return ""
    element = found[0]  # `element_text` inlined, as in `_text`
    return (element.text or "") if len(element) == 0 else "".join(element.itertext())


def _namespace(element: etree._Element) -> str | None:
    """`etree.QName(element).namespace`, without building a QName."""
    tag = element.tag
    return tag[1:].partition("}")[0] if tag[:1] == "{" else None


def _text(element: etree._Element) -> str | None:
    """All the text of a one-line element (whitespace runs collapsed); None when empty.
    `text_or_none` inlined: this runs for nearly every element of a record."""
    text = clean_unicode(
        (element.text or "") if len(element) == 0 else "".join(element.itertext())
    ).strip()  # `element_text` inlined too
    if "\n" in text or "  " in text or "\t" in text:
        text = collapse_whitespace(text)
    return text or None


def _lines(element: etree._Element, lines: list[str]) -> None:
    """The text of `element` (as `itertext()`) onto `lines`, a new line at each `<br/>`."""
    if element.text:
        lines[-1] += element.text
    for child in element:
        tag = child.tag
        if isinstance(tag, str):
            if tag == "br" or tag.endswith("}br"):
                lines.append("")
            else:
                _lines(child, lines)
        if child.tail:
            lines[-1] += child.tail


def _description(element: etree._Element) -> str | None:
    """A description as the target's HTML. Kernel-4 allows `<br/>` in a description: it
    becomes `<br>`, so the lines it separates are not glued together."""
    if len(element) == 0:
        text = element.text
        return description_html(clean_unicode(text)) if text else None
    lines = [""]
    _lines(element, lines)
    return description_html(*lines)


def _attribute(element: etree._Element, name: str) -> str | None:
    """An attribute's value, one-line; None when empty. The XML parser has already made the
    line breaks and tabs of an attribute spaces, so only a run of spaces is left to find."""
    value = element.get(name)
    if value is None:
        return None
    value = value.strip()
    if "  " in value:
        value = collapse_whitespace(value)
    return value or None


def _language(element: etree._Element) -> dict[str, str] | None:
    code = element.get(XML_LANG)
    language = vocab.language_id(code) if code else None
    return {"id": language} if language else None


def import_oai_datacite(envelope: etree._Element) -> dict[str, Any]:
    """The `oai_datacite` envelope (1.1 or 1.0): the DataCite resource in its `payload`."""
    payload_tag = _PAYLOADS.get(_namespace(envelope) or "", _PAYLOADS[OAI_DATACITE])
    payload = next(  # the tags compared as `nested` does; an element's is a string
        (
            element
            for parent in envelope
            if parent.tag == payload_tag
            for element in parent
            if isinstance(element.tag, str)
        ),
        None,
    )
    if payload is None or _namespace(payload) not in _TAGS:
        found = etree.QName(payload).text if payload is not None else "nothing"
        raise TransformFailure(
            UNKNOWN_ROOT,
            f"the oai_datacite payload holds {found}, not a DataCite kernel-2/3/4 resource",
            "metadata.payload",
        )
    return import_resource(payload)


def import_resource(resource: etree._Element) -> dict[str, Any]:
    """A DataCite `resource` (kernel-4, 3 or 2.x) as RDMRecord-shaped data."""
    tags = _TAGS[_namespace(resource)]  # type: ignore[index]
    children = children_by_tag(resource)
    dates = nested(children, tags.dates, tags.date)
    pids, identifiers = record_identifiers(
        children.get(tags.identifier, []),
        nested(children, tags.alternate_identifiers, tags.alternate_identifier),
    )
    title, additional_titles = titles(nested(children, tags.titles, tags.title))
    description, additional_descriptions = descriptions(
        nested(children, tags.descriptions, tags.description)
    )
    related_items = nested(children, tags.related_items, tags.related_item)
    related_identifiers, file_links = related(
        nested(children, tags.related_identifiers, tags.related_identifier), related_items, tags
    )
    if related_items:
        additional_descriptions += published_in(tags, related_items)
    contributors = nested(children, tags.contributors, tags.contributor)
    # Kernel-2.x has no rightsList: its one `<rights>` is a child of the resource.
    rights_elements = nested(children, tags.rights_list, tags.rights)
    rights_elements.extend(children.get(tags.rights, ()))
    metadata: dict[str, Any] = {
        "resource_type": _resource_type(tags, children),
        "title": title,
        "additional_titles": additional_titles,
        "creators": creatibutors(
            tags, nested(children, tags.creators, tags.creator), "metadata.creators"
        ),
        "contributors": creatibutors(
            tags,
            [c for c in contributors if not is_funder(c)],
            "metadata.contributors",
            contributors=True,
        ),
        "publication_date": publication_date(
            dates,
            text_or_none(_string(children, tags.publication_year)),
            "publicationYear or Issued date",
        ),
        "description": description,
        "additional_descriptions": additional_descriptions,
        "subjects": subjects(nested(children, tags.subjects, tags.subject)),
        "rights": licenses(rights_elements, "rightsURI"),
        "languages": _languages(tags, children),
        "publisher": text_or_none(_string(children, tags.publisher)),
        "dates": other_dates(dates),
        "identifiers": identifiers,
        "related_identifiers": related_identifiers,
        "sizes": line_texts(nested(children, tags.sizes, tags.size)),
        "formats": line_texts(nested(children, tags.formats, tags.format)),
        "version": text_or_none(_string(children, tags.version)),
        "funding": funding(tags, nested(children, tags.funding_references, tags.funding_reference))
        + _funder_contributors(tags, contributors),
        "locations": locations(tags, nested(children, tags.geo_locations, tags.geo_location)),
    }
    if not metadata["creators"]:
        raise missing_field("metadata.creators", "creator")
    return {"metadata": metadata, "pids": pids, "files": {"enabled": False, "links": file_links}}


def subjects(elements: list[etree._Element]) -> list[dict[str, Any]]:
    return [
        {"subject": text, "scheme": _attribute(subject, "subjectScheme")}
        for subject in elements
        if (text := _text(subject))
    ]


def line_texts(elements: list[etree._Element]) -> list[str]:
    """The one-line texts of sizes or formats, each element one value: all its text, so a
    comment or element inside (`1 <!-- c -->MB`) neither splits nor cuts it."""
    return [value for element in elements if (value := _text(element))]


def _resource_type(tags: KernelTags, children: Children) -> dict[str, str]:
    """The resourceTypeGeneral as the target's id. Kernel-3 and 2.x make resourceType optional:
    a resource of theirs without one is `other`; kernel-4 requires it, so its absence fails."""
    elements = children.get(tags.resource_type)
    if not elements:
        if not tags.resource_type_required:
            return {"id": "other"}
        raise missing_field("metadata.resource_type", "resourceType")
    return {"id": vocab.datacite_resource_type(elements[0].get("resourceTypeGeneral"))}


def record_identifiers(
    elements: list[etree._Element], alternates: list[etree._Element]
) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """The pids (the DOI identifier) and the other identifiers, alternate ones included."""
    pids: dict[str, Any] = {}
    identifiers: list[dict[str, str]] = []
    for element in elements:
        value = _text(element)
        if value is None:
            continue
        kind = (element.get("identifierType") or "").strip()
        if kind.upper() == "DOI":
            # An unrecognisable DOI is kept as given, so validation names it at pids.doi.
            pids["doi"] = {"identifier": normalize_doi(value) or value, "provider": "external"}
        elif identifier := _other_identifier(value, kind):
            identifiers.append(identifier)
    for element in alternates:
        value, kind = _text(element), _attribute(element, "alternateIdentifierType")
        if value and kind and (identifier := _other_identifier(value, kind)):
            identifiers.append(identifier)
    own = pids.get("doi")
    return pids, unique_identifiers(identifiers, own["identifier"] if own else None)


def _other_identifier(value: str, kind: str) -> dict[str, str] | None:
    """An identifier of the record other than its DOI: a DOI in its bare lower-case form, an
    ORCID/ROR that is malformed dropped (an optional value must not fail the record)."""
    scheme = vocab.identifier_scheme(kind)
    if scheme == "doi":
        return {"identifier": normalize_doi(value) or value, "scheme": "doi"}
    if scheme in ("orcid", "ror"):
        checked = name_identifier(scheme, value)
        return {"identifier": checked["identifier"], "scheme": scheme} if checked else None
    return typed_identifier(value, scheme)  # an ISBN or ISSN checked, a `urn:isbn:` one


_NAME_TYPES = {"personal": "personal", "organizational": "organizational"}
# contributorTypes only a person can have: without a nameType, a name of one of them that has
# no comma ("Dietrich Feist") is a person, not the organisation a bare name is taken for.
_PERSON_ROLES = frozenset({
    "contactperson", "datacurator", "editor", "projectleader", "projectmanager",
    "projectmember", "relatedperson", "researcher", "supervisor", "workpackageleader",
    "translator",
})  # fmt: skip

Person = tuple[int, etree._Element, Children, etree._Element | None]
"""A creator/contributor: its index and element, its children grouped by tag, its name element."""


def _people(tags: KernelTags, elements: list[etree._Element]) -> list[Person]:
    """Each creator/contributor with its children grouped by tag and its name element (the
    XPath `d:creatorName | d:contributorName`: the first of either).

    A creator that holds several names is as many people, each name with the parts that
    follow it: real DataCite records list a whole author list in one `<creator>` (`creatorName`,
    `givenName`, `familyName`, `affiliation`, then the next `creatorName` …), and reading only
    the first name lost every other author."""
    names = tags.names
    aliases = tags.person_parts
    people: list[Person] = []
    for index, element in enumerate(elements):
        children: Children = {}
        name_element = None
        for child in element:
            tag = child.tag
            if aliases:
                tag = aliases.get(tag, tag)
            if tag in names:
                if name_element is not None:  # a second name: the next person begins
                    people.append((index, element, children, name_element))
                    children = {}
                name_element = child
            group = children.get(tag)
            if group is None:
                children[tag] = [child]
            else:
                group.append(child)
        people.append((index, element, children, name_element))
    return people


def creatibutors(
    tags: KernelTags,
    elements: list[etree._Element],
    location: str,
    *,
    contributors: bool = False,
    people: bool = False,
) -> list[dict[str, Any]]:
    """Creators or contributors. Without a nameType, a bare name ("John Smith") is an
    organisation's, as DataCite's data mostly are; with `people` (literature, whose authors
    are people) it is a person's unless it looks like an organisation's."""
    result = []
    for index, element, children, name_element in _people(tags, elements):
        written = _text(name_element) if name_element is not None else None
        # `et al.` (`and others`, `u.a.`) after or as a name: the authors it does not name
        # `,`, `, ,`, `12345`: punctuation or digits name nobody (name_or_none)
        name = name_or_none(text_or_none(without_et_al(written))) if written is not None else None
        name_type = (name_element.get("nameType") or "").lower() if name_element is not None else ""
        # A malformed identifier (name_identifier gives None) is dropped, not the person.
        identifiers = [
            checked
            for identifier in children.get(tags.name_identifier, ())
            if (value := _text(identifier)) and (checked := _person_identifier(identifier, value))
        ]
        # a givenName or familyName `12345` names nobody either: the other names are read
        given = name_or_none(text_or_none(_string(children, tags.given_name)))
        family = name_or_none(text_or_none(_string(children, tags.family_name)))
        if name is None and family is None:
            if contributors or written is not None:
                continue  # an optional contributor without a name, or `et al.`, is left out
            raise missing_field(f"{location}[{index}].person_or_org.name", "name for a creator")
        kind = _NAME_TYPES.get(name_type)
        role = vocab.role(element.get("contributorType")) if contributors else None
        if (
            kind is None
            and (people or role in _PERSON_ROLES)
            and name
            and not looks_like_organisation(name)
        ):
            kind = "personal"  # a ContactPerson "Dietrich Feist" is no organisation
        entry: dict[str, Any] = {
            "person_or_org": person_or_org(
                name,
                kind=kind,
                given=given,
                family=family,
                identifiers=identifiers,
            ),
            "affiliations": unique_affiliations(
                [
                    affiliation
                    for element in children.get(tags.affiliation, ())
                    if (affiliation := _affiliation(element))
                ]
            ),
        }
        if role is not None:
            entry["role"] = {"id": role}
        result.append(entry)
    return result


# The registries of people's and organisations' identifiers, by the host of their URLs.
_REGISTRY_HOSTS = (("orcid.org", "orcid"), ("ror.org", "ror"), ("isni.org", "isni"),
                   ("d-nb.info/gnd", "gnd"))  # fmt: skip


def _person_identifier(element: etree._Element, value: str) -> dict[str, str] | None:
    """A nameIdentifier by its nameIdentifierScheme, else by the registry its schemeURI or
    its value names: an ORCID given as `nameIdentifierScheme="https://orcid.org"`, or with
    only `schemeURI="https://orcid.org/"`, was dropped."""
    scheme = _attribute(element, "nameIdentifierScheme")
    if scheme and (checked := name_identifier(scheme, value)):
        return checked
    named = " ".join(filter(None, (scheme, _attribute(element, "schemeURI"), value))).lower()
    return next(
        (
            checked
            for host, registry in _REGISTRY_HOSTS
            if host in named and (checked := name_identifier(registry, value))
        ),
        None,
    )


def is_funder(contributor: etree._Element) -> bool:
    return vocab.role(contributor.get("contributorType")) == "funder"


def _crossref_funder_id(value: str) -> dict[str, str]:
    """A Crossref Funder ID as the DOI it is: given as the DOI, its URL or its suffix alone
    (`501100001659`, as some producers write it); anything else is kept as `other`."""
    doi = normalize_doi(value) or (f"{CROSSREF_FUNDER_PREFIX}/{value}" if value.isdigit() else None)
    return {"scheme": "doi", "identifier": doi} if doi else {"scheme": "other", "identifier": value}


def _funder_contributors(
    tags: KernelTags, contributors: list[etree._Element]
) -> list[dict[str, Any]]:
    """Kernel-2/3 contributors of type Funder as funding entries: before fundingReference
    (kernel-4), DataCite and the OpenAIRE guidelines for data archives gave a funder so, its
    Crossref Funder ID (`FundRef`, or a 10.13039 DOI) or OpenAIRE grant
    (`info:eu-repo/grantAgreement/EC/FP7/282896`) as its nameIdentifier. The target has no
    funder role; before, they were contributors with role `funder` and the grant was lost."""
    funding: list[dict[str, Any]] = []
    for contributor in contributors:
        if not is_funder(contributor):
            continue
        parts = children_by_tag(contributor)
        name = text_or_none(_string(parts, tags.contributor_name))
        entry: dict[str, Any] | None = None
        identifiers: list[dict[str, str]] = []
        for element in parts.get(tags.name_identifier, ()):
            value = _text(element)
            if value is None:
                continue
            if (grant := eu_repo_grant(value)) is not None:
                entry = grant
                continue
            scheme = vocab.vocabulary_key(element.get("nameIdentifierScheme") or "")
            if scheme in ("fundref", "crossreffunderid"):
                identifiers.append(_crossref_funder_id(value))
            elif (doi := normalize_doi(value)) is not None:
                identifiers.append({"scheme": "doi", "identifier": doi})
        if entry is None:
            if name is None:
                continue  # no funder the target can name
            entry = {"funder": {}, "award": None}
        if name is not None:
            entry["funder"]["name"] = name  # the source's name for it, over the eu-repo code's
        entry["funder"]["identifiers"] = identifiers
        funding.append(entry)
    return funding


def _affiliation(element: etree._Element) -> dict[str, str] | None:
    """An affiliation: its ROR (the affiliationIdentifier) and its name. A text that is a ROR
    URL (`https://ror.org/03yrm5c26`, as DataCite's full example writes it) is no name: it is
    the id when the attribute gives none (it was the affiliation's name)."""
    name = _text(element)
    identifier = _attribute(element, "affiliationIdentifier")
    scheme = (element.get("affiliationIdentifierScheme") or "").upper()
    ror = None
    if identifier and (scheme == "ROR" or "ror.org" in identifier) and is_ror(identifier):
        ror = normalize_ror(identifier)
    if name is not None and "ror.org" in name and is_ror(name):
        ror = ror or normalize_ror(name)
        name = None
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


def titles(elements: list[etree._Element]) -> tuple[str, list[dict[str, Any]]]:
    """The main title (the first without a titleType) and the others as additional titles."""
    pairs = [(element, text) for element in elements if (text := _text(element))]
    if not pairs:
        raise missing_field("metadata.title", "title")
    main = next((pair for pair in pairs if not pair[0].get("titleType")), pairs[0])
    return main[1], _additional(pairs, main, "title", "titleType", vocab.title_type)


def descriptions(elements: list[etree._Element]) -> tuple[str | None, list[dict[str, Any]]]:
    """The abstract (else the first description) and the others as additional descriptions."""
    pairs = [(element, text) for element in elements if (text := _description(element))]
    if not pairs:
        return None, []
    main = next(
        (
            pair
            for pair in pairs
            if vocab.description_type(pair[0].get("descriptionType")) == "abstract"
        ),
        pairs[0],
    )
    additional = _additional(pairs, main, "description", "descriptionType", vocab.description_type)
    return main[1], additional


def publication_date(dates: list[etree._Element], year: str | None, what: str) -> str:
    """The Issued date when it is a valid date, else `year` (DataCite's publicationYear);
    `what` names them for the error when there is neither."""
    candidates = [
        text
        for element in dates
        if vocab.date_type(element.get("dateType")) == "issued" and (text := _text(element))
    ]
    if year:
        candidates.append(year)
    if not candidates:
        raise missing_field("metadata.publication_date", what)
    return first_date(candidates).date


def other_dates(dates: list[etree._Element]) -> list[dict[str, Any]]:
    """The dates the target can store; a date of a type it has not (Coverage, the period a
    dataset covers) is an `other` date that names its type. A date read only approximately
    (`[1985?]`, `ca. 1985`) or only as the year of its words (`Summer 2019`) keeps the words
    as its description, as oai_dc and MARC keep them (the words, or the date, were dropped).
    One that is no date (`2021-13-45`, the open interval `2019-01-01/..`) is left out: an
    optional value does not fail the record; an unreadable Issued date falls back to
    publicationYear in `publication_date`."""
    result = []
    for element in dates:
        text = _text(element)
        found = read_date(text) if text is not None else None
        if found is None:
            continue
        # blank (`dateType=" "`) is no type: it was named as an empty description, which the
        # target refuses, failing the record for one optional date
        source_type = _attribute(element, "dateType")
        kind = vocab.date_type(source_type)
        information = _attribute(element, "dateInformation")
        description = "; ".join(part for part in (found.words, information) if part) or None
        if kind == "other" and source_type and source_type.lower() != "other":
            # A type the target lacks (kernel-4.6's Coverage) is kept in words.
            description = f"{source_type}: {description}" if description else source_type
        result.append({"date": found.date, "type": {"id": kind}, "description": description})
    return result


def _languages(tags: KernelTags, children: Children) -> list[dict[str, str]]:
    code = text_or_none(_string(children, tags.language))
    language = vocab.language_id(code) if code else None
    return [{"id": language}] if language else []


def _related_identifier(
    value: str, kind: str | None, relation: str, resource_type: str | None
) -> dict[str, Any] | None:
    """A related identifier of the scheme its type names; given with no type (a
    relatedItemIdentifier without relatedItemIdentifierType), of the scheme its form shows (a
    DOI, a URL: `untyped_identifier`, as an untyped dc:relation), else None. It was dropped
    whatever it was, a DOI too. An ISBN or ISSN, or a URN `urn:isbn:…`, is checked, typed or
    not (`typed_identifier`: a wrong check digit gives none; typed, it was kept)."""
    found: dict[str, str] | None
    if kind is None:
        found = untyped_identifier(value)
    elif (scheme := vocab.identifier_scheme(kind)) == "doi":
        found = {"identifier": normalize_doi(value) or value, "scheme": scheme}
    else:
        found = typed_identifier(value, scheme)
    if found is None:
        return None
    return {
        **found,
        "relation_type": {"id": vocab.relation_type(relation)},
        "resource_type": {"id": vocab.datacite_resource_type(resource_type)}
        if resource_type
        else None,
    }


def related(
    identifiers: list[etree._Element], items: list[etree._Element], tags: KernelTags
) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """Related identifiers and items; a `HasPart` URL naming a file is also a file link."""
    related: list[dict[str, Any]] = []
    links: list[dict[str, str]] = []
    seen: set[tuple[str, str, str]] = set()

    def add(value: str | None, kind: str | None, relation: str | None, general: str | None) -> None:
        if not (value and relation):
            return
        entry = _related_identifier(value, kind, relation, general)
        if entry is None:
            return
        key = (entry["identifier"], entry["scheme"], entry["relation_type"]["id"])
        if key in seen:
            return
        seen.add(key)
        related.append(entry)
        if entry["scheme"] == "url" and entry["relation_type"]["id"] == "haspart":
            link = file_link(value)
            if link is not None:
                links.append(link)

    for element in identifiers:
        add(
            _text(element),
            _attribute(element, "relatedIdentifierType"),
            _attribute(element, "relationType"),
            _attribute(element, "resourceTypeGeneral"),
        )
    for item in items:
        for identifier in item.iterchildren(tags.related_item_identifier):
            add(
                _text(identifier),
                _attribute(identifier, "relatedItemIdentifierType"),
                _attribute(item, "relationType"),
                _attribute(item, "relatedItemType"),
            )
    return related, links


def published_in(tags: KernelTags, items: list[etree._Element]) -> list[dict[str, Any]]:
    """The journal or book of a relatedItem `IsPublishedIn` (kernel-4.4: its title, volume,
    issue, pages, edition, year) as a series-information description, as OpenAIRE's citation
    and MARC's 773 are: the related identifier keeps only its ISSN or ISBN, and an item
    without any identifier would leave nothing of where the work appeared."""
    found: list[dict[str, Any]] = []
    for item in items:
        if (_attribute(item, "relationType") or "").lower() != "ispublishedin":
            continue
        children = children_by_tag(item)
        item_titles = [
            (element, text)
            for element in nested(children, tags.titles, tags.title)
            if (text := _text(element))
        ]
        main = next((pair for pair in item_titles if not pair[0].get("titleType")), None)
        edition = text_or_none(_string(children, tags.edition))
        described = citation(
            (main or item_titles[0])[1] if item_titles else None,
            text_or_none(_string(children, tags.volume)),
            text_or_none(_string(children, tags.issue)),
            text_or_none(_string(children, tags.first_page)),
            text_or_none(_string(children, tags.last_page)),
            f"{edition} ed." if edition else None,
            text_or_none(_string(children, tags.publication_year)),
        )
        if described and described not in found:
            found.append(described)
    return found


def licenses(elements: list[etree._Element], uri_attribute: str) -> list[dict[str, Any]]:
    """Licenses by id (rightsIdentifier, else a known URI in `uri_attribute`: DataCite's
    rightsURI, OpenAIRE's licenseCondition `uri`); the same license given in several languages
    becomes one entry with a multilingual title. eu-repo access terms
    (`info:eu-repo/semantics/openAccess`, as URI or as the text) are access rights, not
    licenses, and are skipped."""
    merged: dict[str, dict[str, Any]] = {}
    uris: dict[str, str | None] = {}
    for element in elements:
        uri = _attribute(element, uri_attribute)
        identifier = _attribute(element, "rightsIdentifier")
        text = _text(element)
        if (uri or text or "").startswith("info:eu-repo/semantics/"):  # Dryad: in the text
            continue
        from_identifier = (
            _license_id_from_identifier(identifier, _attribute(element, "rightsIdentifierScheme"))
            if identifier
            else None
        )
        from_uri = vocab.license_id_from_url(uri) if uri else None
        # the identifier, else a known URI, else a license named with its version in the text
        license_id = (
            from_identifier or from_uri or (vocab.license_id_from_name(text) if text else None)
        )
        key = license_id or uri or text
        if key is None:
            continue
        entry = merged.get(key)
        if entry is None:
            entry = merged[key] = {"id": license_id, "title": {}, "link": None}
            uris[key] = uri
        if from_identifier and from_uri and from_uri != from_identifier:
            # Contradictory: the id is the source's explicit claim, so it is kept; the URI
            # opens another licence, so it is no link, and the doubt is the right's note.
            note = (
                f"The source's {uri_attribute} {shown(uri)} names another licence "
                f"({from_uri}) than its rightsIdentifier {shown(identifier)}"
            )
            entry.setdefault("description", {}).setdefault("en", note)
        elif uri and uri.startswith(("http://", "https://")) and entry["link"] is None:
            entry["link"] = uri
        if text:
            entry["title"].setdefault(vocab.i18n_key(element.get(XML_LANG)), text)
    for key, entry in merged.items():
        if not entry["title"]:
            # No text: a license id needs no title; else the URI names the right (a `urn:` or
            # a scheme-less URI is no link, but still the only name the source gives).
            entry["title"] = None if entry["id"] else {"en": entry["link"] or uris[key]}
    return list(merged.values())


def _license_id_from_identifier(identifier: str, scheme: str | None) -> str | None:
    """The licence id of a rightsIdentifier: an SPDX id (`CC-BY-4.0`), or the id of the
    licence URL given in its place (`https://spdx.org/licenses/MIT.html`); None for SPDX's
    `LicenseRef-…`, which names a licence of the source's own and no id the target has. Both
    were kept as ids (`licenseref-proprietary`, `https://spdx.org/licenses/mit.html`). Without
    the SPDX scheme only a licence id we know is one: `restricted` and eu-repo's `openAccess`
    are access rights, which the target's records do not hold (they were kept as licence ids)."""
    if identifier.lower().startswith("licenseref-"):
        return None
    if "://" in identifier:
        return vocab.license_id_from_url(identifier)
    if (scheme or "").strip().lower() == "spdx":
        return vocab.license_id_from_identifier(identifier)
    return vocab.license_id_from_unschemed_identifier(identifier)


# funderIdentifierTypes that may hold any identifier: none, and DSpace's blanket Crossref one.
_UNTYPED_FUNDER_IDS = frozenset({"", "crossreffunderid"})


def funding(tags: KernelTags, references: list[etree._Element]) -> list[dict[str, Any]]:
    """fundingReferences; `tags` name their parts (DataCite's, or OpenAIRE's `oaire:` ones).
    A reference whose funder has neither a name nor a ROR is left out: the target holds no
    funding without a funder it can name, and the rest of the record is still good."""
    result = []
    for reference in references:
        parts = children_by_tag(reference)
        funder: dict[str, Any] = {
            "name": text_or_none(_string(parts, tags.funder_name)),
            "identifiers": [],
        }
        for element in parts.get(tags.funder_identifier, ()):
            value = _text(element)
            if value is None:
                continue
            kind = vocab.vocabulary_key(element.get("funderIdentifierType") or "")
            # DSpace's oai_openaire types every funder identifier `Crossref Funder ID` (its
            # crosswalk's TODO), a ROR too: a ROR is the funder's id whatever its type says.
            if kind == "ror" or (kind in _UNTYPED_FUNDER_IDS and is_ror(value)):
                # checked as affiliation RORs are: a malformed one is dropped, the name stays
                if is_ror(value):
                    funder["id"] = normalize_ror(value)
            elif kind == "crossreffunderid":
                funder["identifiers"].append(_crossref_funder_id(value))
            elif kind == "isni" and (checked := name_identifier(kind, value)) is not None:
                funder["identifiers"].append(checked)
            else:
                funder["identifiers"].append({"scheme": kind or "other", "identifier": value})
        award: dict[str, Any] = {"identifiers": []}
        for element in parts.get(tags.award_number, ()):
            award["number"] = _text(element)
            if uri := _attribute(element, "awardURI"):
                award["identifiers"].append({"scheme": "url", "identifier": uri})
        titles = {
            vocab.i18n_key(element.get(XML_LANG)): text
            for element in parts.get(tags.award_title, ())
            if (text := _text(element))
        }
        if titles:
            award["title"] = titles
        if funder["name"] is None and "id" not in funder:
            continue  # no funder the target can name (funderName is required, yet left empty)
        has_award = award.get("number") or titles or award["identifiers"]
        result.append({"funder": funder, "award": award if has_award else None})
    return result


def _float(text: str) -> float:
    return float(text.strip())


def _position(longitude: float, latitude: float) -> list[float]:
    """A GeoJSON position [longitude, latitude]; ValueError for NaN or out of range."""
    if not (-180.0 <= longitude <= 180.0 and -90.0 <= latitude <= 90.0):  # NaN fails too
        raise ValueError(f"no position: longitude {longitude}, latitude {latitude}")
    return [longitude, latitude]


def _point(tags: KernelTags, point: etree._Element) -> list[float]:
    """[longitude, latitude] of a point or polygonPoint (longitude read first, as before).
    Kernel-3 writes a point as text, "latitude longitude"."""
    if (text := _text_form(point)) is not None:
        latitude, longitude = _numbers(text, 2)
        return _position(longitude, latitude)
    parts = children_by_tag(point)
    longitude = _float(_string(parts, tags.point_longitude))
    return _position(longitude, _float(_string(parts, tags.point_latitude)))


def _text_form(element: etree._Element) -> str | None:
    """All the text of a kernel-3 point or box, written as text; None for kernel-4's form, of
    child elements. A comment inside the text is no child element: it was taken for kernel-4's
    form, which found no coordinate and dropped the location."""
    if any(isinstance(child.tag, str) for child in element):
        return None
    text = element_text(element)
    return text if text.strip() else None


def _numbers(text: str, count: int) -> list[float]:
    numbers = [float(part) for part in text.split()]
    if len(numbers) != count:
        raise ValueError(f"{text!r} is not {count} numbers")
    return numbers


def _box(tags: KernelTags, box: etree._Element) -> list[list[float]]:
    """The ring of a geoLocationBox. Kernel-3 writes it as text, "south west north east"
    (the latitude and longitude of the lower left, then of the upper right corner)."""
    if (text := _text_form(box)) is not None:
        south, west, north, east = _numbers(text, 4)
    else:
        sides = children_by_tag(box)
        west = _float(_string(sides, tags.west_bound_longitude))
        east = _float(_string(sides, tags.east_bound_longitude))
        south = _float(_string(sides, tags.south_bound_latitude))
        north = _float(_string(sides, tags.north_bound_latitude))
    return [
        _position(west, south),
        _position(east, south),
        _position(east, north),
        _position(west, north),
        _position(west, south),
    ]


def locations(tags: KernelTags, elements: list[etree._Element]) -> dict[str, Any] | None:
    """geoLocations as GeoJSON features; a coordinate that is not a number (or NaN, or out of
    range) drops the location's geometries, not the record."""
    features = []
    for location in elements:
        parts = children_by_tag(location)
        place = text_or_none(_string(parts, tags.geo_location_place))
        geometries: list[dict[str, Any]] = []
        try:
            for point in parts.get(tags.geo_location_point, ()):
                geometries.append({"type": "Point", "coordinates": _point(tags, point)})
            for box in parts.get(tags.geo_location_box, ()):
                geometries.append({"type": "Polygon", "coordinates": [_box(tags, box)]})
            # each geoLocationPolygon is a polygon of its own
            for polygon_element in parts.get(tags.geo_location_polygon, ()):
                polygon = [
                    _point(tags, point)
                    for point in polygon_element.iterchildren(tags.polygon_point)
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
