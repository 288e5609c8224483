"""The harvester model's validation: every kind of bad input names its field."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from oai_pipeline.harvesters.model import Harvester, describe_validation_error
from oai_pipeline.harvesters.plugins import RDM_MODEL, parse_spec

BASE = {"id": "zenodo", "base_url": "https://zenodo.org/oai2d", "metadata_prefix": "oai_dc"}


def _problem(**changes) -> tuple[str, str]:
    with pytest.raises(ValidationError) as raised:
        Harvester.from_input(BASE | changes)
    [error] = raised.value.errors()
    return ".".join(str(p) for p in error["loc"]), error["msg"]


def test_defaults():
    harvester = Harvester.from_input(BASE)
    assert harvester.loader == "oai-pmh"
    # no model, transformer or writer given: the default model's
    assert harvester.transformers == [RDM_MODEL.transformer]
    assert harvester.writers == [RDM_MODEL.writer]
    assert harvester.batch_size == 500 and harvester.rate_limit_per_minute is None


@pytest.mark.parametrize("bad", ["Zenodo", "-x", "_x", "a|b", "a,b", "a/b", "a.b", "", "a b"])
def test_bad_ids(bad):
    field, message = _problem(id=bad)
    assert field == "id" and "is not a harvester id" in message


def test_an_id_that_reads_as_a_window_is_refused():
    """`2024-01-02` would make `2024-01-02|2024-01-03` a key of either dimension order."""
    field, message = _problem(id="2024-01-02")
    assert field == "id" and "reads as a date" in message


@pytest.mark.parametrize("good", ["zenodo", "0day", "a_b-c", "x", "2024-01", "zenodo-2024-01-02"])
def test_good_ids(good):
    assert Harvester.from_input(BASE | {"id": good}).id == good


@pytest.mark.parametrize(
    "bad", ["ftp://example.org/oai", "zenodo.org/oai2d", "https://", "file:///etc", "http://a b"]
)
def test_base_url_must_be_http(bad):
    assert _problem(base_url=bad) == ("base_url", f"Value error, {bad!r} is not an http(s) URL")


@pytest.mark.parametrize("port", ["abc", "99999", "0", "-1", "+80"])
def test_base_url_port_must_be_a_port_number(port):
    field, message = _problem(base_url=f"http://example.org:{port}/oai")
    assert field == "base_url" and "the port must be a number from 1 to 65535" in message


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ("http://example.org/oai\x01", "non-printable ASCII character"),
        ("http://example.org/o\tai", "non-printable ASCII character"),
        ("http://\u200b/oai", "Invalid IDNA hostname"),
    ],
)
def test_base_url_no_request_can_go_to_is_refused(bad, reason):
    """Before, it was registered and every harvest of it failed at its first request."""
    field, message = _problem(base_url=bad)
    assert field == "base_url" and f"{bad!r} is not a URL a request can go to" in message
    assert reason in message


def test_ids_fit_the_state_store_column():
    assert Harvester.from_input(BASE | {"id": "a" * 200}).id == "a" * 200
    field, message = _problem(id="a" * 201)
    assert field == "id" and "at most 200 characters, not 201" in message


def test_stored_harvesters_from_before_the_port_and_length_checks_still_load():
    """Like an uninstalled plug-in, they must not hide the registry: list, update, delete."""
    stored = Harvester.from_stored(BASE | {"id": "a" * 300, "base_url": "http://x.org:abc/oai"})
    assert stored.base_url == "http://x.org:abc/oai"
    with pytest.raises(ValidationError):
        Harvester.from_stored(BASE | {"id": "a b"})  # the naming rule itself still holds


@pytest.mark.parametrize(
    ("changes", "field", "fragment"),
    [
        (
            {"loader": "ftp-reader"},
            "loader",
            "unknown reader 'ftp-reader' (known readers: oai-pmh)",
        ),
        ({"transformers": ["nope"]}, "transformers.0", "unknown transformer 'nope'"),
        ({"writers": ["oai-service", "s3"]}, "writers.1", "unknown writer 's3'"),
        ({"writers": ["oai-service{model:}"]}, "writers.0", "do not parse as JSON5"),
        ({"writers": ["oai-service{publish: 'sometimes'}"]}, "writers.0", "rejects its options"),
        ({"transformers": ["oai-import{bogus: 1}"]}, "transformers.0", "rejects its options"),
        ({"loader": "oai-pmh{page_size: 'x'}"}, "loader", "rejects its options"),
        ({"harvest_managers": ["not-an-address"]}, "harvest_managers", "is not an e-mail"),
        ({"rate_limit_per_minute": 0}, "rate_limit_per_minute", "greater than 0"),
        ({"batch_size": 0}, "batch_size", "between 1 and 10000"),
        ({"batch_size": 10001}, "batch_size", "between 1 and 10000"),
        ({"metadata_prefix": "oai dc"}, "metadata_prefix", "one word"),
        ({"colour": "red"}, "colour", "Extra inputs are not permitted"),
    ],
)
def test_invalid_fields_are_named(changes, field, fragment):
    found_field, message = _problem(**changes)
    assert found_field == field
    assert fragment in message


def test_model_fills_transformer_and_writer_and_community_goes_to_writers():
    harvester = Harvester.from_input(BASE, model="rdm", community="cesnet")
    assert parse_spec(harvester.transformers[0]).options == {"model": "rdm"}
    [writer] = harvester.writers
    assert parse_spec(writer).name == "oai-service"
    assert parse_spec(writer).options == {"model": "rdm", "community": "cesnet"}


def test_explicit_transformers_win_over_the_model():
    harvester = Harvester.from_input(BASE | {"transformers": ["upper-title"]}, model="rdm")
    assert harvester.transformers == ["upper-title"]
    assert parse_spec(harvester.writers[0]).name == "oai-service"


def test_model_and_community_errors_name_their_field():
    with pytest.raises(ValidationError) as raised:
        Harvester.from_input(BASE, model="nope")
    assert describe_validation_error(raised.value).startswith("invalid model: ")
    with pytest.raises(ValidationError) as raised:
        Harvester.from_input(BASE | {"transformers": [RDM_MODEL.transformer]}, community="cesnet")
    assert describe_validation_error(raised.value).startswith("invalid community: ")


def test_a_community_alone_goes_to_the_default_models_writer():
    [writer] = Harvester.from_input(BASE, community="cesnet").writers
    assert parse_spec(writer).options == {"model": "rdm", "community": "cesnet"}


def test_stored_harvesters_load_without_their_plugins():
    stored = BASE | {"transformers": ["uninstalled{x: 1}"]}
    assert Harvester.from_stored(stored).transformers == ["uninstalled{x: 1}"]
    with pytest.raises(ValidationError):
        Harvester.from_input(stored)


def test_describe_validation_error_is_one_line():
    with pytest.raises(ValidationError) as raised:
        Harvester.from_input(BASE | {"id": "A", "base_url": "ftp://x"})
    text = describe_validation_error(raised.value)
    assert "\n" not in text
    assert text.startswith("invalid id: ") and "; base_url: " in text


def test_a_writer_given_twice_is_refused():
    twice = ['oai-service{community:"a"}', 'oai-service{community:"b"}']
    with pytest.raises(ValidationError) as raised:
        Harvester.from_input(BASE | {"transformers": [RDM_MODEL.transformer], "writers": twice})
    assert describe_validation_error(raised.value).startswith(
        "invalid writers: writer 'oai-service' is given more than once"
    )


def test_direct_update_without_publish_is_refused():
    with pytest.raises(ValidationError) as raised:
        Harvester.from_input(
            BASE
            | {
                "transformers": [RDM_MODEL.transformer],
                "writers": ["oai-service{publish: false, direct_update: true}"],
            }
        )
    assert "direct_update replaces the published record" in describe_validation_error(raised.value)
