"""Source vocabularies (DataCite, eu-repo, DCMI) mapped to the InvenioRDM vocabulary ids."""

from __future__ import annotations

import re
from functools import lru_cache

import pycountry

from oai_pipeline.transform.text_cache import short_text_cache

# DataCite resourceTypeGeneral -> resource type id: the ids of InvenioRDM's resource_types.yaml
# (invenio-rdm-records fixtures, v12+), each the one whose datacite_general is that value. A
# thesis is `publication-dissertation` there (titled "Thesis"); `publication-thesis` was the id
# of versions before it and is gone. Collection, Instrument, StudyRegistration … have none: other.
DATACITE_RESOURCE_TYPES: dict[str, str] = {
    "audiovisual": "video",
    "book": "publication-book",
    "bookchapter": "publication-section",
    "computationalnotebook": "software-computationalnotebook",
    "conferencepaper": "publication-conferencepaper",
    "conferenceproceeding": "publication-conferenceproceeding",
    "datapaper": "publication-datapaper",
    "dataset": "dataset",
    "dissertation": "publication-dissertation",
    "event": "event",
    "image": "image",
    "interactiveresource": "lesson",
    "journal": "publication-journal",
    "journalarticle": "publication-article",
    "model": "model",
    "outputmanagementplan": "publication-datamanagementplan",
    "peerreview": "publication-peerreview",
    "physicalobject": "physicalobject",
    "poster": "poster",  # kernel-4.7
    "presentation": "presentation",  # kernel-4.7
    "preprint": "publication-preprint",
    "report": "publication-report",
    "software": "software",
    "sound": "audio",
    "standard": "publication-standard",
    "text": "publication",
    "workflow": "workflow",
}

# dc:type values: info:eu-repo/semantics/* (the OpenAIRE guidelines) and DCMI Type terms.
DC_RESOURCE_TYPES: dict[str, str] = {
    "article": "publication-article",
    "bachelorthesis": "publication-dissertation",
    "masterthesis": "publication-dissertation",
    "doctoralthesis": "publication-dissertation",
    "book": "publication-book",
    "bookpart": "publication-section",
    "conferenceobject": "publication-conferencepaper",
    "conferencepaper": "publication-conferencepaper",
    "conferenceposter": "poster",
    "conferenceproceedings": "publication-conferenceproceeding",
    "contributiontoperiodical": "publication",
    "lecture": "presentation",
    "patent": "publication-patent",
    "preprint": "publication-preprint",
    "report": "publication-report",
    "researchproposal": "publication-proposal",
    "review": "publication-peerreview",  # the target's eurepo mapping of peer review
    "technicaldocumentation": "publication-technicalnote",
    "workingpaper": "publication-workingpaper",
    "annotation": "publication-annotationcollection",
    "dataset": "dataset",
    "software": "software",
    "image": "image",
    "stillimage": "image",
    "movingimage": "video",
    "text": "publication",
    "physicalobject": "physicalobject",
    "event": "event",
    "sound": "audio",
    "interactiveresource": "lesson",
    # Free-text types of DSpace (its dc.type value list), EPrints and OJS, read as keys
    # without case, spaces or punctuation (`Conference or Workshop Item`, `Audio/Sound`).
    "thesis": "publication-dissertation",
    "dissertation": "publication-dissertation",
    "phdthesis": "publication-dissertation",
    "mastersthesis": "publication-dissertation",
    "bachelorsthesis": "publication-dissertation",
    "journalarticle": "publication-article",
    "peerreviewedarticle": "publication-article",
    "bookchapter": "publication-section",
    "booksection": "publication-section",
    "monograph": "publication-book",
    "presentation": "presentation",
    "video": "video",
    "animation": "video",
    "poster": "poster",
    "technicalreport": "publication-report",
    "conferenceorworkshopitem": "publication-conferencepaper",
    "conferenceitem": "publication-conferencepaper",
    "audio": "audio",
    "audiosound": "audio",
    "recordingmusical": "audio",
    "recordingoral": "audio",
    "learningobject": "lesson",
    # DINI's document types (`doc-type:` terms of German repositories, OPUS's plain types)
    # that are not eu-repo terms.
    "periodical": "publication-journal",
    "periodicalpart": "publication",
    "studythesis": "publication-dissertation",
    "habilitation": "publication-dissertation",
    "coursematerial": "lesson",
}

