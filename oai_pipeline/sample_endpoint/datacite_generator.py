"""Realistic DataCite kernel-4 resources, made up but shaped like what Zenodo serves.

Used to serve benchmark-sized sources (issue 9): each resource carries a unique DOI, 1-6
creators with valid-checksum ORCIDs and ROR affiliations, titles, subjects, dates, rights,
an abstract padded to a chosen size, and sometimes contributors, related identifiers and
funding references. Built as strings (no XML library in the loop) so 100,000 take seconds.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

from oai_pipeline.sample_endpoint.formats import DATACITE_NAMESPACE, KNOWN_FORMATS

MIN_RESOURCE_BYTES = 1100
MAX_RESOURCE_BYTES = 4700  # leaves room for the oai_datacite envelope within 5 KB

_GIVEN = (
    "Anna", "Jochen", "Olaf", "María", "Wei", "Kwame", "Sofia", "Heinz-Alexander", "Priya",
    "Lars", "Zoë", "Mateo", "Aiko", "Fatima", "Giacomo", "Nils", "Chiara", "Ólafur", "Tomasz",
    "Amara", "Elif", "Jonas", "Ingrid", "Rafael", "Yuki", "Noah", "Léa", "Darius", "Mei",
)  # fmt: skip
_FAMILY = (
    "Klar", "Michaelis", "Wallace", "Schröder", "Fütterer", "Lanza", "Núñez", "Zhang",
    "Mensah", "Rossi", "Nakamura", "Haddad", "Kowalski", "O'Brien", "Ivanova", "Johansson",
    "Okafor", "Dubois", "Müller", "Patel", "Silva", "Kim", "García", "Andersen", "Yılmaz",
)  # fmt: skip
_ROR = (
    ("https://ror.org/01ggx4157", "European Organization for Nuclear Research"),
    ("https://ror.org/05a28rw58", "ETH Zurich"),
    ("https://ror.org/052gg0110", "University of Oxford"),
    ("https://ror.org/03vek6s52", "Harvard University"),
    ("https://ror.org/00f54p054", "Stanford University"),
    ("https://ror.org/02jx3x895", "University College London"),
    ("https://ror.org/013meh722", "University of Cambridge"),
    ("https://ror.org/04t3en479", "Karlsruhe Institute of Technology"),
    ("https://ror.org/04wxnsj81", "DataCite"),
)
_RESOURCE_TYPES = (
    ("Dataset", "Dataset"), ("Dataset", "Tabular data"), ("Software", "Software"),
    ("Text", "Report"), ("JournalArticle", "Journal article"), ("Preprint", "Preprint"),
    ("Image", "Figure"), ("Audiovisual", "Video"), ("Model", "Simulation model"),
    ("Workflow", "Analysis workflow"), ("Collection", "Collection"),
)  # fmt: skip
_SUBJECTS = (
    "Climate science", "Hydrology", "Particle physics", "Genomics", "Machine learning",
    "Research data management", "Linguistics", "Ecology", "Materials science", "Astronomy",
    "Epidemiology", "Digital humanities", "Oceanography", "Neuroscience", "Soil & land use",
)  # fmt: skip
_RIGHTS = (
    ("Creative Commons Attribution 4.0 International",
     "https://creativecommons.org/licenses/by/4.0/legalcode", "cc-by-4.0"),
    ("Creative Commons Zero v1.0 Universal",
     "https://creativecommons.org/publicdomain/zero/1.0/legalcode", "cc0-1.0"),
    ("MIT License", "https://opensource.org/licenses/MIT", "mit"),
    ("Apache License 2.0", "https://www.apache.org/licenses/LICENSE-2.0", "apache-2.0"),
)  # fmt: skip
_PUBLISHERS = ("Zenodo", "DataCite", "ETH Library", "Dryad", "Figshare", "Smith & Jones Data")
_FUNDERS = (
    ("European Commission", "https://doi.org/10.13039/501100000780"),
    ("Deutsche Forschungsgemeinschaft", "https://doi.org/10.13039/501100001659"),
    ("National Science Foundation", "https://doi.org/10.13039/100000001"),
    ("Swiss National Science Foundation", "https://doi.org/10.13039/501100001711"),
)
_WORDS = (
    "analysis", "data", "measurements", "model", "station", "river", "basin", "sensor", "time",
    "series", "calibration", "uncertainty", "survey", "sample", "protocol", "collision",
    "events", "detector", "simulation", "reproducible", "workflow", "pipeline", "open",
    "access", "metadata", "harvesting", "repository", "archive", "long-term", "preservation",
    "observations", "temperature", "precipitation", "genome", "sequence", "annotation",
    "corpus", "interviews", "transcripts", "images", "spectra", "catalogue", "stars",
    "galaxies", "cohort", "trial", "regional", "global", "dataset", "version", "release",
    "processing", "quality", "control", "raw", "derived", "high-resolution",
)  # fmt: skip
_CREATOR_COUNTS = (1, 1, 1, 2, 2, 2, 3, 3, 4, 5)
_DOI_PREFIXES = ("10.5281", "10.82433", "10.5072")
_DOI_MULTIPLIER = 2654435761  # odd, not a multiple of 5: a bijection modulo 10**9


@dataclass(frozen=True)
class GeneratedResource:
    """One made-up resource: its DOI, its type (for set specs) and its serialization."""

    doi: str
    resource_type_general: str
    xml: bytes


def orcid_checksum(base_digits: str) -> str:
    """ISO 7064 11,2 check character of the first 15 digits of an ORCID iD."""
    total = 0
    for digit in base_digits:
        total = (total + int(digit)) * 2
    result = (12 - total % 11) % 11
    return "X" if result == 10 else str(result)


def _orcid(rng: random.Random) -> str:
    digits = f"000000{rng.randint(1, 3)}{rng.randrange(10**8):08d}"  # like issued iDs
    groups = digits + orcid_checksum(digits)
    return "-".join(groups[i : i + 4] for i in range(0, 16, 4))


def _doi(index: int, seed: int) -> str:
    number = (index * _DOI_MULTIPLIER + seed * 7919) % 10**9
    prefix = _DOI_PREFIXES[index % len(_DOI_PREFIXES)]
    if prefix == "10.5281":
        return f"{prefix}/zenodo.{number + 1_000_000}"
    text = f"{number:09d}"
    return f"{prefix}/OAIP-{text[:4]}-{text[4:]}"


def _sentence(rng: random.Random, words: int) -> str:
    chosen = [rng.choice(_WORDS) for _ in range(words)]
    return " ".join(chosen).capitalize() + "."


def _creator(rng: random.Random, tag: str, extra_attr: str = "") -> str:
    given, family = rng.choice(_GIVEN), rng.choice(_FAMILY)
    ror, affiliation = rng.choice(_ROR)
    return (
        f"<{tag}{extra_attr}>"
        f'<{tag}Name nameType="Personal">{escape(f"{family}, {given}")}</{tag}Name>'
        f"<givenName>{escape(given)}</givenName><familyName>{escape(family)}</familyName>"
        '<nameIdentifier nameIdentifierScheme="ORCID" schemeURI="https://orcid.org">'
        f"{_orcid(rng)}</nameIdentifier>"
        f'<affiliation affiliationIdentifier="{ror}" affiliationIdentifierScheme="ROR" '
        f'schemeURI="https://ror.org">{escape(affiliation)}</affiliation>'
        f"</{tag}>"
    )


def generate_resource(
    rng: random.Random, *, index: int, seed: int, oai_identifier: str
) -> GeneratedResource:
    """Build one resource of MIN_RESOURCE_BYTES..MAX_RESOURCE_BYTES bytes (UTF-8)."""
    doi = _doi(index, seed)
    general, specific = rng.choice(_RESOURCE_TYPES)
    year = rng.randrange(2012, 2026)
    creators = [_creator(rng, "creator") for _ in range(rng.choice(_CREATOR_COUNTS))]
    parts = [
        f'<resource xmlns="{DATACITE_NAMESPACE}" '
        'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
        f'xsi:schemaLocation="{DATACITE_NAMESPACE} {KNOWN_FORMATS["datacite"].schema}">',
        f'<identifier identifierType="DOI">{doi}</identifier>',
        "<alternateIdentifiers>"
        f'<alternateIdentifier alternateIdentifierType="oai">{escape(oai_identifier)}'
        "</alternateIdentifier></alternateIdentifiers>",
        "",  # creators: placed below, once it is known how many fit
        f'<titles><title xml:lang="en">{escape(_sentence(rng, rng.randint(4, 12))[:-1])}</title>'
        + (
            f'<title xml:lang="en" titleType="Subtitle">{_sentence(rng, 5)[:-1]}</title>'
            if rng.random() < 0.3
            else ""
        )
        + "</titles>",
        f"<publisher>{escape(rng.choice(_PUBLISHERS))}</publisher>",
        f"<publicationYear>{year}</publicationYear>",
        f'<resourceType resourceTypeGeneral="{general}">{escape(specific)}</resourceType>',
        "<subjects>"
        + "".join(
            f'<subject xml:lang="en">{escape(s)}</subject>'
            for s in rng.sample(_SUBJECTS, rng.randint(1, 4))
        )
        + "</subjects>",
    ]
    if rng.random() < 0.3:
        parts.append(
            "<contributors>"
            + _creator(rng, "contributor", ' contributorType="DataCurator"')
            + "</contributors>"
        )
    month, day = rng.randint(1, 12), rng.randint(1, 28)
    parts += [
        f'<dates><date dateType="Issued">{year}-{month:02d}-{day:02d}</date>'
        f'<date dateType="Updated">{min(year + 1, 2025)}-{month:02d}-{day:02d}</date></dates>',
        "<language>en</language>",
    ]
    if rng.random() < 0.5:
        parts.append(
            "<relatedIdentifiers>"
            '<relatedIdentifier relatedIdentifierType="DOI" relationType="IsVersionOf">'
            f"{_doi(index + 10**6, seed + 1)}</relatedIdentifier>"
            '<relatedIdentifier relatedIdentifierType="URL" relationType="IsSupplementTo">'
            f"https://github.com/example/project-{index}</relatedIdentifier>"
            "</relatedIdentifiers>"
        )
    rights, rights_uri, spdx = rng.choice(_RIGHTS)
    parts += [
        f"<version>{rng.randint(1, 4)}.{rng.randint(0, 9)}</version>",
        f'<rightsList><rights xml:lang="en" rightsURI={quoteattr(rights_uri)} '
        f'rightsIdentifier="{spdx}" rightsIdentifierScheme="SPDX" '
        f'schemeURI="https://spdx.org/licenses/">{escape(rights)}</rights></rightsList>',
    ]
    tail = "</resource>"
    if rng.random() < 0.25:
        funder, funder_id = rng.choice(_FUNDERS)
        tail = (
            "<fundingReferences><fundingReference>"
            f"<funderName>{escape(funder)}</funderName>"
            f'<funderIdentifier funderIdentifierType="Crossref Funder ID">{funder_id}'
            "</funderIdentifier>"
            f"<awardNumber>{rng.randrange(100000, 999999)}</awardNumber>"
            "</fundingReference></fundingReferences>" + tail
        )
    description_open = '<descriptions><description xml:lang="en" descriptionType="Abstract">'
    description_close = "</description></descriptions>"
    while True:  # drop creators until a one-sentence abstract fits the size bound
        parts[3] = f"<creators>{''.join(creators)}</creators>"
        core = "".join(parts)
        fixed = len((core + description_open + description_close + tail).encode())
        if fixed + 120 <= MAX_RESOURCE_BYTES or len(creators) == 1:
            break
        creators.pop()
    target = rng.randint(MIN_RESOURCE_BYTES, MAX_RESOURCE_BYTES)
    sentences = [_sentence(rng, rng.randint(6, 16))]
    length = len(sentences[0])
    while fixed + length < target:
        sentence = _sentence(rng, rng.randint(6, 16))
        sentences.append(sentence)
        length += len(sentence) + 1
    abstract = " ".join(sentences)
    budget = MAX_RESOURCE_BYTES - fixed  # the abstract is ASCII: characters are bytes
    if len(abstract) > budget:
        abstract = abstract[: max(budget - 1, 1)].rstrip() + "."
    xml = core + description_open + abstract + description_close + tail
    return GeneratedResource(doi=doi, resource_type_general=general, xml=xml.encode())
