"""The output schema: a record shaped like an InvenioRDM record, the de facto schema of the field.

Imports build plain dicts; `RDMRecord.model_validate` is the single gate every record passes before
it is written, so a wrong shape becomes a `validation` error with the field path. Multilingual
strings (rights and award titles) are `{lang: text}` dicts as in InvenioRDM.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from oai_pipeline.doi import DOI as _DOI
from oai_pipeline.doi import MAX_DOI_LENGTH
from oai_pipeline.transform.dates import normalize_date
from oai_pipeline.transform.failure import shown
from oai_pipeline.transform.normalize import ORCID as _ORCID
from oai_pipeline.transform.normalize import ROR as _ROR


def _edtf(value: str) -> str:
    return normalize_date(value)


EDTFDate = Annotated[str, AfterValidator(_edtf)]
NonEmpty = Annotated[str, Field(min_length=1)]
I18nStrings = dict[str, NonEmpty]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class VocabularyRef(_Model):
    """A term of a controlled vocabulary (resource type, role, language, relation type …)."""

    id: NonEmpty


# The schemes whose identifiers `Identifier` checks, with the form each must have.
_SCHEME_PATTERNS = {"orcid": _ORCID, "ror": _ROR}


class Identifier(_Model):
    identifier: NonEmpty
    scheme: NonEmpty

    @model_validator(mode="after")
    def _known_schemes_are_well_formed(self) -> Identifier:
        pattern = _SCHEME_PATTERNS.get(self.scheme)
        if pattern is not None and not pattern.match(self.identifier):
            raise ValueError(f"{shown(self.identifier)} is not a valid {self.scheme} identifier")
        return self


class PersonOrOrg(_Model):
    type: Literal["personal", "organizational"]
    name: NonEmpty | None = None
    given_name: NonEmpty | None = None
    family_name: NonEmpty | None = None
    identifiers: list[Identifier] = []

    @model_validator(mode="after")
    def _has_a_name(self) -> PersonOrOrg:
        if self.type == "personal":
            if self.family_name is None:
                raise ValueError("a person needs a family_name")
            if self.name is None:
                self.name = (
                    f"{self.family_name}, {self.given_name}"
                    if self.given_name
                    else self.family_name
                )
        elif self.name is None:
            raise ValueError("an organisation needs a name")
        return self


class Affiliation(_Model):
    id: NonEmpty | None = None  # a bare ROR id when the source gives one
    name: NonEmpty | None = None

    @model_validator(mode="after")
    def _id_or_name(self) -> Affiliation:
        if self.id is None and self.name is None:
            raise ValueError("an affiliation needs an id or a name")
        if self.id is not None and not _ROR.match(self.id):
            raise ValueError(f"{shown(self.id)} is not a ROR id")
        return self


class Creatibutor(_Model):
    """A creator or a contributor (contributors carry a role)."""

    person_or_org: PersonOrOrg
    affiliations: list[Affiliation] = []
    role: VocabularyRef | None = None


class AdditionalTitle(_Model):
    title: NonEmpty
    type: VocabularyRef
    lang: VocabularyRef | None = None


class AdditionalDescription(_Model):
    description: NonEmpty
    type: VocabularyRef
    lang: VocabularyRef | None = None


class Subject(_Model):
    subject: NonEmpty
    scheme: NonEmpty | None = None


class Right(_Model):
    """A license (`id` like `cc-by-4.0`) or a free-text rights statement."""

    id: NonEmpty | None = None
    title: I18nStrings | None = None
    description: I18nStrings | None = None
    link: NonEmpty | None = None

    @model_validator(mode="after")
    def _id_or_title(self) -> Right:
        if self.id is None and not self.title:
            raise ValueError("rights need an id or a title")
        return self


class Date(_Model):
    date: EDTFDate
    type: VocabularyRef
    description: NonEmpty | None = None


class RelatedIdentifier(_Model):
    identifier: NonEmpty
    scheme: NonEmpty
    relation_type: VocabularyRef
    resource_type: VocabularyRef | None = None


class Funder(_Model):
    id: NonEmpty | None = None  # a bare ROR id
    name: NonEmpty | None = None
    identifiers: list[Identifier] = []  # e.g. the Crossref Funder ID, kept as a DOI

    @model_validator(mode="after")
    def _id_or_name(self) -> Funder:
        if self.id is None and self.name is None:
            raise ValueError("a funder needs an id or a name")
        return self


class Award(_Model):
    number: NonEmpty | None = None
    title: I18nStrings | None = None
    identifiers: list[Identifier] = []


class Funding(_Model):
    funder: Funder
    award: Award | None = None


class LocationFeature(_Model):
    place: NonEmpty | None = None
    description: NonEmpty | None = None
    geometry: dict[str, Any] | None = None  # GeoJSON: Point or Polygon


class Locations(_Model):
    features: list[LocationFeature]


class RDMMetadata(_Model):
    resource_type: VocabularyRef
    title: NonEmpty
    additional_titles: list[AdditionalTitle] = []
    creators: Annotated[list[Creatibutor], Field(min_length=1)]
    contributors: list[Creatibutor] = []
    publication_date: EDTFDate
    description: NonEmpty | None = None
    additional_descriptions: list[AdditionalDescription] = []
    subjects: list[Subject] = []
    rights: list[Right] = []
    languages: list[VocabularyRef] = []
    publisher: NonEmpty | None = None
    dates: list[Date] = []
    identifiers: list[Identifier] = []
    related_identifiers: list[RelatedIdentifier] = []
    sizes: list[NonEmpty] = []
    formats: list[NonEmpty] = []
    version: NonEmpty | None = None
    funding: list[Funding] = []
    locations: Locations | None = None


class PID(_Model):
    identifier: NonEmpty
    provider: NonEmpty = "external"


class DOI(_Model):
    # A pattern pydantic checks natively (a Python validator costs more per record);
    # oai_import._validate words its error with the rejected value.
    identifier: Annotated[str, Field(pattern=_DOI.pattern, max_length=MAX_DOI_LENGTH)]
    provider: Literal["datacite", "external"] = "external"


class PIDs(BaseModel):
    """`doi` (checked to be a DOI, the key of PID takeover) and any other scheme as a PID."""

    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, PID]

    doi: DOI | None = None


class FileLink(_Model):
    """A file as the source serves it; the target stores the link, never the bytes."""

    url: NonEmpty
    key: NonEmpty | None = None


class Files(_Model):
    enabled: bool = False  # metadata-only in the target: the files stay at the source
    links: list[FileLink] = []


class Communities(_Model):
    ids: list[NonEmpty] = []


class Parent(_Model):
    communities: Communities = Communities()


class RDMRecord(_Model):
    metadata: RDMMetadata
    pids: PIDs = PIDs()
    files: Files = Files()
    parent: Parent | None = None


def error_location(loc: tuple[int | str, ...]) -> str:
    """A pydantic error location as a field path: ('metadata', 'creators', 0, 'x') -> ...[0].x."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path
