"""A small paged OAI-PMH source behind httpx.MockTransport, with switchable faults.

It holds a fixed set of records and answers Identify, ListRecords, ListIdentifiers and
GetRecord with from/until/set filtering and resumption tokens, and ListSets (one page), so
that a fault test can compare what a harvest got with exactly what the source holds.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from xml.sax.saxutils import escape

import httpx

OAI_OPEN = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    '<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/" '
    'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">'
    "<responseDate>2026-01-01T00:00:00Z</responseDate>"
    '<request verb="{verb}">http://fake.test/oai</request>'
)
OAI_CLOSE = "</OAI-PMH>"
BASE_URL = "http://fake.test/oai"

# PHP endpoints (OJS, older EPrints add-ons) with display_errors on print the script's warnings
# and notices where it meets them, before or after its output: as text on the command line's
# format, as markup on the web's.
PHP_TEXT_WARNING = (
    b"\nDeprecated: Creation of dynamic property OAIDAO::$oai is deprecated in "
    b"/var/www/ojs/classes/oai/OAIDAO.php on line 42\n"
)
PHP_MARKUP_WARNING = (
    b'<br />\n<b>Warning</b>:  Undefined array key "set" in <b>/var/www/oai/index.php'
    b"</b> on line <b>118</b><br />\n"
)


@dataclass
class FakeRecord:
    identifier: str
    datestamp: str  # seconds form
    deleted: bool = False
    sets: list[str] = field(default_factory=list)
    title: str = "A title"
    raw_metadata: str | None = None  # replaces the generated oai_dc payload verbatim

    def metadata_xml(self) -> str:
        if self.raw_metadata is not None:
            return self.raw_metadata
        return (
            '<oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" '
            'xmlns:dc="http://purl.org/dc/elements/1.1/" '
            'xsi:schemaLocation="http://www.openarchives.org/OAI/2.0/oai_dc/ '
            'http://www.openarchives.org/OAI/2.0/oai_dc.xsd">'
            f"<dc:title>{escape(self.title)}</dc:title>"
            f"<dc:identifier>{escape(self.identifier)}</dc:identifier>"
            "</oai_dc:dc>"
        )


def make_records(count: int, *, day: int = 1) -> list[FakeRecord]:
    """`count` live records spread over one day of 2024-03, deliberately not in order."""
    records = []
    for number in range(count):
        second = (number * 7919) % 86400  # scrambled times within the day
        stamp = datetime(2024, 3, day, tzinfo=UTC).timestamp() + second
        records.append(
            FakeRecord(
                identifier=f"oai:fake.test:{day}-{number}",
                datestamp=datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                title=f"Record {number} ✓",
            )
        )
    return records


# A fault turns the would-be response into another one (or raises a transport error).
Fault = Callable[[httpx.Request, httpx.Response], httpx.Response]


class FakeSource:
    def __init__(
        self,
        records: list[FakeRecord],
        *,
        page_size: int = 3,
        granularity: str = "seconds",
        deleted_record: str = "persistent",
    ) -> None:
        self.records = records
        self.page_size = page_size
        self.granularity = granularity
        self.deleted_record = deleted_record
        self.requests: list[httpx.Request] = []
        self.faults: dict[int, Fault] = {}  # request number (1-based) -> fault
        self.every: tuple[int, Fault] | None = None  # every Nth request -> fault
        self.token_epoch = 0
        self.response_headers: dict[str, str] = {}
        self.identify_base_url = BASE_URL  # the baseURL its Identify names
        self.sets: list[str] | None = None  # what ListSets lists (None: its records' sets)

    # ---- plumbing -------------------------------------------------------------------
    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        number = len(self.requests)
        response = self.answer(request)
        fault = self.faults.get(number)
        if fault is None and self.every and number % self.every[0] == 0:
            fault = self.every[1]
        return fault(request, response) if fault else response

    @property
    def verbs(self) -> list[str]:
        return [request.url.params.get("verb", "") for request in self.requests]

    @property
    def list_dates(self) -> list[tuple[str | None, str | None]]:
        """The from and until of each list's first request (its token requests carry none)."""
        return [
            (request.url.params.get("from"), request.url.params.get("until"))
            for request in self.requests
            if "resumptionToken" not in request.url.params
        ]

    # ---- the protocol ---------------------------------------------------------------
    def answer(self, request: httpx.Request) -> httpx.Response:
        params = request.url.params
        verb = params.get("verb")
        if verb == "Identify":
            granularity = "YYYY-MM-DD" if self.granularity == "day" else "YYYY-MM-DDThh:mm:ssZ"
            body = (
                "<Identify><repositoryName>Fake</repositoryName>"
                f"<baseURL>{escape(self.identify_base_url)}</baseURL>"
                "<protocolVersion>2.0</protocolVersion>"
                "<adminEmail>a@fake.test</adminEmail>"
                "<earliestDatestamp>2024-01-01T00:00:00Z</earliestDatestamp>"
                f"<deletedRecord>{self.deleted_record}</deletedRecord>"
                f"<granularity>{granularity}</granularity></Identify>"
            )
            return self.xml(verb, body)
        if verb == "GetRecord":
            for record in self.records:
                if record.identifier == params.get("identifier"):
                    return self.xml(verb, f"<GetRecord>{self.record_xml(record)}</GetRecord>")
            return self.error("idDoesNotExist", "No matching identifier", status=422)
        if verb in ("ListRecords", "ListIdentifiers"):
            return self.list_response(verb, params)
        if verb == "ListSets":
            specs = self.sets
            if specs is None:
                specs = sorted({spec for record in self.records for spec in record.sets})
            if not specs:
                return self.error("noSetHierarchy", "This repository does not support sets")
            listed = "".join(
                f"<set><setSpec>{escape(s)}</setSpec><setName>{escape(s)}</setName></set>"
                for s in specs
            )
            return self.xml(verb, f"<ListSets>{listed}</ListSets>")
        return self.error("badVerb", "Illegal verb", status=400)

    def list_response(self, verb: str, params: httpx.QueryParams) -> httpx.Response:
        if "resumptionToken" in params:
            try:
                state = json.loads(base64.urlsafe_b64decode(params["resumptionToken"]))
            except ValueError:
                return self.error("badResumptionToken", "invalid token", status=422)
            if state["epoch"] != self.token_epoch:
                return self.error("badResumptionToken", "expired token", status=422)
        else:
            if params.get("metadataPrefix") != "oai_dc":
                return self.error("cannotDisseminateFormat", "only oai_dc", status=422)
            state = {
                "from": params.get("from"),
                "until": params.get("until"),
                "set": params.get("set"),
                "offset": 0,
                "epoch": self.token_epoch,
            }
        matching = [r for r in self.records if self.selected(r, state)]
        if not matching:
            return self.error("noRecordsMatch", "", status=422)
        offset = state["offset"]
        chunk = matching[offset : offset + self.page_size]
        items = "".join(
            self.record_xml(r) if verb == "ListRecords" else self.header_xml(r) for r in chunk
        )
        token = ""
        if offset + self.page_size < len(matching):
            following = dict(state, offset=offset + self.page_size)
            encoded = base64.urlsafe_b64encode(json.dumps(following).encode()).decode()
            token = (
                f'<resumptionToken cursor="{offset}" completeListSize="{len(matching)}">'
                f"{encoded}</resumptionToken>"
            )
        elif offset:
            token = f'<resumptionToken cursor="{offset}" completeListSize="{len(matching)}"/>'
        return self.xml(verb, f"<{verb}>{items}{token}</{verb}>")

    def granule(self, datestamp: str) -> str:
        return datestamp[:10] if self.granularity == "day" else datestamp

    def selected(self, record: FakeRecord, state: dict) -> bool:
        """By the granularity of each bound: `until=2024-03-01` takes that whole day."""
        stamp = self.granule(record.datestamp)
        first, last = state.get("from"), state.get("until")
        if first and stamp[: len(first)] < first:
            return False
        if last and stamp[: len(last)] > last:
            return False
        return not (state.get("set") and state["set"] not in record.sets)

    def header_xml(self, record: FakeRecord) -> str:
        status = ' status="deleted"' if record.deleted else ""
        sets = "".join(f"<setSpec>{s}</setSpec>" for s in record.sets)
        return (
            f"<header{status}><identifier>{record.identifier}</identifier>"
            f"<datestamp>{self.granule(record.datestamp)}</datestamp>{sets}</header>"
        )

    def record_xml(self, record: FakeRecord) -> str:
        metadata = "" if record.deleted else f"<metadata>{record.metadata_xml()}</metadata>"
        return f"<record>{self.header_xml(record)}{metadata}</record>"

    def xml(self, verb: str, body: str, status: int = 200) -> httpx.Response:
        text = OAI_OPEN.format(verb=verb) + body + OAI_CLOSE
        return httpx.Response(
            status,
            content=text.encode("utf-8"),
            headers={"content-type": "text/xml; charset=utf-8", **self.response_headers},
        )

    def error(self, code: str, message: str, status: int = 200) -> httpx.Response:
        return self.xml("", f'<error code="{code}">{escape(message)}</error>', status)


