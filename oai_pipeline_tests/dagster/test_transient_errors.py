"""Which failures Dagster's retry policy retries: a passing fault, not a source's loop."""

from __future__ import annotations

import httpx
import pytest

from oai_pipeline.defs.assets import _transient
from oai_pipeline.oai.errors import (
    HarvestProtocolError,
    LoopingSource,
    MalformedResponse,
    OversizedResponse,
)
from oai_pipeline_tests.oai.fake_source import (
    FakeSource,
    Fault,
    html_page,
    make_records,
    truncated,
)
from oai_pipeline_tests.oai.test_faults import Harvest
from oai_pipeline_tests.oai.test_server_quirks import _second_page_loops


def _failure(source: FakeSource) -> HarvestProtocolError:
    with pytest.raises(HarvestProtocolError) as failed:
        Harvest(source, max_retries=1).run()
    return failed.value


def _failing_after_the_first_page(fault: Fault) -> HarvestProtocolError:
    """The failure of a harvest whose every request after the first meets ``fault``."""
    source = FakeSource(make_records(9), page_size=3)
    source.faults = {number: fault for number in range(2, 20)}
    return _failure(source)


def test_a_source_looping_short_of_its_list_size_is_not_retried() -> None:
    source = FakeSource(make_records(9), page_size=3)
    source.every = (1, _second_page_loops)
    error = _failure(source)
    assert isinstance(error, LoopingSource)
    assert "not looping" in str(error)
    assert not _transient(error)


def test_a_truncated_page_stays_transient() -> None:
    source = FakeSource(make_records(9), page_size=3)
    source.every = (1, truncated)
    error = _failure(source)
    assert not isinstance(error, LoopingSource)
    assert _transient(error)


def test_an_oversized_response_is_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    """A page over the size bound is that size at every attempt: Dagster's three retries
    spread over minutes only delayed the failure that names max_response_mb."""
    monkeypatch.setattr("oai_pipeline.oai.client.MAX_DOCUMENT_BYTES", 200)
    error = _failure(FakeSource(make_records(4), page_size=4))
    assert isinstance(error, OversizedResponse)
    assert not _transient(error)


def _well_formed_login_page(request: httpx.Request, response: httpx.Response) -> httpx.Response:
    """A single sign-on proxy's answer in front of the endpoint, well-formed XHTML with 200."""
    page = (
        '<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><head><title>Sign'
        "in</title></head><body><form action='/login'></form></body></html>"
    )
    return httpx.Response(200, text=page, headers={"content-type": "text/html"})


def _maintenance_xml(request: httpx.Request, response: httpx.Response) -> httpx.Response:
    page = "<?xml version='1.0'?><status><message>down for maintenance</message></status>"
    return httpx.Response(200, text=page, headers={"content-type": "text/xml"})


@pytest.mark.parametrize(
    "fault",
    [html_page, _well_formed_login_page, _maintenance_xml],
    ids=["html", "login", "other-xml"],
)
def test_a_whole_answer_that_is_not_oai_pmh_the_same_at_every_try_is_not_retried(
    fault: Fault,
) -> None:
    """After a first sound page, the source answers with one and the same whole document that
    is not OAI-PMH at every one of the client's tries (an HTML error or login page sent with
    status 200): asked again by a retried step, it answers it again. Before, Dagster retried
    the step three times, each failing the same way."""
    error = _failing_after_the_first_page(fault)
    assert isinstance(error, MalformedResponse)
    assert "the same at each of 2 tries" in str(error)
    assert not _transient(error)


def test_a_truncated_page_is_malformed_and_transient() -> None:
    error = _failing_after_the_first_page(truncated)
    assert isinstance(error, MalformedResponse) and "not well-formed" in str(error)
    assert _transient(error)


def test_a_web_page_cut_short_at_another_place_each_try_stays_transient() -> None:
    """An HTML page cut by a dropped connection is not the source's answer: the next
    attempt may get the page itself."""
    cuts = iter(range(40, 80, 7))

    def cut_html(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        page = html_page(request, response).content
        return httpx.Response(
            200, content=page[: next(cuts)], headers={"content-type": "text/html"}
        )

    error = _failing_after_the_first_page(cut_html)
    assert isinstance(error, MalformedResponse)
    assert _transient(error)
