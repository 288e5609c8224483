"""The OAI-PMH endpoint the project ships: the demo's source and the tests' counterpart.

`OAIEndpoint` serves the sample set (`load_sample_records`) or generated DataCite records
(`generate_datacite_records`) over real HTTP on loopback, with switchable `Faults`.
"""

from oai_pipeline.sample_endpoint.faults import Faults
from oai_pipeline.sample_endpoint.records import (
    SAMPLE_FIRST_DAY,
    SAMPLE_LAST_DAY,
    EndpointRecord,
    generate_datacite_records,
    load_sample_records,
    records_for_prefix,
)
from oai_pipeline.sample_endpoint.server import OAIEndpoint, serve_forever

__all__ = [
    "SAMPLE_FIRST_DAY",
    "SAMPLE_LAST_DAY",
    "EndpointRecord",
    "Faults",
    "OAIEndpoint",
    "generate_datacite_records",
    "load_sample_records",
    "records_for_prefix",
    "serve_forever",
]