class SecondsRefusedSource(FakeSource):
    """Declares `YYYY-MM-DDThh:mm:ssZ` in Identify but answers badArgument to a from/until
    in seconds, as DSpace, EPrints and OJS installs whose Identify says more than they take
    (their messages vary: "Illegal until parameter", "Invalid date given in until
    parameter")."""

    def list_response(self, verb: str, params: httpx.QueryParams) -> httpx.Response:
        for name in ("from", "until"):
            if "T" in params.get(name, ""):
                return self.error("badArgument", f"Illegal {name} parameter")
        return super().list_response(verb, params)


class SetBlindSizeSource(FakeSource):
    """Filters a list by set but announces, as its completeListSize, the size of the same list
    without the set (the whole source in that window), as some sources count before they
    filter."""

    def list_response(self, verb: str, params: httpx.QueryParams) -> httpx.Response:
        response = super().list_response(verb, params)
        state = {"from": params.get("from"), "until": params.get("until")}
        if "resumptionToken" in params:
            try:
                state = json.loads(base64.urlsafe_b64decode(params["resumptionToken"]))
            except ValueError:
                return response  # refused as a bad token
        whole = sum(1 for r in self.records if self.selected(r, {**state, "set": None}))
        size = b'completeListSize="%d"' % whole
        body = re.sub(rb'completeListSize="\d+"', size, response.content)
        return httpx.Response(response.status_code, content=body, headers=response.headers)


