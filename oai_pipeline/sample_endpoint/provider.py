"""The OAI-PMH 2.0 data provider behind the sample endpoint: verbs, arguments, paging, tokens.

No HTTP here (see `server.py`): `OAIProvider.handle` turns the request's arguments into a
status and a response body. Records are kept in a deterministic order that is NOT datestamp
order (a hash of the identifier, as unordered as Zenodo's), each record's header is
serialized once, and a page is assembled by joining bytes, so 100,000 records serve fast.

Resumption tokens are opaque, signed with a per-instance secret and carry the query and the
position (the order key of the last record sent), so records added, changed or removed
between pages never shift the list under a harvester. `invalidate_tokens` plays a server
restart: every token issued before it answers badResumptionToken.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import threading
from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Literal
from xml.sax.saxutils import escape, quoteattr

from oai_pipeline.sample_endpoint.formats import KNOWN_FORMATS
from oai_pipeline.sample_endpoint.records import EndpointRecord

Granularity = Literal["day", "seconds"]
DeletedRecordPolicy = Literal["no", "transient", "persistent"]
LastPageToken = Literal["empty", "absent"]

_GRANULARITY_FORMATS = {"day": "YYYY-MM-DD", "seconds": "YYYY-MM-DDThh:mm:ssZ"}
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
_SECONDS = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")
_BAD_TOKEN_MESSAGE = "The value of the resumptionToken argument is invalid or expired."
_TOKEN_LIFETIME = timedelta(hours=1)
_ILLEGAL_TEXT = b"\x01&#1;&#xFFFE;&#xD800;"
_FIRST_TITLE = re.compile(rb"<(?:[\w.-]+:)?title\b[^>]*>")
_FIRST_TEXT = re.compile(rb">(?=[^<\s])")

# verb -> (required arguments, optional arguments); resumptionToken is exclusive.
_VERB_ARGUMENTS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "Identify": (frozenset(), frozenset()),
    "ListMetadataFormats": (frozenset(), frozenset({"identifier"})),
    "ListSets": (frozenset(), frozenset({"resumptionToken"})),
    "GetRecord": (frozenset({"identifier", "metadataPrefix"}), frozenset()),
    "ListIdentifiers": (
        frozenset({"metadataPrefix"}),
        frozenset({"from", "until", "set", "resumptionToken"}),
    ),
    "ListRecords": (
        frozenset({"metadataPrefix"}),
        frozenset({"from", "until", "set", "resumptionToken"}),
    ),
}

_PROLOG = (
    b"<?xml version='1.0' encoding='UTF-8'?>\n"
    b'<?xml-stylesheet type="text/xsl" href="/static/oai2.xsl"?>\n'
    b'<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/" '
    b'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
    b'xsi:schemaLocation="http://www.openarchives.org/OAI/2.0/ '
    b'http://www.openarchives.org/OAI/2.0/OAI-PMH.xsd">'
)


@dataclass(frozen=True)
class ProviderResponse:
    """What to send back: `list_page` marks a served ListRecords/ListIdentifiers page."""

    status: int
    body: bytes
    list_page: bool = False


class OAIError(Exception):
    """One or more OAI-PMH `<error>` elements to answer with."""

    def __init__(self, *errors: tuple[str, str]) -> None:
        super().__init__("; ".join(f"{code}: {message}" for code, message in errors))
        self.errors = list(errors)


@dataclass(slots=True)
class _Entry:
    key: str  # position in the list order
    record: EndpointRecord
    stamp: int  # datestamp, epoch seconds
    sets: frozenset[str]  # set specs and all their ancestors
    header: bytes


@dataclass(frozen=True)
class _ListQuery:
    verb: str
    prefix: str
    low: int | None
    high: int | None
    set_spec: str | None

    def matches(self, entry: _Entry) -> bool:
        if self.low is not None and entry.stamp < self.low:
            return False
        if self.high is not None and entry.stamp > self.high:
            return False
        if self.set_spec is not None and self.set_spec not in entry.sets:
            return False
        return entry.record.has_format(self.prefix)


def order_key(identifier: str) -> str:
    """Where a record sits in every list: by a hash, so neither datestamp nor name order."""
    return hashlib.sha1(identifier.encode()).hexdigest()[:16] + identifier


def _ancestors(set_spec: str) -> Iterable[str]:
    parts = set_spec.split(":")
    return (":".join(parts[:i]) for i in range(1, len(parts) + 1))


def _utc_seconds(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class OAIProvider:
    """An OAI-PMH repository over an in-memory, thread-safe set of records."""

    def __init__(
        self,
        records: Iterable[EndpointRecord],
        *,
        page_size: int = 4,
        granularity: Granularity = "seconds",
        deleted_record: DeletedRecordPolicy = "persistent",
        errors_with_http_422: bool = True,
        repository_name: str = "oai-pipeline sample endpoint",
        earliest_datestamp: datetime | None = None,
        last_page_token: LastPageToken = "empty",
        set_names: Mapping[str, str] | None = None,
        admin_email: str = "oai-pipeline@example.org",
        base_url: str = "http://127.0.0.1/oai",
    ) -> None:
        if page_size < 1:
            raise ValueError("page_size must be at least 1")
        if granularity not in _GRANULARITY_FORMATS:
            raise ValueError(f"granularity must be day or seconds, not {granularity!r}")
        if deleted_record not in ("no", "transient", "persistent"):
            raise ValueError(f"deleted_record must be no/transient/persistent: {deleted_record!r}")
        if last_page_token not in ("empty", "absent"):
            raise ValueError(f"last_page_token must be empty or absent, not {last_page_token!r}")
        if earliest_datestamp is not None and earliest_datestamp.tzinfo is None:
            raise ValueError("earliest_datestamp must be timezone-aware (UTC)")
        self.page_size = page_size
        self.granularity: Granularity = granularity
        self.deleted_record: DeletedRecordPolicy = deleted_record
        self.errors_with_http_422 = errors_with_http_422
        self.repository_name = repository_name
        self.earliest_datestamp = earliest_datestamp
        self.last_page_token: LastPageToken = last_page_token
        self.set_names = dict(set_names or {})
        self.admin_email = admin_email
        self.base_url = base_url
        self._lock = threading.RLock()
        self._secret = secrets.token_bytes(16)
        self._epoch = 0
        self._by_identifier: dict[str, _Entry] = {}
        self._by_key: dict[str, _Entry] = {}
        for record in records:
            if record.identifier in self._by_identifier:
                raise ValueError(f"duplicate identifier {record.identifier}")
            self._store(self._entry(record))
        self._order = sorted(self._by_key)

    # ----------------------------------------------------------------- records

    def _entry(self, record: EndpointRecord) -> _Entry:
        if record.datestamp.tzinfo is None:
            raise ValueError(f"{record.identifier}: datestamp must be timezone-aware (UTC)")
        unknown = set(record.metadata) - set(KNOWN_FORMATS)
        if unknown:
            raise ValueError(
                f"{record.identifier}: unknown metadata prefix(es) {sorted(unknown)}; "
                f"the endpoint serves {', '.join(KNOWN_FORMATS)}"
            )
        stamp = int(record.datestamp.timestamp())
        status = b' status="deleted"' if record.deleted else b""
        set_specs = "".join(f"<setSpec>{escape(spec)}</setSpec>" for spec in record.set_specs)
        header = (
            f"<identifier>{escape(record.identifier)}</identifier>"
            f"<datestamp>{self._format_stamp(stamp)}</datestamp>{set_specs}</header>"
        ).encode()
        return _Entry(
            key=order_key(record.identifier),
            record=record,
            stamp=stamp,
            sets=frozenset(a for spec in record.set_specs for a in _ancestors(spec)),
            header=b"<header" + status + b">" + header,
        )

    def _store(self, entry: _Entry) -> None:
        self._by_identifier[entry.record.identifier] = entry
        self._by_key[entry.key] = entry

    def upsert(self, record: EndpointRecord) -> None:
        """Add a record or replace the one with its identifier (the caller sets the datestamp)."""
        entry = self._entry(record)
        with self._lock:
            if record.identifier not in self._by_identifier:
                insort(self._order, entry.key)
            self._store(entry)

    def mark_deleted(self, identifier: str, at: datetime | None = None) -> None:
        """Turn a record into a deleted header, its datestamp moved to `at` (default: now)."""
        with self._lock:
            entry = self._by_identifier.get(identifier)
            if entry is None:
                raise KeyError(f"no record {identifier}")
            moment = at or datetime.now(UTC).replace(microsecond=0)
            self.upsert(replace(entry.record, deleted=True, datestamp=moment))

    def remove(self, identifier: str) -> None:
        """Forget a record without a trace, as a source that keeps no deletions does."""
        with self._lock:
            entry = self._by_identifier.pop(identifier, None)
            if entry is None:
                raise KeyError(f"no record {identifier}")
            del self._by_key[entry.key]
            del self._order[bisect_left(self._order, entry.key)]

    def records(self) -> list[EndpointRecord]:
        """The records as they stand, in list order."""
        with self._lock:
            return [self._by_key[key].record for key in self._order]

    def invalidate_tokens(self) -> None:
        """Play a server restart: every resumption token issued so far becomes bad."""
        with self._lock:
            self._epoch += 1

    # ----------------------------------------------------------------- requests

    def handle(
        self,
        params: Mapping[str, list[str]],
        *,
        illegal_characters: bool = False,
        identify_granularity: Granularity | None = None,
        identify_base_url: str | None = None,
        refuse_list_from_cursor: int | None = None,
        unlisted: frozenset[str] = frozenset(),
    ) -> ProviderResponse:
        """Answer one request, given its arguments as `parse_qs` returns them; Identify
        declares `identify_granularity` and `identify_base_url` if given (a lying one);
        ListIdentifiers leaves out the `unlisted` identifiers (a stale identifier index)."""
        verbs = params.get("verb", [])
        if len(verbs) != 1 or verbs[0] not in _VERB_ARGUMENTS:
            message = (
                "the verb argument is missing"
                if not verbs
                else "the verb argument is repeated"
                if len(verbs) > 1
                else f"illegal verb {verbs[0]!r}"
            )
            return self._error_response(OAIError(("badVerb", message)), None, None)
        verb = verbs[0]
        try:
            args = self._check_arguments(verb, params)
        except OAIError as error:
            return self._error_response(error, verb, None)
        try:
            with self._lock:
                if verb == "Identify":
                    return self._ok(
                        verb, args, self._identify(identify_granularity, identify_base_url)
                    )
                if verb == "ListMetadataFormats":
                    return self._ok(verb, args, self._list_metadata_formats(args))
                if verb == "ListSets":
                    return self._ok(verb, args, self._list_sets(args))
                if verb == "GetRecord":
                    return self._ok(verb, args, self._get_record(args, illegal_characters))
                hidden = unlisted if verb == "ListIdentifiers" else frozenset()
                return self._list(verb, args, illegal_characters, refuse_list_from_cursor, hidden)
        except OAIError as error:
            return self._error_response(error, verb, args)

    def _check_arguments(self, verb: str, params: Mapping[str, list[str]]) -> dict[str, str]:
        required, optional = _VERB_ARGUMENTS[verb]
        problems = []
        for name, values in params.items():
            if name == "verb":
                continue
            if name not in required | optional:
                problems.append(("badArgument", f"illegal argument {name!r} for {verb}"))
            elif len(values) != 1:
                problems.append(("badArgument", f"the argument {name!r} is repeated"))
            elif not values[0]:
                problems.append(("badArgument", f"the argument {name!r} is empty"))
        names = set(params) - {"verb"}
        if "resumptionToken" in names:
            if names != {"resumptionToken"}:
                problems.append(("badArgument", "resumptionToken is an exclusive argument"))
        else:
            for name in sorted(required - names):
                problems.append(("badArgument", f"the required argument {name!r} is missing"))
        if problems:
            raise OAIError(*problems)
        return {name: values[0] for name, values in params.items() if name != "verb"}

    # ------------------------------------------------------------------- verbs

    def _identify(self, granularity: Granularity | None, base_url: str | None) -> bytes:
        if self.earliest_datestamp is not None:
            earliest = int(self.earliest_datestamp.timestamp())
        else:
            earliest = min((entry.stamp for entry in self._by_key.values()), default=0)
        return (
            f"<Identify><repositoryName>{escape(self.repository_name)}</repositoryName>"
            f"<baseURL>{escape(base_url or self.base_url)}</baseURL>"
            "<protocolVersion>2.0</protocolVersion>"
            f"<adminEmail>{escape(self.admin_email)}</adminEmail>"
            f"<earliestDatestamp>{self._format_stamp(earliest)}</earliestDatestamp>"
            f"<deletedRecord>{self.deleted_record}</deletedRecord>"
            f"<granularity>{_GRANULARITY_FORMATS[granularity or self.granularity]}</granularity>"
            "</Identify>"
        ).encode()

    def _list_metadata_formats(self, args: dict[str, str]) -> bytes:
        if "identifier" in args:
            entry = self._find(args["identifier"])
            prefixes = [p for p in KNOWN_FORMATS if entry.record.has_format(p)]
            if not prefixes:
                raise OAIError(("noMetadataFormats", f"no formats for {args['identifier']}"))
        else:
            present = {p for entry in self._by_key.values() for p in entry.record.metadata}
            prefixes = [p for p in KNOWN_FORMATS if p in present or not present]
        rows = "".join(
            f"<metadataFormat><metadataPrefix>{fmt.prefix}</metadataPrefix>"
            f"<schema>{fmt.schema}</schema>"
            f"<metadataNamespace>{fmt.namespace}</metadataNamespace></metadataFormat>"
            for fmt in (KNOWN_FORMATS[p] for p in prefixes)
        )
        return f"<ListMetadataFormats>{rows}</ListMetadataFormats>".encode()

    def _all_sets(self) -> list[str]:
        return sorted({spec for entry in self._by_key.values() for spec in entry.sets})

    def _list_sets(self, args: dict[str, str]) -> bytes:
        if "resumptionToken" in args:  # ListSets always fits one response here
            raise OAIError(("badResumptionToken", "this repository issues no ListSets tokens"))
        specs = self._all_sets()
        if not specs:
            raise OAIError(("noSetHierarchy", "this repository does not support sets"))
        rows = "".join(
            f"<set><setSpec>{escape(spec)}</setSpec>"
            f"<setName>{escape(self.set_names.get(spec, spec))}</setName></set>"
            for spec in specs
        )
        return f"<ListSets>{rows}</ListSets>".encode()

    def _get_record(self, args: dict[str, str], illegal_characters: bool) -> bytes:
        prefix = args["metadataPrefix"]
        entry = self._find(args["identifier"])
        if prefix not in KNOWN_FORMATS or not entry.record.has_format(prefix):
            raise OAIError(
                ("cannotDisseminateFormat", f"{args['identifier']} is not available as {prefix}")
            )
        record = self._record_xml(entry, prefix, True, illegal_characters)
        return b"<GetRecord>" + record + b"</GetRecord>"

    def _list(
        self,
        verb: str,
        args: dict[str, str],
        illegal_characters: bool,
        refuse_from_cursor: int | None = None,
        hidden: frozenset[str] = frozenset(),
    ) -> ProviderResponse:
        def listed(entry: _Entry) -> bool:
            return query.matches(entry) and entry.record.identifier not in hidden

        if "resumptionToken" in args:
            query, after, cursor, size = self._decode_token(args["resumptionToken"], verb)
            if refuse_from_cursor is not None and cursor >= refuse_from_cursor:
                return ProviderResponse(403, b"403 Forbidden\n")
            start = bisect_right(self._order, after)
            resumed = True
        else:
            query = self._list_query(verb, args)
            size = sum(1 for key in self._order if listed(self._by_key[key]))
            if size == 0:
                raise OAIError(("noRecordsMatch", "no records match the request"))
            start, cursor, resumed = 0, 0, False
        page: list[_Entry] = []
        more = False  # is there a match after this page?
        for position in range(start, len(self._order)):
            entry = self._by_key[self._order[position]]
            if listed(entry):
                if len(page) == self.page_size:
                    more = True
                    break
                page.append(entry)
        with_metadata = verb == "ListRecords"
        parts = [self._record_xml(e, query.prefix, with_metadata, illegal_characters) for e in page]
        if more:
            token = self._encode_token(query, page[-1].key, cursor + len(page), size)
            expires = _utc_seconds(datetime.now(UTC) + _TOKEN_LIFETIME)
            parts.append(
                f'<resumptionToken expirationDate="{expires}" completeListSize="{size}" '
                f'cursor="{cursor}">{token}</resumptionToken>'.encode()
            )
        elif resumed and self.last_page_token == "empty":
            parts.append(f'<resumptionToken completeListSize="{size}" cursor="{cursor}"/>'.encode())
        body = b"".join([f"<{verb}>".encode(), *parts, f"</{verb}>".encode()])
        return ProviderResponse(200, self._envelope(verb, args, body), list_page=True)

    def _list_query(self, verb: str, args: dict[str, str]) -> _ListQuery:
        prefix = args["metadataPrefix"]
        problems = []
        low = self._parse_bound(args.get("from"), "from", problems)
        high = self._parse_bound(args.get("until"), "until", problems)
        if not problems and "from" in args and "until" in args:
            if len(args["from"]) != len(args["until"]):
                problems.append(("badArgument", "from and until have different granularities"))
            elif low > high:
                problems.append(("badArgument", "from is later than until"))
        if prefix not in KNOWN_FORMATS:
            problems.append(("cannotDisseminateFormat", f"unknown metadataPrefix {prefix!r}"))
        set_spec = args.get("set")
        if set_spec is not None and not self._all_sets():
            problems.append(("noSetHierarchy", "this repository does not support sets"))
        if problems:
            raise OAIError(*problems)
        return _ListQuery(verb, prefix, low, high, set_spec)

    def _parse_bound(
        self, text: str | None, name: str, problems: list[tuple[str, str]]
    ) -> int | None:
        """`from` / `until` as inclusive epoch seconds; a day-form `until` means its last second."""
        if text is None:
            return None
        try:
            if _DAY.fullmatch(text):
                day = datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC)
                return int(day.timestamp()) + (86399 if name == "until" else 0)
            if _SECONDS.fullmatch(text):
                if self.granularity == "day":
                    problems.append(
                        ("badArgument", f"{name}={text} is finer than the day granularity")
                    )
                    return None
                moment = datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
                return int(moment.timestamp())
        except ValueError:
            pass
        problems.append(("badArgument", f"{name}={text!r} is not a valid UTC datestamp"))
        return None

    # ---------------------------------------------------------------- tokens

    def _encode_token(self, query: _ListQuery, after: str, cursor: int, size: int) -> str:
        state = [query.verb, query.prefix, query.low, query.high, query.set_spec]
        state += [after, cursor, size, self._epoch]
        payload = base64.urlsafe_b64encode(json.dumps(state, separators=(",", ":")).encode())
        body = payload.rstrip(b"=").decode()
        return f"{body}.{self._sign(body)}"

    def _decode_token(self, token: str, verb: str) -> tuple[_ListQuery, str, int, int]:
        bad = OAIError(("badResumptionToken", _BAD_TOKEN_MESSAGE))
        body, _, signature = token.rpartition(".")
        if not body or not hmac.compare_digest(signature, self._sign(body)):
            raise bad
        try:
            state = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
            token_verb, prefix, low, high, set_spec, after, cursor, size, epoch = state
        except ValueError as error:
            raise bad from error
        if epoch != self._epoch or token_verb != verb:
            raise bad
        return _ListQuery(verb, prefix, low, high, set_spec), after, cursor, size

    def _sign(self, body: str) -> str:
        return hmac.new(self._secret, body.encode(), hashlib.sha256).hexdigest()[:24]

    # ----------------------------------------------------------- serializing

    def _find(self, identifier: str) -> _Entry:
        entry = self._by_identifier.get(identifier)
        if entry is None:
            raise OAIError(("idDoesNotExist", f"no record {identifier}"))
        return entry

    def _format_stamp(self, stamp: int) -> str:
        moment = datetime.fromtimestamp(stamp, UTC)
        if self.granularity == "day":
            return moment.strftime("%Y-%m-%d")
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")

    def _record_xml(
        self, entry: _Entry, prefix: str, with_metadata: bool, illegal_characters: bool
    ) -> bytes:
        if not with_metadata:
            return entry.header
        if entry.record.deleted:
            return b"<record>" + entry.header + b"</record>"
        metadata = entry.record.metadata[prefix]
        if illegal_characters:
            metadata = inject_illegal_characters(metadata)
        return b"<record>" + entry.header + b"<metadata>" + metadata + b"</metadata></record>"

    def _envelope(self, verb: str, args: Mapping[str, str] | None, body: bytes) -> bytes:
        attributes = ""
        if args is not None:
            attributes = f" verb={quoteattr(verb)}" + "".join(
                f" {name}={quoteattr(value)}" for name, value in args.items()
            )
        head = (
            f"<responseDate>{_utc_seconds(datetime.now(UTC))}</responseDate>"
            f"<request{attributes}>{escape(self.base_url)}</request>"
        ).encode()
        return _PROLOG + head + body + b"</OAI-PMH>"

    def _ok(self, verb: str, args: dict[str, str], body: bytes) -> ProviderResponse:
        return ProviderResponse(200, self._envelope(verb, args, body))

    def _error_response(
        self, error: OAIError, verb: str | None, args: dict[str, str] | None
    ) -> ProviderResponse:
        """OAI errors; the request is echoed unless an argument or the verb was bad."""
        codes = {code for code, _ in error.errors}
        echo = None if codes & {"badVerb", "badArgument"} else args
        body = "".join(
            f"<error code={quoteattr(code)}>{escape(message)}</error>"
            for code, message in error.errors
        ).encode()
        status = 422 if self.errors_with_http_422 else 200
        return ProviderResponse(status, self._envelope(verb or "", echo, body))


def inject_illegal_characters(metadata: bytes) -> bytes:
    """Put characters illegal in XML 1.0 at the start of the first title (or first text)."""
    match = _FIRST_TITLE.search(metadata)
    at = match.end() if match else None
    if at is None:
        text = _FIRST_TEXT.search(metadata)
        at = text.end() if text else len(metadata)
    return metadata[:at] + _ILLEGAL_TEXT + metadata[at:]
