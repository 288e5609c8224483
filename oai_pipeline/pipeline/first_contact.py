"""Whether a harvester's base URL has ever answered OAI-PMH, told to its reader before it
asks: every path that reads a harvester's source goes through `saved_identify`, so that a
wrong address (a host that does not exist, a web page) fails at once everywhere, not only
where someone remembered to say so."""

from __future__ import annotations

from oai_pipeline.oai.reader import Reader
from oai_pipeline.oai.types import IdentifyInfo
from oai_pipeline.state.store import StateStore


def saved_identify(reader: Reader, state: StateStore, harvester_id: str) -> IdentifyInfo | None:
    """The Identify saved of the harvester's source. None: its base URL never answered
    (never harvested, or changed since), and the reader is told (`Reader.first_contact`):
    a failure no endpoint would show is then a wrong URL, not retried as a passing one."""
    saved = state.get_identify(harvester_id)
    if saved is None:
        reader.first_contact()
    return saved