class DateBlindSource(FakeSource):
    """Lists every record whatever from/until asks for (a home-grown endpoint, or one that
    selects by another date than the datestamps it sends)."""

    def selected(self, record: FakeRecord, state: dict) -> bool:
        return super().selected(record, {**state, "from": None, "until": None})


class ShortCountSource(FakeSource):
    """Announces ``extra`` records more than it sends (its completeListSize counts records
    its pages leave out), so its last page still names a resumption token, which it answers
    with noRecordsMatch, every time at the same point of the list."""

    PAST_THE_END = "past-the-end"

    def __init__(self, *args: object, extra: int = 4, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.extra = extra
        self.refused_with = "noRecordsMatch"  # the answer to the last page's token

    def list_response(self, verb: str, params: httpx.QueryParams) -> httpx.Response:
        if params.get("resumptionToken") == self.PAST_THE_END:
            return self.error(self.refused_with, "", status=422)
        response = super().list_response(verb, params)
        body = re.sub(
            rb'completeListSize="(\d+)"',
            lambda m: b'completeListSize="%d"' % (int(m[1]) + self.extra),
            response.content,
        )
        token = f">{self.PAST_THE_END}</resumptionToken>".encode()
        body = re.sub(rb"(<resumptionToken [^>]*)/>", rb"\1" + token, body)
        return httpx.Response(response.status_code, content=body, headers=response.headers)


class OpaqueTokenSource(FakeSource):
    """Issues a new random-looking token with every page, as sources that key tokens to
    server-side state do (Invenio, DSpace): an answer sent again carries a token never
    seen before, though it names a place in the list already read."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.issued: dict[str, str] = {}  # opaque token -> the token FakeSource reads

    def list_response(self, verb: str, params: httpx.QueryParams) -> httpx.Response:
        if "resumptionToken" in params:
            known = self.issued.get(params["resumptionToken"])
            if known is None:
                return self.error("badResumptionToken", "unknown token", status=422)
            params = params.set("resumptionToken", known)
        response = super().list_response(verb, params)

        def issue(match: re.Match[bytes]) -> bytes:
            opaque = f"t{len(self.issued)}"
            self.issued[opaque] = match[2].decode()
            return match[1] + opaque.encode() + b"</resumptionToken>"

        body = re.sub(
            rb"(<resumptionToken[^>/]*>)([^<]+)</resumptionToken>", issue, response.content
        )
        return httpx.Response(response.status_code, content=body, headers=response.headers)


class EchoingSource(FakeSource):
    """Echoes each request's arguments in its <request> element, as OAI-PMH asks and real
    sources do (Zenodo, arXiv): `<request verb="ListRecords" resumptionToken="...">`."""

    def answer(self, request: httpx.Request) -> httpx.Response:
        response = super().answer(request)
        echo = "".join(
            f' {name}="{escape(value, {chr(34): "&quot;"})}"'
            for name, value in request.url.params.multi_items()
        )
        body = re.sub(rb"<request [^>]*>", f"<request{echo}>".encode(), response.content, count=1)
        return httpx.Response(response.status_code, content=body, headers=response.headers)


# ---- faults ------------------------------------------------------------------------------


def unavailable(retry_after: str | None = "2") -> Fault:
    def fault(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        headers = {"retry-after": retry_after} if retry_after is not None else {}
        return httpx.Response(503, text="Service Unavailable", headers=headers)

    return fault


def status(code: int) -> Fault:
    return lambda request, response: httpx.Response(code, text=f"HTTP {code}")


def drop_connection(request: httpx.Request, response: httpx.Response) -> httpx.Response:
    raise httpx.RemoteProtocolError("Server disconnected without sending a response.")


def timeout(request: httpx.Request, response: httpx.Response) -> httpx.Response:
    raise httpx.ReadTimeout("timed out", request=request)


def not_xml(request: httpx.Request, response: httpx.Response) -> httpx.Response:
    return httpx.Response(200, text="Internal error: database is gone", headers=response.headers)


def html_page(request: httpx.Request, response: httpx.Response) -> httpx.Response:
    html = "<html><head><title>Error</title></head><body><p>Proxy error</p></body></html>"
    return httpx.Response(200, text=html, headers={"content-type": "text/html"})


def truncated(request: httpx.Request, response: httpx.Response) -> httpx.Response:
    body = response.content
    return httpx.Response(200, content=body[: int(len(body) * 0.6)], headers=response.headers)


def transform_body(change: Callable[[bytes], bytes]) -> Fault:
    def fault(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        return httpx.Response(
            response.status_code, content=change(response.content), headers=response.headers
        )

    return fault


def expire_tokens(source: FakeSource) -> Fault:
    """The server "restarts": every token issued so far becomes invalid, this one included."""

    def fault(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        source.token_epoch += 1
        return source.answer(request)

    return fault


def compressed(
    times: int, header: str | None, compress: Callable[[bytes], bytes] = gzip.compress
) -> Fault:
    """The body ``compress``ed ``times`` times, labelled with Content-Encoding ``header``."""

    def fault(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        body = response.content
        for _ in range(times):
            body = compress(body)
        headers = {"content-type": "text/xml; charset=utf-8"}
        if header:
            headers["content-encoding"] = header
        # as a network transport hands it over: not read, so not decoded yet
        stream = httpx.ByteStream(body)
        return httpx.Response(response.status_code, stream=stream, headers=headers)

    return fault


def no_records_match(request: httpx.Request, response: httpx.Response) -> httpx.Response:
    return FakeSource([]).error("noRecordsMatch", "", status=422)


def oai_error(code: str, status: int = 200, message: str = "said the fault") -> Fault:
    """An OAI-PMH ``<error>`` in place of the answer, with HTTP ``status``."""
    return lambda request, response: FakeSource([]).error(code, message, status=status)


def illegal_characters(request: httpx.Request, response: httpx.Response) -> httpx.Response:
    """A literal U+0001 and references illegal in XML 1.0 in every title "Record ..."."""
    dirty = "\x01&#1;&#xFFFE;&#xD800;&#x1F;"
    return transform_body(lambda b: b.replace(b"Record ", f"Rec{dirty}ord ".encode()))(
        request, response
    )


def answer_again(source: FakeSource, back: int) -> Fault:
    """The answer to the request `back` requests before this one (a page sent again by a
    cache or a confused server), with whatever token that answer carries."""

    def fault(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        if len(source.requests) <= back:
            return response
        return source.answer(source.requests[-1 - back])

    return fault


def repeat_token(request: httpx.Request, response: httpx.Response) -> httpx.Response:
    """The page names as its next token the very token it was asked with (a loop)."""
    token = request.url.params.get("resumptionToken")
    if token is None:
        return response
    return transform_body(
        lambda body: re.sub(
            rb"(<resumptionToken[^>/]*>)[^<]*(</resumptionToken>)",
            lambda match: match[1] + escape(token).encode() + match[2],
            body,
        )
    )(request, response)


def empty_pages(complete_list_size: int | None = None) -> Fault:
    """A page without records whose token leads to another such page (while the fault
    lasts; after it, the source does not know that token)."""

    def fault(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        verb = request.url.params.get("verb", "ListRecords")
        if verb not in ("ListRecords", "ListIdentifiers"):
            return response
        size = "" if complete_list_size is None else f' completeListSize="{complete_list_size}"'
        token = f'<resumptionToken cursor="0"{size}>empty{id(request)}</resumptionToken>'
        return FakeSource([]).xml(verb, f"<{verb}>{token}</{verb}>")

    return fault


def redirect(code: int) -> Fault:
    """Redirect to the same query at another path (a moved endpoint, a proxy)."""

    def fault(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        moved = request.url.copy_with(path="/moved/oai")
        return httpx.Response(code, headers={"location": str(moved)})

    return fault


def on_tokens(fault: Fault) -> Fault:
    """`fault` only for requests carrying a resumption token; the others are answered."""
    return lambda request, response: (
        fault(request, response) if "resumptionToken" in request.url.params else response
    )


class DaysRefusedSource(FakeSource):
    """Answers badArgument to a from/until by day, which every OAI-PMH repository must take:
    DSpace's XOAI before DSpace/xoai#34 ("requests of the form ...&from=2014-09-08 produced
    <error code="badArgument">Invalid date given in until parameter</error>"), whatever the
    granularity its Identify declares."""

    def list_response(self, verb: str, params: httpx.QueryParams) -> httpx.Response:
        for name in ("from", "until"):
            if name in params and "T" not in params[name]:
                return self.error("badArgument", "Invalid date given in until parameter")
        return super().list_response(verb, params)


class PrefixWithTokenSource(FakeSource):
    """Refuses a resumption token sent alone, as the protocol wants it, asking for the
    metadata prefix too: pycsw (geopython/pycsw#317, "Missing metadataprefix parameter" to
    Omeka's token request), and the provider of paperhive/oai-pmh#12 ("ListRecords verb
    must receive the metadataPrefix parameter")."""

    def list_response(self, verb: str, params: httpx.QueryParams) -> httpx.Response:
        if "resumptionToken" in params and "metadataPrefix" not in params:
            return self.error("badArgument", "Missing metadataprefix parameter")
        return super().list_response(verb, params)