# COAR Resource Types (http://purl.org/coar/resource_type/<code>), the types OpenAIRE v4's
# oaire:resourceType names by URI -> resource type id. Only the concepts whose preferred label
# the dc:type keys above do not already read (`journal article`, `bachelor thesis` …), and
# those labels' codes for repositories that translate the label (`Artículo de revista`).
COAR_RESOURCE_TYPES: dict[str, str] = {
    "c_6501": "publication-article",  # journal article
    "c_2df8fbb1": "publication-article",  # research article
    "c_dcae04bc": "publication-article",  # review article
    "c_3e5a": "publication",  # contribution to journal
    "c_beb9": "publication-datapaper",  # data paper
    "c_2f33": "publication-book",  # book
    "c_3248": "publication-section",  # book part
    "c_5794": "publication-conferencepaper",  # conference paper
    "c_c94f": "publication-conferencepaper",  # conference object
    "c_f744": "publication-conferenceproceeding",  # conference proceedings
    "c_6670": "poster",  # conference poster
    "c_46ec": "publication-dissertation",  # thesis
    "c_7a1f": "publication-dissertation",  # bachelor thesis
    "c_bdcc": "publication-dissertation",  # master thesis
    "c_db06": "publication-dissertation",  # doctoral thesis
    "c_93fc": "publication-report",  # report
    "c_18ws": "publication-report",  # research report
    "c_18gh": "publication-report",  # technical report
    "c_71bd": "publication-technicalnote",  # technical documentation
    "c_8042": "publication-workingpaper",  # working paper
    "c_816b": "publication-preprint",  # preprint
    "c_15cd": "publication-patent",  # patent
    "c_efa0": "publication-peerreview",  # review
    "c_0640": "publication-journal",  # journal
    "c_1162": "publication-annotationcollection",  # annotation
    "c_baaf": "publication-proposal",  # research proposal
    "c_ab20": "publication-datamanagementplan",  # data management plan
    "c_18cf": "publication",  # text
    "c_8544": "presentation",  # lecture
    "c_ddb1": "dataset",  # dataset
    "c_5ce6": "software",  # software
    "c_c513": "image",  # image
    "c_ecc8": "image",  # still image
    "c_12ce": "video",  # video
    "c_8a7e": "video",  # moving image
    "c_18cc": "audio",  # sound
    "c_e9a0": "lesson",  # interactive resource
    "c_e059": "lesson",  # learning object
    "c_1843": "other",  # other
}
# OpenAIRE's resourceTypeGeneral, when neither the URI nor the label names a type.
OPENAIRE_GENERAL_TYPES: dict[str, str] = {
    "literature": "publication",
    "publication": "publication",  # the guidelines' own draft sample writes it
    "dataset": "dataset",
    "software": "software",
}

TITLE_TYPES: dict[str, str] = {
    "subtitle": "subtitle",
    "alternativetitle": "alternative-title",
    "translatedtitle": "translated-title",
}

DESCRIPTION_TYPES: dict[str, str] = {
    "abstract": "abstract",
    "methods": "methods",
    "seriesinformation": "series-information",
    "tableofcontents": "table-of-contents",
    "technicalinfo": "technical-info",
}

DATE_TYPES = {
    "accepted",
    "available",
    "collected",
    "copyrighted",
    "created",
    "issued",
    "submitted",
    "updated",
    "valid",
    "withdrawn",
}

