"""The oai-pmh reader: options, the harvester's endpoint/prefix/set, and the rate-limit override."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from oai_pipeline.harvesters.model import Harvester
from oai_pipeline.oai.reader import OAIPMHReader, OAIPMHReaderOptions, Reader
from oai_pipeline_tests.oai.fake_source import BASE_URL, FakeSource, make_records


def harvester(**fields: object) -> Harvester:
    return Harvester(
        id="fake",
        base_url=BASE_URL,
        metadata_prefix="oai_dc",
        **fields,  # type: ignore[arg-type]
    )


def make_reader(source: FakeSource, options: object = None, **fields: object) -> OAIPMHReader:
    return OAIPMHReader(
        options, harvester(**fields), transport=source.transport(), sleep=lambda s: None
    )


def test_options_are_validated_and_extra_keys_refused() -> None:
    assert OAIPMHReaderOptions().timeout == 60
    with pytest.raises(ValidationError):
        OAIPMHReaderOptions.model_validate({"timeout": 60, "colour": "red"})
    with pytest.raises(ValidationError):
        OAIPMHReaderOptions(timeout=2)  # not above httpx's 5 s default
    with pytest.raises(ValidationError):
        make_reader(FakeSource([]), {"max_retries": -1})
    assert OAIPMHReader.Options is OAIPMHReaderOptions
    assert issubclass(OAIPMHReader, Reader)


def test_identify_is_asked_once_and_remembered() -> None:
    source = FakeSource(make_records(2), granularity="day", deleted_record="transient")
    reader = make_reader(source)
    assert reader.identify().granularity == "day"
    assert reader.identify().deleted_record == "transient"
    assert source.verbs == ["Identify"]


def test_sweep_uses_the_harvesters_prefix_and_set_and_checkpoints() -> None:
    records = make_records(6)
    for record in records[:4]:
        record.sets = ["physics"]
    source = FakeSource(records, page_size=3)
    saved = []
    with make_reader(source, setspec="physics") as reader:
        pages = list(
            reader.sweep(
                from_="2024-03-01", until=None, checkpoint=None, save_checkpoint=saved.append
            )
        )
    assert {r.identifier for p in pages for r in p.records} == {r.identifier for r in records[:4]}
    first = source.requests[0].url.params
    assert (first["metadataPrefix"], first["set"], first["from"]) == (
        "oai_dc",
        "physics",
        "2024-03-01",
    )
    assert [c.set_spec for c in saved] == ["physics", "physics"]


def test_list_identifiers_and_get_records() -> None:
    records = make_records(5)
    records[1].deleted = True
    source = FakeSource(records, page_size=2)
    reader = make_reader(source)
    headers = [r for page in reader.list_identifiers() for r in page.records]
    assert [h.identifier for h in headers] == [r.identifier for r in records]
    assert headers[1].deleted
    got = list(reader.get_records([records[0].identifier, "oai:fake.test:gone"]))
    assert got[0].error is None and got[0].xml
    assert got[1].error.type == "idDoesNotExist"


def test_rate_limit_precedence_run_option_then_reader_option_then_harvester() -> None:
    source = FakeSource([])
    reader = make_reader(source, rate_limit_per_minute=10)
    assert reader.client.rate_limit_per_minute == 10
    reader = make_reader(source, {"rate_limit_per_minute": 20}, rate_limit_per_minute=10)
    assert reader.client.rate_limit_per_minute == 20
    reader.set_rate_limit(5)
    assert reader.client.rate_limit_per_minute == 5
    reader.set_rate_limit(None)
    assert reader.client.rate_limit_per_minute == 20


def test_options_from_a_plain_mapping_or_another_model() -> None:
    source = FakeSource([])
    reader = make_reader(source, {"timeout": 120, "user_agent": "me (+mailto:me@example.org)"})
    assert reader.options.timeout == 120
    list(reader.get_records(["oai:x"]))
    assert source.requests[0].headers["user-agent"] == "me (+mailto:me@example.org)"


def test_fetching_ahead_is_a_reader_option_on_by_default() -> None:
    assert OAIPMHReaderOptions().prefetch is True
    source = FakeSource(make_records(6), page_size=3)
    with make_reader(source, {"prefetch": False}) as reader:
        pages = reader.sweep(
            from_=None, until=None, checkpoint=None, save_checkpoint=lambda c: None
        )
        next(pages)
        assert len(source.requests) == 1  # nothing requested ahead of the caller
        pages.close()