# Licenses known by URL: (compiled pattern, function of the match -> license id).
# A ported CC license has its jurisdiction after the version: licenses/by/3.0/us/.
_CC_LICENSE = re.compile(
    r"creativecommons\.org/licenses/([a-z-]+)/(\d\.\d)(?:/([a-z]{2,3})(?=[/?#]|$))?", re.I
)
# The ported CC licenses InvenioRDM's licenses.csv has; any other is its unported license.
_PORTED_CC = frozenset(
    {"cc-by-3.0-at", "cc-by-3.0-us", "cc-by-nc-nd-3.0-igo", "cc-by-sa-2.0-uk", "cc-by-sa-3.0-at"}
)
_CC_ZERO = re.compile(r"creativecommons\.org/publicdomain/zero/(\d\.\d)", re.I)
_APACHE = re.compile(r"apache\.org/licenses/LICENSE-(\d\.\d)", re.I)
_SPDX = re.compile(r"spdx\.org/licenses/([A-Za-z0-9.+-]+?)(?:\.html)?/?$", re.I)
_OPENSOURCE = re.compile(r"opensource\.org/licenses?/([A-Za-z0-9.+-]+)/?$", re.I)
_GNU = re.compile(r"gnu\.org/licenses/(?:old-licenses/)?((?:a|l)?gpl)(?:-?(\d\.\d))?", re.I)
# SPDX's deprecated GNU ids: `GPL-3.0` is `GPL-3.0-only`, `GPL-3.0+` is `GPL-3.0-or-later`.
_GNU_BARE = re.compile(r"^((?:a|l)?gpl-\d\.\d)(\+)?$")


_SEPARATORS = re.compile(r"[\s_-]+")


@short_text_cache(maxsize=4096)
def vocabulary_key(text: str) -> str:
    """`JournalArticle`, `journal article`, `Journal-Article` all become `journalarticle`.

    Cached: records repeat the same few attribute values, and every vocabulary goes through it.
    """
    return _SEPARATORS.sub("", text).lower()


def datacite_resource_type(general: str | None) -> str:
    return DATACITE_RESOURCE_TYPES.get(vocabulary_key(general or ""), "other")


_NOT_ALPHANUMERIC = re.compile(r"[\W_]+")


@short_text_cache(maxsize=4096)
def _dc_type(value: str) -> str | None:
    """The resource type of one dc:type: a COAR type URI's, else an eu-repo URI's or DCMI URI's
    last segment, or a DINI `doc-type:` term (German repositories) without its prefix, else
    the whole text (`Audio/Sound`), compared without case, spaces or punctuation."""
    value = value.strip()
    if value.startswith(("info:", "http://", "https://")):
        value = value.rstrip("/").rsplit("/", 1)[-1]
        if value in COAR_RESOURCE_TYPES:
            return COAR_RESOURCE_TYPES[value]
    elif value[:9].lower() == "doc-type:":
        value = value[9:]
    return DC_RESOURCE_TYPES.get(_NOT_ALPHANUMERIC.sub("", value).lower())


# What a dc:type says that says little: DCMI's `Text`, `other`. A more specific dc:type
# of the same record is preferred (`Text` before `doc-type:doctoralThesis`, as DINI asks).
_VAGUE_TYPES = frozenset({"publication", "other"})


def dc_resource_type(values: list[str]) -> str:
    """The first dc:type (eu-repo URI, COAR URI, DINI term, DCMI term or a repository's free
    text) that maps to a specific type, else the first that maps (`Text`: `publication`);
    `other` when none does."""
    vague = None
    for value in values:
        mapped = _dc_type(value)
        if mapped is not None:
            if mapped not in _VAGUE_TYPES:
                return mapped
            vague = vague or mapped
    return vague or "other"


def coar_resource_type(uri: str | None, label: str | None, general: str | None) -> str:
    """An oaire:resourceType as the resource type id: by its COAR URI, else by its label
    read as a dc:type is, else by its resourceTypeGeneral; `other` when none says."""
    code = (uri or "").strip().rstrip("/").rsplit("/", 1)[-1]
    if code in COAR_RESOURCE_TYPES:
        return COAR_RESOURCE_TYPES[code]
    if label and (mapped := _dc_type(label)) is not None:
        return mapped
    return OPENAIRE_GENERAL_TYPES.get((general or "").strip().lower(), "other")


def title_type(value: str | None) -> str:
    return TITLE_TYPES.get(vocabulary_key(value or ""), "other")


def description_type(value: str | None) -> str:
    return DESCRIPTION_TYPES.get(vocabulary_key(value or ""), "other")


def date_type(value: str | None) -> str:
    key = vocabulary_key(value or "")
    return key if key in DATE_TYPES else "other"


# The ids of InvenioRDM's relation_types.yaml and roles.yaml (invenio-rdm-records fixtures):
# each DataCite relationType's and contributorType's lower-case form, kernel-4.6's included.
RELATION_TYPES = frozenset({
    "iscitedby", "cites", "issupplementto", "issupplementedby", "iscontinuedby", "continues",
    "isdescribedby", "describes", "hasmetadata", "ismetadatafor", "hasversion", "isversionof",
    "isnewversionof", "ispreviousversionof", "ispartof", "haspart", "ispublishedin",
    "isreferencedby", "references", "isdocumentedby", "documents", "iscompiledby", "compiles",
    "isvariantformof", "isoriginalformof", "isidenticalto", "isreviewedby", "reviews",
    "isderivedfrom", "issourceof", "isrequiredby", "requires", "isobsoletedby", "obsoletes",
    "istranslationof", "hastranslation", "iscollectedby", "collects",
})  # fmt: skip
ROLES = frozenset({
    "contactperson", "datacollector", "datacurator", "datamanager", "distributor", "editor",
    "hostinginstitution", "producer", "projectleader", "projectmanager", "projectmember",
    "registrationagency", "registrationauthority", "relatedperson", "researcher",
    "researchgroup", "rightsholder", "sponsor", "supervisor", "translator", "workpackageleader",
    "other",
})  # fmt: skip


def relation_type(value: str) -> str:
    """DataCite relationType -> InvenioRDM relation type id (its lower-case form). A relation
    the target has not (kernel-4.7's `Other`, told in relationTypeInformation; `IsRelatedTo`
    of an unvalidated source, a MARC 787 $i in words) `references` the resource, the weakest
    claim, as an untyped dc:relation does (dublin_core.UNTYPED_RELATION): its own id would be
    refused by the target, and the record with it."""
    key = vocabulary_key(value)
    return key if key in RELATION_TYPES else "references"


def role(value: str | None) -> str:
    """DataCite contributorType -> InvenioRDM role id (its lower-case form); a role the target
    has not (`Author`) is `other`. `funder` stays: the import makes such a contributor a
    funding entry (datacite.is_funder), never a contributor with that role."""
    key = vocabulary_key(value or "")
    return key if key in ROLES or key == "funder" else "other"


# The schemes of InvenioRDM's RDM_RECORDS_IDENTIFIERS_SCHEMES (invenio-rdm-records config:
# record, alternate and related identifiers), with DataCite's names for some of them.
IDENTIFIER_SCHEMES = frozenset({
    "ark", "arxiv", "ads", "crossreffunderid", "doi", "ean13", "eissn", "grid", "handle",
    "igsn", "isbn", "isni", "issn", "istc", "lissn", "lsid", "pmid", "purl", "upc", "url",
    "urn", "w3id", "other",
})  # fmt: skip
_SCHEME_ALIASES = {"bibcode": "ads", "hdl": "handle", "pubmed": "pmid", "issnl": "lissn"}


@short_text_cache(maxsize=1024)
def identifier_scheme(value: str) -> str:
    """A DataCite identifier type as the target's scheme (`bibcode` -> `ads`); a type the
    target does not know (`Local accession number`, `oai`, `RRID`) is `other`, which it
    accepts for any value, so the identifier is kept."""
    key = vocabulary_key(value)
    key = _SCHEME_ALIASES.get(key, key)
    return key if key in IDENTIFIER_SCHEMES else "other"


def _spdx_id(value: str) -> str:
    """A lower-case SPDX id as InvenioRDM's licenses.csv has it: its GNU licenses are only
    `-only` and `-or-later`, so the deprecated bare ids become those."""
    if match := _GNU_BARE.match(value):
        return f"{match.group(1)}-or-later" if match.group(2) else f"{match.group(1)}-only"
    return value


_WHITESPACE = re.compile(r"\s+")


def license_id_from_identifier(value: str) -> str:
    """An SPDX-like rightsIdentifier as the vocabulary id: `CC0 1.0` -> `cc0-1.0`,
    `GPL-3.0` -> `gpl-3.0-only`."""
    return _spdx_id(_WHITESPACE.sub("-", value.strip()).lower())


def license_id_from_unschemed_identifier(value: str) -> str | None:
    """The licence id of a rightsIdentifier that names no SPDX scheme, when it is a licence's
    id we know (`MIT`, `CC-BY-4.0`, `cc0-1.0`), else None: sources write access rights there
    (`restricted`, `info:eu-repo/semantics/openAccess`), which are no licence."""
    exact = license_id_from_identifier(value)
    return exact if exact in _PORTED_CC else license_id_from_name(value)


@short_text_cache(maxsize=1024)
def license_id_from_url(url: str) -> str | None:
    """The license id of a well-known license URL, or None (not a license we can name).

    A gnu.org URL names a version of the license, not whether later versions may be chosen:
    as the GPL itself reads a program that names a version without "or any later version"
    (section 14), and as SPDX reads its bare `GPL-3.0`, it is `-only`. A URL without a
    version (`licenses/gpl.html`) is "any version", `-or-later` of the current one."""
    if match := _CC_LICENSE.search(url):
        kind = match.group(1).lower().replace("by-nd-nc", "by-nc-nd")  # CC 1.0's order
        unported = f"cc-{kind}-{match.group(2)}"
        if match.group(3):
            ported = f"{unported}-{match.group(3).lower()}"
            if ported in _PORTED_CC:
                return ported
        return unported
    if match := _CC_ZERO.search(url):
        return f"cc0-{match.group(1)}"
    if match := _APACHE.search(url):
        return f"apache-{match.group(1)}"
    if match := _GNU.search(url):
        name = match.group(1).lower()
        if match.group(2) is None:
            return f"{name}-3.0-or-later"
        return f"{name}-{match.group(2)}-only"
    for pattern in (_SPDX, _OPENSOURCE):
        if match := pattern.search(url):
            return _spdx_id(match.group(1).lower())
    return None


# A Creative Commons license as feeds name it in text, with its version: `CC BY 4.0`,
# `CC-BY-NC-SA-4.0`, `Creative Commons Attribution-NonCommercial 4.0 International`, OPUS's
# `Creative Commons - CC BY - Namensnennung 4.0 International`; and CC0 (`CC0 1.0 Universal`).
_CC_SHORT_NAME = re.compile(r"\bCC[\s-]+(BY(?:[\s-]+(?:NC|ND|SA))*)\b[^0-9]{0,80}?(\d\.\d)\b", re.I)
_CC_LONG_NAME = re.compile(
    r"\bcreative\s+commons\s+(attribution(?:[\s-]+(?:non-?commercial|no-?deriv\w*|"
    r"share-?alike))*)\b[^0-9]{0,40}?(\d\.\d)\b",
    re.I,
)
_CC_LONG_PARTS = {"attribution": "by", "non": "nc", "no": "nd", "share": "sa"}
_CC_ZERO_NAME = re.compile(r"\bCC[\s-]?(?:0|zero)\b(?:[\s-]*(\d\.\d))?", re.I)


# SPDX ids that repositories give as the whole rights text (`MIT`, `Apache-2.0`, GitHub's
# releases archived by Zenodo, software deposits), lower case as the target's licences are.
# Only ids: a word like `Open` or `Public` is no licence; CC licences are read by name below.
# fmt: off
_SPDX_IDS = frozenset({
    "0bsd", "afl-3.0", "agpl-3.0", "agpl-3.0-only", "agpl-3.0-or-later", "apache-1.1",
    "apache-2.0", "artistic-2.0", "bsd-2-clause", "bsd-3-clause", "bsd-3-clause-clear",
    "bsd-4-clause", "bsl-1.0", "cc-pddc", "cddl-1.0", "cecill-2.1", "dl-de-by-2.0", "ecl-2.0",
    "epl-1.0", "epl-2.0", "etalab-2.0", "eupl-1.1", "eupl-1.2", "gpl-2.0", "gpl-2.0-only",
    "gpl-2.0-or-later", "gpl-3.0", "gpl-3.0-only", "gpl-3.0-or-later", "isc", "lgpl-2.1",
    "lgpl-2.1-only", "lgpl-2.1-or-later", "lgpl-3.0", "lgpl-3.0-only", "lgpl-3.0-or-later",
    "lppl-1.3c", "mit", "mit-0", "mpl-1.1", "mpl-2.0", "ms-pl", "ncsa", "odbl-1.0",
    "odc-by-1.0", "ofl-1.1", "ogl-uk-3.0", "pddl-1.0", "postgresql", "python-2.0",
    "unlicense", "upl-1.0", "wtfpl", "zlib",
})
# fmt: on
# `MIT`, `MIT License`, `The MIT License`, `GPL-3.0+`, `Apache License, Version 2.0`.
_SPDX_NAME = re.compile(r"^(?:the\s+)?([A-Za-z0-9.-]+?)(\+)?(?:\s+licen[cs]e)?$", re.I)
_APACHE_NAME = re.compile(r"^apache(?:\s+licen[cs]e)?,?\s+(?:version\s+|v)?(\d\.\d)$", re.I)


def _license_id_from_spdx_name(text: str) -> str | None:
    """The id of a licence given by its SPDX id alone (`MIT`, `Apache-2.0`, `GPL-3.0+`, also
    followed by `License`), or by the Apache licence's name; else None."""
    if match := _APACHE_NAME.match(text):
        return f"apache-{match.group(1)}"
    match = _SPDX_NAME.match(text)
    if match is None or match.group(1).lower() not in _SPDX_IDS:
        return None
    return _spdx_id(match.group(1).lower() + (match.group(2) or ""))


def license_id_from_name(text: str) -> str | None:
    """The license id of a Creative Commons license named in text with its version (or of
    CC0), or of a licence given by its SPDX id (`MIT`, `Apache-2.0`), else None: repositories
    that give no license URL name the license in dc:rights (`CC BY 4.0`). A name without a
    version (`CC BY`) names no license the target holds."""
    if (spdx := _license_id_from_spdx_name(text.strip())) is not None:
        return spdx
    if match := _CC_SHORT_NAME.search(text):
        parts = re.split(r"[\s-]+", match.group(1).lower())
    elif match := _CC_LONG_NAME.search(text):
        words = re.findall(r"attribution|non|no|share", match.group(1).lower())
        parts = [_CC_LONG_PARTS[word] for word in words]
    elif match := _CC_ZERO_NAME.search(text):
        return f"cc0-{match.group(1) or '1.0'}"
    else:
        return None
    if "nd" in parts and "sa" in parts:
        return None  # no such license: NoDerivatives and ShareAlike exclude each other
    kind = "-".join(sorted(set(parts), key=["by", "nc", "nd", "sa"].index))
    return f"cc-{kind}-{match.group(2)}"


# Languages as they name themselves (dc:language of European and other repositories), and
# English names ISO 639 words differently (`Modern Greek (1453-)`): -> ISO 639-3.
# fmt: off
_LANGUAGE_NAMES = {
    "deutsch": "deu", "español": "spa", "espanol": "spa", "castellano": "spa",
    "castilian": "spa", "français": "fra", "francais": "fra", "italiano": "ita",
    "português": "por", "portugues": "por", "nederlands": "nld", "flemish": "nld",
    "svenska": "swe", "norsk": "nor", "dansk": "dan", "suomi": "fin", "polski": "pol",
    "čeština": "ces", "cestina": "ces", "slovenčina": "slk", "slovenščina": "slv",
    "hrvatski": "hrv", "srpski": "srp", "magyar": "hun", "română": "ron", "romana": "ron",
    "türkçe": "tur", "turkce": "tur", "ελληνικά": "ell", "greek": "ell", "русский": "rus",
    "українська": "ukr", "català": "cat", "catala": "cat", "euskara": "eus", "galego": "glg",
    "íslenska": "isl", "eesti": "est", "latviešu": "lav", "lietuvių": "lit",
    "bahasa indonesia": "ind", "bahasa melayu": "msa", "中文": "zho", "日本語": "jpn",
    "한국어": "kor", "العربية": "ara", "עברית": "heb", "فارسی": "fas", "farsi": "fas",
    "swahili": "swa", "kiswahili": "swa", "hindi": "hin", "हिन्दी": "hin",
}
# fmt: on


@lru_cache(maxsize=1)
def _languages_by_name() -> dict[str, str]:
    """Every ISO 639-3 language by its lower-case English name(s), built once: one look-up
    per value, not a scan of pycountry's languages per record."""
    names: dict[str, str] = {}
    for language in pycountry.languages:
        for attribute in ("name", "common_name", "inverted_name"):
            name = getattr(language, attribute, None)
            if name:
                names.setdefault(name.lower(), language.alpha_3)
    names.update(_LANGUAGE_NAMES)
    return names


@short_text_cache(maxsize=1024)
def language_id(code: str) -> str | None:
    """ISO 639-3 id of a language tag (`en-US`, `en`, `eng`, `ger`) or name (`English`,
    `Deutsch`, `Español`); None when unknown."""
    primary = code.strip().split("-")[0].split("_")[0].lower()
    if len(primary) == 2:
        language = pycountry.languages.get(alpha_2=primary)
    elif len(primary) == 3:
        language = pycountry.languages.get(alpha_3=primary) or pycountry.languages.get(
            bibliographic=primary
        )
    else:
        return _languages_by_name().get(" ".join(code.split()).lower())
    return language.alpha_3 if language is not None else None


# Between languages given in one value: `english; german`, `en, de`, `eng/ger`, `English and
# French`.
_LANGUAGE_LIST = re.compile(r"\s*(?:[;,/|+]|\s&\s|\sand\s|\sund\s|\set\s)\s*", re.I)


def language_ids(text: str) -> list[str]:
    """The ISO 639-3 ids of a value naming one language or several (`english; german`), in
    order, each once; the whole value first, as a name may hold a comma (`Greek, Modern
    (1453-)`). Parts that name no language are left out."""
    if (whole := language_id(text)) is not None:
        return [whole]
    found = (language_id(part) for part in _LANGUAGE_LIST.split(text) if part.strip())
    return list(dict.fromkeys(language for language in found if language is not None))


@short_text_cache(maxsize=256)
def i18n_key(code: str | None) -> str:
    """The key of a `{lang: text}` dict: the two-letter tag when there is one, else `en`."""
    if not code:
        return "en"
    primary = code.strip().split("-")[0].split("_")[0].lower()
    if len(primary) == 3:
        # `eng`, `ger` (DataCite records write them): the target's keys are two-letter, and
        # one license titled in `en` and `eng` would be two languages of one title
        language = pycountry.languages.get(alpha_3=primary) or pycountry.languages.get(
            bibliographic=primary
        )
        alpha_2 = getattr(language, "alpha_2", None) if language is not None else None
        return alpha_2 or primary
    return primary or "en"
