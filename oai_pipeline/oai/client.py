"""The OAI-PMH client: one polite, persistent HTTP connection per source, pages parsed once.

sickle supplies the protocol pieces (its Header and ResumptionToken models, its OAI error
classes keyed by error code); the HTTP is one ``httpx.Client`` so that connections are
reused, timeouts are generous, gzip is used, redirects are followed and every failure mode
of a real endpoint is under our control (sickle 0.7 would raise on HTTP 422 before reading
the OAI ``<error>`` Zenodo sends with it).
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import logging
import os
import random
import re
import socket
import ssl
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Literal, NoReturn
from urllib.parse import unquote, unquote_plus

import httpx
from sickle import oaiexceptions

from oai_pipeline import __version__
from oai_pipeline.errors import ConfigurationError, PipelineError, RecordError
from oai_pipeline.oai.base_url import (
    OAI_ARGUMENTS,
    another_base_url,
    credentials_apart,
    shown,
    split_base_url,
    with_credentials_of,
)
from oai_pipeline.oai.errors import (
    BadResumptionToken,
    ForeignNamespaceResponse,
    HarvestProtocolError,
    InvalidDatestamp,
    LoopingSource,
    MalformedResponse,
    NoRecordsMatchForToken,
    NotOAIResponse,
    OAIError,
    OversizedResponse,
    PersistentProtocolError,
    RefusedRequest,
    SourceFailure,
    UnknownMetadataFormat,
    UnknownSet,
    UnprovenEndpoint,
)
from oai_pipeline.oai.flow import (
    RateLimiter,
    backoff_delay,
    clamp,
    jittered,
    parse_retry_after,
)
from oai_pipeline.oai.pages import (
    OAI_ERROR_CODES,
    ForeignNamespace,
    ParsedResponse,
    UnusablePage,
    Verb,
    parse_response,
    read_identify,
    read_metadata_prefixes,
    read_sets,
    what_the_body_says,
)
from oai_pipeline.oai.tls import trusted_tls_context
from oai_pipeline.oai.types import (
    Granularity,
    HarvestedRecord,
    IdentifyInfo,
    OAISet,
    Page,
    SweepCheckpoint,
)
from oai_pipeline.oai.windows import format_datestamp, parse_datestamp
from oai_pipeline.xml_safety import MAX_DOCUMENT_BYTES

logger = logging.getLogger(__name__)


def default_user_agent() -> str:
    """``oai-pipeline/<version>`` with the operator's contact from ``OAI_PIPELINE_CONTACT``
    (an e-mail address or URL), so a source's admin can reach whoever runs the harvest."""
    contact = os.environ.get("OAI_PIPELINE_CONTACT", "").strip()
    if not contact:
        contact = "https://pypi.org/project/oai-pipeline/"
    elif "@" in contact and not contact.startswith("mailto:"):
        contact = f"mailto:{contact}"
    return f"oai-pipeline/{__version__} (OAI-PMH harvester; +{contact})"


# Statuses that say "not now" rather than "never"; all other 5xx are retried too.
_RETRY_STATUSES = frozenset({408, 425, 429})
# A Retry-After is honoured on these; it is only a hint on any other response.
_RETRY_AFTER_STATUSES = frozenset({429, 503})
# Retry-After waits are bounded by the time budget; this many per max_retries is the cap on
# their number, so a source answering "Retry-After: 0" forever cannot loop us.
_POLITE_RETRIES_PER_RETRY = 5

ListVerb = Literal["ListRecords", "ListIdentifiers"]

# httpx's timeout bounds each wait for bytes, so a source trickling a byte now and then
# could hold a request for ever: the whole response must arrive within this many timeouts.
_RESPONSE_DEADLINE_TIMEOUTS = 5

# Answered to a resumption token without an OAI-PMH body, these say the token names nothing
# (a source that lost or never kept it): the token is refused, as by badResumptionToken. A
# run resuming it would otherwise fail on it again and again.
_TOKEN_GONE_STATUSES = frozenset({400, 404, 410})

# Bodies are unpacked by OAIClient._unpacked, which checks what Content-Encoding claims:
# these encodings are read raw and left to it, any other (br, zstd) to httpx.
_UNPACKED_HERE = frozenset({"gzip", "x-gzip", "deflate", "identity"})
_LABELLED_COMPRESSED = frozenset({"gzip", "x-gzip", "deflate"})
_GZIP_MAGIC = b"\x1f\x8b"
_GZIP_WBITS = 16 + zlib.MAX_WBITS
# How much of a compressed body is inflated at a time (see _inflate).
_INFLATE_STEP = 1024 * 1024
# the labelled layer and up to three more (gzip twice and more, see _unpacked)
_MAX_COMPRESSION_LAYERS = 4

_DATE_ARGUMENTS = ("from", "until")
# What a badArgument's message names (messages vary: "Illegal until parameter", "Invalid
# date given in until parameter", "metadataPrefix does not exist"; see _refuses_the_dates).
_DATES_NAMED = re.compile(r"\b(?:from|until)\b|date|granular", re.IGNORECASE)
_PREFIX_NAMED = re.compile(r"metadata[\s_-]?prefix", re.IGNORECASE)
_OTHER_ARGUMENT_NAMED = re.compile(
    r"metadataPrefix|\bset\b|setSpec|identifier|resumptionToken|\bverb\b", re.IGNORECASE
)

# GetRecord errors that concern the one item asked for (what each means, if the source
# says nothing): the harvest of the other identifiers goes on.
_ITEM_ERRORS = {
    "idDoesNotExist": "the source does not know this identifier",
    "cannotDisseminateFormat": "the source cannot disseminate this item in the metadata prefix",
}


_NEVER_ANSWERED = ", and this base URL has never answered OAI-PMH"
# HTTP 401/403 without an OAI-PMH answer: access refused (see OAIClient._refused)
_ACCESS_REFUSED_STATUSES = frozenset({401, 403})
_ACCESS_REFUSED_HINT = (
    ": a firewall blocking this machine or its User-Agent, or a login it wants; open the "
    "base URL in a browser from this machine, set OAI_PIPELINE_CONTACT so that the source's "
    "operator can tell who harvests, and ask them to let the harvester in"
)


def _noop_save(checkpoint: SweepCheckpoint) -> None:
    """Default for sweeps whose progress need not survive the process."""


class _Abandoned(Exception):
    """The sweep that asked for a page ahead has stopped: its request gives up quietly."""


class _PageAhead:
    """The next page of one sweep, fetched and parsed in a worker thread the sweep owns while
    the caller processes the current page (the source and our CPU are not idle in turn).

    At most one request is in flight, and it goes through the client's flow control like any
    other. The sweep takes the page only after saving the checkpoint that names it, so the
    checkpoint still means "every page before this token was handed over".
    """

    def __init__(self, client: OAIClient, fetch: Callable[[str | None], Page]) -> None:
        self._client = client
        self._fetch = fetch
        self._stop = threading.Event()
        self._executor: ThreadPoolExecutor | None = None
        self._future: Future[Page] | None = None
        self._token: str | None = None

    def start(self, token: str) -> None:
        """Fetch the page ``token`` names in the background (not once closed)."""
        if self._stop.is_set():
            return
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="oai-ahead")
        self._token = token
        self._future = self._executor.submit(self._run, token)

    def _run(self, token: str) -> Page:
        self._client._local.stop = self._stop
        try:
            return self._fetch(token)
        finally:
            self._client._local.stop = None

    def take(self, token: str | None) -> Page:
        """The page ``token`` names: the one fetched ahead (its error raised here), else now."""
        future, self._future = self._future, None
        if future is None or token is None or token != self._token:
            return self._fetch(token)
        try:
            return future.result()
        except (_Abandoned, CancelledError):
            # Stopped by client.close(): fetch as a sweep without prefetch would.
            return self._fetch(token)

    def close(self) -> None:
        """Cancel a request not yet started; one running stops at its next wait or chunk of
        body (no retry follows) and its result is dropped. No worker thread is left."""
        self._stop.set()
        future, self._future = self._future, None
        if future is not None:
            future.cancel()
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)


class OAIClient:
    """Talks to one OAI-PMH base URL. Not a generic HTTP client: one request at a time."""

    def __init__(
        self,
        base_url: str,
        *,
        rate_limit_per_minute: int | None = None,
        timeout: float = 60.0,
        max_retries: int = 6,
        backoff_base: float = 1.0,
        max_retry_wait: float = 300.0,
        retry_budget_seconds: float = 1800.0,
        max_response_bytes: int | None = None,
        user_agent: str | None = None,
        endpoint_proven: bool = True,
        harvester_id: str | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        """``sleep`` None waits in real time (cut short when a page fetched ahead is dropped);
        tests pass a fake. A response larger than ``max_response_bytes`` (None: the project's
        bound on documents) fails the request. ``endpoint_proven`` False: the base URL has
        never answered OAI-PMH (see `endpoint_proven`). ``harvester_id``: the harvester the
        commands in errors and notices update (`ID` without one)."""
        if not base_url.startswith(("http://", "https://")):
            raise ConfigurationError(f"OAI-PMH base URL must be http(s): {shown(base_url)!r}")
        if max_response_bytes is None:
            max_response_bytes = MAX_DOCUMENT_BYTES
        if max_response_bytes <= 0:
            raise ConfigurationError(
                f"max_response_bytes must be positive, got {max_response_bytes}"
            )
        if timeout <= 0 or max_retries < 0 or backoff_base < 0 or max_retry_wait < 0:
            raise ConfigurationError(
                "timeout must be positive; max_retries, backoff_base and max_retry_wait "
                "must not be negative"
            )
        if rate_limit_per_minute is not None and rate_limit_per_minute <= 0:
            raise ConfigurationError(
                f"rate_limit_per_minute must be positive, got {rate_limit_per_minute}"
            )
        # Named without the user and password it may hold: those go as basic auth (and a URL
        # to move to names them as the registered one does, see _check_redirect).
        self.base_url, credentials = credentials_apart(base_url)
        self._registered_url = base_url
        self._endpoint, self._endpoint_params = split_base_url(self.base_url)
        self.response_deadline = timeout * _RESPONSE_DEADLINE_TIMEOUTS
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.max_retry_wait = max_retry_wait
        self.retry_budget_seconds = retry_budget_seconds
        self.max_response_bytes = max_response_bytes
        self._sleep = sleep
        self._rng = random.Random()
        # Whether the base URL has answered OAI-PMH (in an earlier harvest, or in this
        # client): only then is an HTML page with status 200 a maintenance page to wait out.
        # Before, it is the wrong URL (a home page, a login page): retried, it cost a minute
        # of waiting before the error that says to check the base URL.
        self.endpoint_proven = endpoint_proven
        self.harvester_id = harvester_id
        self._answered = False  # whether the source answered OAI-PMH to this client
        # A prefetching worker's stop event, so its waits end when its sweep is closed.
        self._local = threading.local()
        self._ahead: set[_PageAhead] = set()
        # Quirks of the source met so far (see _notice).
        self.notices: list[str] = []
        # Deleted records listed without a datestamp, dated by the responseDate (see
        # pages._date_deletions): told once, with how many, in undated_deletions_notice.
        self._undated_deletions: set[str] = set()
        # Set once a source's <request> named another list on every try of one page: its
        # echo is then a quirk (a double-escaped or rewritten token), not mixed-up answers,
        # and is not judged again (each page would wait through every retry).
        self._echo_unreliable = False
        # Whether a redirect of the base URL was noted: once per client (see _check_redirect).
        self._redirect_noted = False
        # metadata prefixes GetRecord has answered a record in (see _refuses_the_identifier)
        self._prefixes_answered: set[str] = set()
        # The form from/until go in since the source refused the other (see _dates_as).
        self.date_form: Granularity | None = None
        # Whether a resumption token goes with the metadata prefix (see _token_with_prefix).
        self.prefix_with_token = False
        # Whether the completeListSize of a set's list counts the whole source instead (None:
        # not known yet; see _size_ignores_set).
        self._set_size_ignored: bool | None = None
        self._sets_known: dict[str, bool | None] = {}  # see _has_set
        self._limiter = RateLimiter(
            rate_limit_per_minute, max_wait=max_retry_wait, sleep=self._pause
        )
        user_agent = user_agent or default_user_agent()
        if not (user_agent.isascii() and user_agent.isprintable()):
            # httpx refuses it (UnicodeEncodeError) or every request does (a line break)
            raise ConfigurationError(
                f"User-Agent {user_agent!r}: printable ASCII only "
                "(OAI_PIPELINE_CONTACT, or the reader's user_agent option)"
            )
        self._http = httpx.Client(
            transport=transport,
            auth=credentials,
            verify=trusted_tls_context() if transport is None else True,
            timeout=httpx.Timeout(timeout),
            follow_redirects=True,
            event_hooks={"response": [self._refuse_downgrade]},
            headers={
                "User-Agent": user_agent,
                "Accept-Encoding": "gzip, deflate",
                "Accept": "text/xml, application/xml;q=0.9, */*;q=0.5",
            },
        )

    # ---- configuration -----------------------------------------------------------------

    @property
    def dates_by_day(self) -> bool:
        """from/until go by whole days: the source refused them in seconds."""
        return self.date_form == "day"

    @property
    def rate_limit_per_minute(self) -> int | None:
        return self._limiter.per_minute

    @rate_limit_per_minute.setter
    def rate_limit_per_minute(self, per_minute: int | None) -> None:
        if per_minute is not None and per_minute <= 0:
            raise ConfigurationError(f"rate_limit_per_minute must be positive, got {per_minute}")
        self._limiter.per_minute = per_minute

    # ---- verbs ---------------------------------------------------------------------------

    def identify(self, *, retries: int | None = None) -> IdentifyInfo:
        """The source's Identify; one naming another base URL is noted (see
        another_base_url), never followed. ``retries``: of the request, if not the
        client's ``max_retries``."""
        parsed = self._request("Identify", {"verb": "Identify"}, retries=retries)
        self._raise_errors(parsed, "Identify")
        info = read_identify(parsed, self.base_url)
        warning = another_base_url(self.base_url, info.base_url)
        if warning is not None:
            self._notice(warning)
        return info

    def list_page(
        self,
        verb: ListVerb,
        *,
        metadata_prefix: str,
        from_: str | None = None,
        until: str | None = None,
        set_spec: str | None = None,
        resumption_token: str | None = None,
        stop_on_repeat: bool = False,
    ) -> Page:
        """One page of a list: the first (from the arguments) or the one a token names.

        Retries happen inside; ``noRecordsMatch`` is an empty last page (in answer to a
        token: NoRecordsMatchForToken, for the sweep to judge); any other OAI error raises
        (BadResumptionToken for an expired or unknown token, also when a token gets HTTP
        400, 404 or 410 without an OAI-PMH answer). ``stop_on_repeat``: see `_request`.
        """
        if verb not in ("ListRecords", "ListIdentifiers"):
            raise ConfigurationError(f"list_page lists ListRecords or ListIdentifiers, not {verb}")
        params: dict[str, str] = {"verb": verb}
        if resumption_token:
            params["resumptionToken"] = resumption_token  # an exclusive argument
            if self.prefix_with_token:
                params["metadataPrefix"] = metadata_prefix
        else:
            params["metadataPrefix"] = metadata_prefix
            dates = (("from", from_), ("until", until))
            if self.date_form is not None:
                form = self.date_form
                dates = tuple(
                    (name, value and _in_form(name, value, form)) for name, value in dates
                )
            for name, value in (*dates, ("set", set_spec)):
                if value:
                    params[name] = value
        # the list's own arguments: a token's page echoing others is another list's
        listed = {"metadataPrefix": metadata_prefix, "from": from_, "until": until, "set": set_spec}
        try:
            parsed = self._request(verb, params, listed, stop_on_repeat=stop_on_repeat)
        except RefusedRequest as exc:
            if resumption_token and exc.status in _TOKEN_GONE_STATUSES:
                raise self._token_refused(verb, f"HTTP {exc.status}") from exc
            raise
        # the requests sent again below are the sweep's as much as the first (stop_on_repeat)
        if resumption_token and not self.prefix_with_token and _wants_the_prefix(parsed):
            parsed = self._token_with_prefix(
                verb, params, metadata_prefix, parsed, listed, stop_on_repeat=stop_on_repeat
            )
        if self.date_form is None and _refuses_the_dates(parsed):
            if _dates_in_seconds(params):
                parsed = self._dates_as("day", verb, params, parsed, stop_on_repeat=stop_on_repeat)
            elif _dates_named(parsed) and any(name in params for name in _DATE_ARGUMENTS):
                parsed = self._dates_as(
                    "seconds", verb, params, parsed, stop_on_repeat=stop_on_repeat
                )
        if set_spec and not resumption_token:
            self._refuse_unknown_set(verb, parsed, set_spec)
        if not resumption_token:
            self._refuse_unknown_format(verb, parsed, metadata_prefix)
        if parsed.errors and all(code == "noRecordsMatch" for code, _ in parsed.errors):
            if resumption_token:
                raise NoRecordsMatchForToken(
                    "noRecordsMatch",
                    "noRecordsMatch in answer to a resumption token before the whole list "
                    "(completeListSize) was listed: the source lost the list",
                    errors=parsed.errors,
                    context=f"{self.base_url} ({verb})",
                    response_date=parsed.response_date,
                )
            return Page(records=[], resumption_token=None, response_date=parsed.response_date)
        if resumption_token and _refuses_an_argument(parsed) and not _wants_the_prefix(parsed):
            # The token is the request's one argument (with the prefix, for a source that
            # wants it) and the source issued it: refused so, the source no longer takes it,
            # as some answer an expired token, and some at times a live one (ruby-oai#107:
            # "Illegal argument 'resumptionToken'" in 3 harvests of 10). Failed as a mistyped
            # argument, the run failed, and every run resuming the token failed again.
            raise self._token_refused(verb, "badArgument", parsed.errors)
        hint = ""
        if not resumption_token and any(code == "badArgument" for code, _ in parsed.errors):
            # the prefix and set were checked above: say what else the source was asked
            sent = _window_words(from_, until, set_spec)
            hint = (
                f"the list was asked for metadataPrefix {metadata_prefix}{sent}: check the "
                "harvester's metadata prefix and setspec against the source's "
                "ListMetadataFormats and ListSets"
            )
        self._raise_errors(parsed, verb, hint)
        self._count_undated_deletions(parsed.records)
        return Page(
            records=parsed.records,
            resumption_token=parsed.next_token,
            response_date=parsed.response_date,
            cursor=parsed.cursor,
            complete_list_size=parsed.complete_list_size,
        )

    def sweep(
        self,
        verb: ListVerb,
        *,
        metadata_prefix: str,
        from_: str | None = None,
        until: str | None = None,
        set_spec: str | None = None,
        checkpoint: SweepCheckpoint | None = None,
        save_checkpoint: Callable[[SweepCheckpoint], None] = _noop_save,
        max_empty_pages: int = 50,
        max_restarts: int = 3,
        prefetch: bool = True,
        stop_on_repeat: bool = False,
    ) -> Iterator[Page]:
        """Every page of one list request, following resumption tokens.

        Before each page is handed over, ``save_checkpoint`` gets the token that names it
        (None: the first page), so a crashed run resumes from ``checkpoint`` where it stopped.
        With ``prefetch``, the next page is requested and parsed in a background thread while
        the caller processes the current one; it is taken (and its errors raised) only when
        the caller asks for it, after its checkpoint is saved. After ``badResumptionToken``
        the window is redone from its start (records are not in datestamp order, so nothing
        finer is safe; the caller skips what it already staged), at most ``max_restarts``
        times; so is it after ``noRecordsMatch`` in answer to a token of a list whose
        completeListSize was not reached (without a size, that answer ends the list), unless
        the attempt before ended so too, after as many records of the same size: the list
        ends there (a notice; see _refused_twice_notice). A token named again is followed;
        named again by a page that adds nothing, it loops: that ends a list whose
        completeListSize is reached (a notice), else raises HarvestProtocolError, as do more
        than ``max_empty_pages`` pages in a row that add nothing (empty, or the very records
        of an earlier page: a broken offset) and still carry a token. A list that ends far
        from the completeListSize the source last announced is a notice (see _count_notice),
        not a failure.
        """
        window = (from_, until, set_spec, metadata_prefix)
        token: str | None = None
        pages_read, cursor, response_date = 0, None, None
        if checkpoint is not None:
            saved = (
                checkpoint.from_,
                checkpoint.until,
                checkpoint.set_spec,
                checkpoint.metadata_prefix,
            )
            if saved != window:
                raise ConfigurationError(
                    f"checkpoint is for window {saved}, not for the requested {window}"
                )
            token = checkpoint.resumption_token
            pages_read = checkpoint.pages_read
            cursor, response_date = checkpoint.cursor, checkpoint.response_date

        def fetch(token: str | None) -> Page:
            return self.list_page(
                verb,
                metadata_prefix=metadata_prefix,
                from_=from_,
                until=until,
                set_spec=set_spec,
                resumption_token=token,
                stop_on_repeat=stop_on_repeat,
            )

        ahead = _PageAhead(self, fetch) if prefetch else None
        if ahead is not None:
            self._ahead.add(ahead)
        seen_tokens: set[str] = {token} if token else set()
        seen_pages: set[int] = set()  # a hash of each page's headers
        restarts, empty_in_a_row = 0, 0
        # the size the source last announced (a page without one does not unsay it: a
        # list lost after such a page looked whole, its last records missed), the records
        # listed up to the last page by its cursor, and the records its pages held (see
        # _count_notice); a resumed sweep goes on from what its earlier attempts listed
        announced = checkpoint.complete_list_size if checkpoint is not None else None
        delivered = checkpoint.delivered if checkpoint is not None else None
        listed: int | None = 0
        if checkpoint is not None and token is not None:
            listed = checkpoint.listed
        resumed_token = token  # what a failed run saved, to go on from
        # Where the last attempt ended on noRecordsMatch for a token before the size it
        # announced, or on any refused token past it: (records listed, that size). A redo
        # ending there again is the list's end (see _refused_twice_notice and
        # _refused_when_whole_notice); a token that expired ends elsewhere.
        refused_at: tuple[int, int | None] | None = None
        refused_twice = False
        page_size = 0  # the most records a page of the list held: the source's page size
        # the metadata namespaces of the list's first page that held metadata, and whether
        # it was the list's first page (see _other_format_notice); a resumed sweep keeps
        # those its earlier attempts saw, or it took its own first page (a token's) for them
        list_namespaces: set[str] | None = None
        from_first_page = False
        if checkpoint is not None and checkpoint.list_namespaces:
            list_namespaces = set(checkpoint.list_namespaces)
            from_first_page = checkpoint.namespaces_from_first_page
        if set_spec and checkpoint is not None and checkpoint.set_confirmed:
            self.know_set(set_spec)  # an earlier attempt of the sweep confirmed it

        def refuse_resumed_token(failure: HarvestProtocolError) -> NoReturn:
            """The saved token keeps failing (after retries), where the window's first page
            comes: the source lost the token (DOAJ answered dead tokens with HTTP 500), and
            every run resuming it would fail the same way. The window is redone, as after
            badResumptionToken. If the first page fails too, the source is down: the run
            fails, and the checkpoint keeps the token for the next run."""
            try:
                fetch(None)
            except HarvestProtocolError:
                raise failure from None
            raise BadResumptionToken(
                "badResumptionToken",
                f"the saved resumption token keeps failing ({failure}) where the list's "
                "first page comes",
                context=f"{self.base_url} ({verb})",
            ) from failure

        try:
            while True:
                saved = SweepCheckpoint(
                    from_=from_,
                    until=until,
                    set_spec=set_spec,
                    metadata_prefix=metadata_prefix,
                    resumption_token=token,
                    pages_read=pages_read,
                    cursor=cursor,
                    response_date=response_date,
                    complete_list_size=announced,
                    delivered=delivered,
                    listed=listed,
                    set_confirmed=self._set_confirmed(set_spec),
                    list_namespaces=None if list_namespaces is None else sorted(list_namespaces),
                    namespaces_from_first_page=from_first_page,
                )
                save_checkpoint(saved)
                try:
                    try:
                        page = ahead.take(token) if ahead is not None else fetch(token)
                    except HarvestProtocolError as exc:
                        # too large or malformed is what the page is, not what became
                        # of its token
                        as_it_is = isinstance(exc, (OversizedResponse, ForeignNamespaceResponse))
                        if token is None or token != resumed_token or as_it_is:
                            raise
                        refuse_resumed_token(exc)
                except BadResumptionToken as exc:
                    lost = _lost(announced, listed, delivered)
                    no_records = isinstance(exc, NoRecordsMatchForToken)
                    if no_records and not lost:
                        # The list ends: a token on its last full page, then nothing.
                        page = Page(
                            [],
                            resumption_token=None,
                            response_date=exc.response_date,
                            token_refused=announced is None,
                        )
                    elif (
                        token is not None
                        and _whole(announced, listed)
                        and (listed == announced or refused_at == (listed, announced))
                    ):
                        # invenio: a token on the last page of a list whose size is a multiple
                        # of the page size, refused when asked. Redone, the window met the
                        # same token at its end each time, and the run failed. Past its size,
                        # the size is proven wrong and says nothing of the end: a token that
                        # expired there lost the records after it, unless the redo is
                        # refused at the same point too.
                        self._notice(
                            f"{self.base_url} ({verb}{_window_words(from_, until, set_spec)})"
                            f": {_refused_when_whole_notice(exc.code, listed, announced)}"
                        )
                        page = Page([], resumption_token=None, response_date=response_date)
                    elif token is None:
                        raise
                    elif (
                        no_records
                        and listed is not None
                        and refused_at == (listed, announced)
                        and announced is not None
                        and announced - listed <= page_size
                    ):
                        # A source whose completeListSize counts more than it sends: its
                        # last page names a token, answered with noRecordsMatch. Redone, the
                        # window ended there each time, and every harvest of it failed. Only
                        # short of less than a page: more, and pages are lost at a fixed
                        # point (a search index's paging limit; Zenodo's 6 of 8,091,628),
                        # which fails the run as before, not ends the list without them.
                        refused_twice = True
                        page = Page([], resumption_token=None, response_date=exc.response_date)
                    else:
                        restarts += 1
                        if restarts > max_restarts:
                            raise HarvestProtocolError(
                                f"{self.base_url} ({verb}): resumption token refused "
                                f"{restarts} times, window redone {max_restarts} times "
                                f"already: {exc}"
                            ) from exc
                        logger.warning(
                            "%s: resumption token refused (%s); redoing the window from its start",
                            self.base_url,
                            exc.message,
                        )
                        again_tells = no_records or _whole(announced, listed)
                        refused_at = (
                            (listed, announced) if again_tells and listed is not None else None
                        )
                        token, cursor, delivered = None, None, None
                        announced, listed = None, 0
                        # The saved token is judged once: met again in the redone window,
                        # the source issued it anew (it was not lost) and its page's failure
                        # is the run's, not another redo.
                        resumed_token = None
                        seen_tokens.clear()
                        seen_pages.clear()
                        empty_in_a_row = 0
                        continue
                pages_read += 1
                page_size = max(page_size, len(page.records))
                namespaces = {r.metadata_namespace for r in page.records if r.metadata_namespace}
                if namespaces and list_namespaces is None:
                    list_namespaces, from_first_page = namespaces, token is None
                elif namespaces and list_namespaces is not None:
                    known = {_format_of(namespace) for namespace in list_namespaces}
                    for other in sorted(n for n in namespaces if _format_of(n) not in known):
                        self._notice(
                            _other_format_notice(
                                f"{self.base_url} ({verb}, metadataPrefix {metadata_prefix})",
                                other,
                                list_namespaces,
                                from_first_page,
                            )
                        )
                if set_spec and page.records:
                    self._sets_known[set_spec] = True  # the source has it: it lists records
                cursor, response_date = page.cursor, page.response_date
                delivered = cursor + len(page.records) if cursor is not None else None
                if page.complete_list_size is not None:
                    announced = page.complete_list_size
                # A page sent again (its records, fresh tokens) lists nothing new: counted,
                # it made a list lost after it look whole, and its last records were missed.
                repeated = bool(page.records) and _repeats(page, seen_pages)
                if listed is not None and not repeated:
                    listed += len(page.records)
                next_token = page.resumption_token
                # Judged before the page is handed over (so that a sound token is fetched
                # ahead), raised after, when the caller asks for the next page.
                refusal: HarvestProtocolError | None = None
                if next_token in seen_tokens and (not page.records or repeated):
                    # A token named again by a page that adds nothing: asked again, it gives
                    # that page again. A token merely named again is followed (a source may
                    # keep one token per session and move on with it; a glitch passes).
                    if _whole(announced, listed):
                        # DOAJ, archive.org: the last page names its own token. The list is
                        # whole by its size: failing here failed every harvest of the source.
                        self._notice(
                            f"{self.base_url} ({verb}{_window_words(from_, until, set_spec)})"
                            ": the source names the resumption token of its last page again "
                            f"after all {announced} records its completeListSize announced; "
                            "taken as the end of the list"
                        )
                        next_token = None
                        page = dataclasses.replace(page, resumption_token=None)
                    else:
                        refusal = LoopingSource(
                            f"{self.base_url} ({verb}): the source repeated resumption token "
                            f"{_shorten(str(next_token))!r} after {pages_read} pages, and "
                            "the page it names adds nothing"
                            + ("" if announced is None else f" ({listed} of {announced} listed)")
                            + "; stopping, not looping"
                        )
                if next_token is None and announced is not None and listed is not None:
                    # judged when the end is known, before a capped caller may stop reading
                    notice = (
                        _refused_twice_notice(listed, announced)
                        if refused_twice
                        else _count_notice(listed, announced)
                    )
                    if (
                        notice is not None
                        and set_spec
                        and listed < announced
                        and self._size_ignores_set(metadata_prefix, from_, until, announced)
                    ):
                        notice = None
                        page = dataclasses.replace(page, size_ignores_set=True)
                    if notice is not None:
                        where = _window_words(from_, until, set_spec)
                        self._notice(f"{self.base_url} ({verb}{where}): {notice}")
                if next_token is None and listed is not None:
                    page = dataclasses.replace(page, list_records=listed)
                if next_token is not None and refusal is None:
                    seen_tokens.add(next_token)
                    adds_nothing = not page.records or repeated
                    empty_in_a_row = empty_in_a_row + 1 if adds_nothing else 0
                    if empty_in_a_row > max_empty_pages:
                        refusal = LoopingSource(
                            f"{self.base_url} ({verb}): {empty_in_a_row} pages in a row "
                            "that are empty or repeat the records of an earlier page, and "
                            "still carry a resumption token; stopping instead of looping"
                        )
                    if refusal is None and ahead is not None:
                        ahead.start(next_token)
                yield page
                if next_token is None:
                    if self._set_confirmed(set_spec) and not saved.set_confirmed:
                        # the list's last checkpoint says what its pages showed of the set
                        save_checkpoint(dataclasses.replace(saved, set_confirmed=True))
                    return
                if refusal is not None:
                    raise refusal
                token = next_token
        finally:
            if ahead is not None:
                ahead.close()
                self._ahead.discard(ahead)

    def _refuse_unknown_set(self, verb: ListVerb, parsed: ParsedResponse, set_spec: str) -> None:
        """Raise UnknownSet when the first page of a set's list says that the source has no
        such set: noSetHierarchy (it has no sets), or badArgument or noRecordsMatch for a set
        that ListSets does not list either. Taken as an empty list, a wrong setspec made an
        empty harvest, and the next reconcile took every record harvested before for
        deleted; of a dated list (an incremental harvest), the typo went unnoticed until
        then. ListSets is asked once per client, and not for a set known to be the source's
        (see know_set): a quiet incremental harvest costs no more requests."""
        codes = {code for code, _ in parsed.errors}
        if not codes:
            return
        answer = "its answer: " + "; ".join(
            f"{code}: {text}" if text else code for code, text in parsed.errors
        )
        if "noSetHierarchy" in codes:
            raise UnknownSet(
                "noSetHierarchy",
                f"the source has no sets ({answer}), so not the harvester's set "
                f"{set_spec!r}: harvest it without a set",
                context=f"{self.base_url} ({verb})",
            )
        if codes in ({"noRecordsMatch"}, {"badArgument"}) and self._has_set(set_spec) is False:
            raise UnknownSet(
                next(iter(codes)),
                f"the source has no set {set_spec!r} (ListSets does not list it; {answer}): "
                "check the harvester's setspec against the source's ListSets",
                context=f"{self.base_url} ({verb})",
            )

    def _refuse_unknown_format(
        self, verb: ListVerb, parsed: ParsedResponse, metadata_prefix: str
    ) -> None:
        """Raise UnknownMetadataFormat when a list's first page refuses the metadata prefix,
        naming the prefixes the source's ListMetadataFormats offers: the source's own message
        ("unknown metadataPrefix") left the operator to find the right one by hand. Refused
        so by cannotDisseminateFormat, or by a badArgument (Zenodo: "metadataPrefix does not
        exist") or a badVerb (AtoM, WEKO3: the wrong code for a wrong argument; the error
        blamed the base URL) when ListMetadataFormats does not list the prefix. One more
        request, only on the way to failing."""
        codes = {code for code, _ in parsed.errors}
        if not codes & {"cannotDisseminateFormat", "badArgument", "badVerb"}:
            return
        try:
            offered: list[str] | None = self.list_metadata_formats()
        except PipelineError as error:
            logger.warning("%s: ListMetadataFormats failed: %s", self.base_url, error)
            offered = None
        if "cannotDisseminateFormat" not in codes and (
            offered is None or metadata_prefix in offered
        ):
            return  # a badArgument about another argument
        if offered is None:
            hint = "check the harvester's metadata prefix against the source's ListMetadataFormats"
        else:
            hint = (
                f"the source offers {', '.join(offered) or 'none'}: set one as the harvester's "
                f"metadata prefix ({self._update_command('--metadata-prefix', 'P')})"
            )
        answer = "; ".join(f"{code}: {text}" if text else code for code, text in parsed.errors)
        raise UnknownMetadataFormat(
            parsed.errors[0][0],
            f"the source does not disseminate {metadata_prefix!r} (its answer: {answer}); {hint}",
            context=f"{self.base_url} ({verb})",
        )

    def know_set(self, set_spec: str) -> None:
        """Take the set as one the source has (a run of the harvester listed it before), so
        that an empty list of it is not checked against ListSets."""
        self._sets_known.setdefault(set_spec, True)

    def _set_confirmed(self, set_spec: str | None) -> bool:
        """Whether the source has the set, as far as this client saw: a list of it held
        records, ListSets lists it, or a confirmed run of the harvester listed it (know_set)."""
        return bool(set_spec) and self._sets_known.get(set_spec) is True

    def _has_set(self, set_spec: str) -> bool | None:
        """Whether ListSets lists the set (or a set below it, `a:b` for `a`); None when
        ListSets fails: not known. Asked once per set; stops at the set when found."""
        if set_spec not in self._sets_known:
            try:
                found = in_set((s.spec for s in self.list_sets()), set_spec)
            except PipelineError as error:
                logger.warning("%s: ListSets failed: %s", self.base_url, error)
                found = None
            self._sets_known[set_spec] = found
        return self._sets_known[set_spec]

    def _size_ignores_set(
        self,
        metadata_prefix: str,
        from_: str | None,
        until: str | None,
        announced: int,
    ) -> bool:
        """Whether a set's list that ended normally far short of its completeListSize did so
        because the source counts the whole source in that size, not the set (seen at
        sources that filter by set but count before filtering). One request tells: the same
        list without the set announces that very size. Then the size says nothing of the
        set's list, which ended with an empty token as lists do: it is taken as whole, and the
        quirk noted once, instead of a warning of a list cut short at every harvest (and a
        reconcile refused for it). Known once, not asked again by this client. A list really
        cut short still ends far from the size the source announces for the set."""
        if self._set_size_ignored is None:
            try:
                # ListIdentifiers whatever the list: its count is the same, its page lighter
                whole = self.list_page(
                    "ListIdentifiers", metadata_prefix=metadata_prefix, from_=from_, until=until
                )
            except PipelineError as error:
                logger.warning("%s: could not list without the set: %s", self.base_url, error)
                return False  # not known: the list is judged by the size it announced
            size = whole.complete_list_size
            if size is None and whole.resumption_token is None:
                size = len(whole.records)  # the whole source fits on one page
            self._set_size_ignored = size is not None and abs(size - announced) <= (
                list_size_slack(announced)
            )
            if not self._set_size_ignored:
                return False  # the size is the set's: the list was cut short
            self._notice(
                f"{self.base_url}: the source's completeListSize counts the whole source, "
                "not the set (a set's list announces the size of the list without the set): "
                "a set's list that ends normally is taken as whole"
            )
        return self._set_size_ignored

    def get_record(self, identifier: str, metadata_prefix: str) -> HarvestedRecord:
        """One record by identifier; ``idDoesNotExist`` and ``cannotDisseminateFormat`` (the
        item lacks the format) are that record's error, not a failure."""
        parsed = self._request(
            "GetRecord",
            {"verb": "GetRecord", "identifier": identifier, "metadataPrefix": metadata_prefix},
        )
        for code, message in parsed.errors:
            # Errors of this item, not of the run: the other identifiers are harvested.
            refused = code == "badArgument" and self._refuses_the_identifier(
                message, identifier, metadata_prefix
            )
            if code in _ITEM_ERRORS or refused:
                meaning = _ITEM_ERRORS.get(code, "the source refuses this identifier")
                return HarvestedRecord(
                    identifier=identifier,
                    datestamp="",
                    deleted=False,
                    error=RecordError(type=code, message=message or meaning, location=identifier),
                )
        mixed_up = _answers_another_item(parsed, identifier, echo=not self._echo_unreliable)
        if mixed_up is not None:
            if any(same_identifier(record.identifier, identifier) for record in parsed.records):
                # the record asked for, under a <request> naming another: the source's echo
                self._echo_unreliable = True
                self._notice(
                    f"{self.base_url} (GetRecord): {mixed_up} on every try, with the record "
                    "asked for; the source's <request> no longer judged"
                )
            else:
                return HarvestedRecord(
                    identifier=identifier,
                    datestamp="",
                    deleted=False,
                    error=RecordError(
                        type="AnotherRecordAnswered",
                        message=(
                            f"{mixed_up}, on every try (a proxy or cache mixing answers up, or "
                            "a source filing the record under another identifier): not staged"
                        ),
                        location=identifier,
                    ),
                )
        # named: of hundreds of selected identifiers, the operator drops the one refused
        self._raise_errors(parsed, "GetRecord", f"asked for identifier {identifier!r}")
        if not parsed.records:
            return HarvestedRecord(
                identifier=identifier,
                datestamp="",
                deleted=False,
                error=RecordError(type="EmptyResponse", message="GetRecord returned no record"),
            )
        self._prefixes_answered.add(metadata_prefix)
        self._count_undated_deletions(parsed.records[:1])
        # staged under the identifier asked for, however the source writes its namespace:
        # what the run was asked (and a --resume checks) is that one's
        return dataclasses.replace(parsed.records[0], identifier=identifier)

    def _refuses_the_identifier(self, message: str, identifier: str, metadata_prefix: str) -> bool:
        """Whether a badArgument to GetRecord refuses the identifier (a DOI given for an OAI
        identifier, a syntax the source does not take), an error of that one record: when
        its message names the identifier and not the prefix, or when the source answered a
        GetRecord in this prefix before (the other arguments were the same). Otherwise (a
        prefix refused, a message saying nothing first) the run fails, naming the identifier:
        one refused identifier failed a run of hundreds, and its --resume again."""
        if metadata_prefix in self._prefixes_answered:
            return True
        text = message or ""
        names_it = identifier in text or re.search(r"identifier", text, re.IGNORECASE)
        return bool(names_it) and not re.search(r"metadataPrefix|format", text, re.IGNORECASE)

    def list_sets(self) -> Iterator[OAISet]:
        """Every set of the source; a source without sets has none (noSetHierarchy)."""
        params: dict[str, str] = {"verb": "ListSets"}
        seen: set[str] = set()
        while True:
            parsed = self._request("ListSets", params)
            if parsed.errors and all(
                code in ("noSetHierarchy", "noRecordsMatch") for code, _ in parsed.errors
            ):
                return
            self._raise_errors(parsed, "ListSets")
            yield from read_sets(parsed)
            token = parsed.next_token
            if token is None:
                return
            if token in seen:
                raise HarvestProtocolError(f"{self.base_url} (ListSets): repeated token")
            seen.add(token)
            params = {"verb": "ListSets", "resumptionToken": token}

    def list_metadata_formats(self, identifier: str | None = None) -> list[str]:
        """The metadata prefixes the source (or one of its items) can disseminate."""
        params = {"verb": "ListMetadataFormats"}
        if identifier:
            params["identifier"] = identifier
        parsed = self._request("ListMetadataFormats", params)
        if parsed.errors and all(code == "noMetadataFormats" for code, _ in parsed.errors):
            return []
        self._raise_errors(parsed, "ListMetadataFormats")
        return read_metadata_prefixes(parsed)

    def close(self) -> None:
        """Stop the pages being fetched ahead by sweeps still open, then the connections."""
        for ahead in list(self._ahead):
            ahead.close()
        self._http.close()

    def __enter__(self) -> OAIClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _dates_as(
        self,
        form: Granularity,
        verb: Verb,
        params: dict[str, str],
        refused: ParsedResponse,
        *,
        stop_on_repeat: bool = False,
    ) -> ParsedResponse:
        """badArgument to from/until in the other form: the request is sent again with the
        same bounds in ``form``, and so is every later one of this client. By day: an Identify
        that declares seconds the source does not take (DSpace, EPrints and OJS installs); a
        window widened to whole days is safe, as records unchanged since the last harvest
        are skipped. In seconds: a source refusing days, which every source must take
        (DSpace/xoai#34), asked for the same days from their first second to their last.
        Refused again, the source refuses another argument: its first answer stands.
        ``stop_on_repeat``: the list's own (see `_request`)."""
        again = {
            name: _in_form(name, value, form) if name in _DATE_ARGUMENTS else value
            for name, value in params.items()
        }
        parsed = self._request(verb, again, stop_on_repeat=stop_on_repeat)
        if _refuses_an_argument(parsed):
            return refused
        self.date_form = form
        message = "; ".join(text or code for code, text in refused.errors)
        if form == "day":
            self._notice(
                f"{self.base_url}: the source refuses from/until in seconds (badArgument: "
                f"{message}) though its Identify declares that granularity; harvesting by "
                "whole days instead (records unchanged since the last harvest are skipped)"
            )
        else:
            self._notice(
                f"{self.base_url}: the source refuses from/until by day (badArgument: "
                f"{message}), which every OAI-PMH source must take; asking for the same days "
                "in seconds instead"
            )
        return parsed

    def _token_with_prefix(
        self,
        verb: Verb,
        params: dict[str, str],
        metadata_prefix: str,
        refused: ParsedResponse,
        listed: dict[str, str | None],
        *,
        stop_on_repeat: bool = False,
    ) -> ParsedResponse:
        """badArgument naming the metadata prefix, to a resumption token sent alone as the
        protocol wants it (pycsw, geopython/pycsw#317: "Missing metadataprefix parameter"):
        the token is sent again with the prefix, and so is every later one of this client.
        Refused again, the prefix was not what the source missed: its first answer stands.
        ``listed`` and ``stop_on_repeat``: the list's own (see `_request`)."""
        again = {**params, "metadataPrefix": metadata_prefix}
        parsed = self._request(verb, again, listed, stop_on_repeat=stop_on_repeat)
        if _refuses_an_argument(parsed):
            return refused
        if parsed.errors:  # the token read (badResumptionToken...): for the sweep to judge
            return parsed
        self.prefix_with_token = True
        message = "; ".join(text or code for code, text in refused.errors)
        self._notice(
            f"{self.base_url}: the source refuses a resumption token sent alone (badArgument: "
            f"{message}), which the protocol wants; sending the metadata prefix with each "
            "resumption token instead"
        )
        return parsed

    def _token_refused(
        self, verb: ListVerb, answer: str, errors: list[tuple[str, str]] | None = None
    ) -> BadResumptionToken:
        """A resumption token refused otherwise than by badResumptionToken (`answer`: an
        HTTP status, or the code of `errors`): the source no longer takes it, for the sweep
        to redo the window."""
        said = "; ".join(text for _code, text in errors or () if text)
        return BadResumptionToken(
            "badResumptionToken" if errors is None else answer,
            f"{answer} in answer to the resumption token" + (f": {said}" if said else ""),
            errors=errors,
            context=f"{self.base_url} ({verb})",
        )

    def _count_undated_deletions(self, records: list[HarvestedRecord]) -> None:
        self._undated_deletions.update(r.identifier for r in records if r.undated_deletion)

    @property
    def undated_deletions_notice(self) -> str | None:
        """The one line telling how many deletions came without a datestamp; None: none."""
        count = len(self._undated_deletions)
        if not count:
            return None
        return (
            f"{self.base_url}: {count} deleted record(s) without a datestamp in their header "
            "(a source's tombstones): dated by the response's responseDate (without one, by "
            "when it was asked for) and applied"
        )

    def _update_command(self, option: str, value: str) -> str:
        """The command that sets ``option`` of the source's harvester, quoted for the text."""
        return f"`oai-pipeline harvesters update {self.harvester_id or 'ID'} {option} {value}`"

    @property
    def _not_an_endpoint(self) -> str:
        """What an operator is told when the base URL answers as no OAI-PMH endpoint does."""
        return (
            "; check that the harvester's base URL is the source's OAI-PMH endpoint "
            f"({self._update_command('--base-url', 'URL')})"
        )

    def _notice(self, message: str) -> None:
        """A quirk of the source the operator should know of: logged once, and kept in
        ``notices`` for the harvest's outcome."""
        if message not in self.notices:
            self.notices.append(message)
            logger.warning("%s", message)

    # ---- one logical request -----------------------------------------------------------

    def _raise_errors(self, parsed: ParsedResponse, verb: Verb, hint: str | None = None) -> None:
        """Raise the response's OAI errors, with ``hint`` (what to check) or, for badVerb,
        the base URL to check: every OAI-PMH endpoint takes the verbs this client sends, so a
        source that refuses one is no OAI-PMH 2.0 endpoint at that URL (or a proxy in front
        of it mangles the query). The source's words alone left the operator guessing."""
        if not parsed.errors:
            return
        code, message = parsed.errors[0]
        if any(c == "badVerb" for c, _ in parsed.errors):
            hint = f"the source refuses the OAI-PMH verb {verb}{self._not_an_endpoint}"
        kind = (
            BadResumptionToken
            if any(c == "badResumptionToken" for c, _ in parsed.errors)
            else OAIError
        )
        sickle_class = getattr(oaiexceptions, code[:1].upper() + code[1:], oaiexceptions.OAIError)
        raise kind(
            code, message, errors=parsed.errors, context=f"{self.base_url} ({verb})", hint=hint
        ) from sickle_class(message)

    def _send(self, params: dict[str, str]) -> tuple[int, httpx.Headers, bytes]:
        with self._limiter:
            deadline = time.monotonic() + self.response_deadline
            query = [*self._endpoint_params, *params.items()]
            with self._http.stream("GET", self._endpoint, params=query) as response:
                if response.history:
                    self._check_redirect(response, params)
                encodings = _content_encodings(response.headers)
                # gzip and deflate are checked and unpacked here (see _unpacked): httpx
                # would fail the page on a plain body labelled gzip (DecodingError). A
                # transport that hands over the body read (httpx.MockTransport) decoded it.
                ours = encodings <= _UNPACKED_HERE and not response.is_stream_consumed
                # One growing buffer, whose bytes getvalue() hands over without a copy: a
                # list of chunks joined at the end held a large page twice at once.
                received = io.BytesIO()
                for chunk in response.iter_raw() if ours else response.iter_bytes():
                    self._give_up_if_abandoned()  # its sweep was closed: stop reading
                    size = received.tell() + len(chunk)
                    if size > self.max_response_bytes:
                        raise self._oversized(params)
                    if time.monotonic() > deadline:  # a transport error: retried
                        raise httpx.ReadTimeout(
                            f"the response took over {self.response_deadline:.0f} s "
                            f"({size} bytes so far)"
                        )
                    received.write(chunk)
            self._limiter.observe(response.headers)
        body = received.getvalue()
        received.close()
        # a body labelled gzip without gzip's magic bytes may be deflate all the same (a
        # server module that wraps zlib's output under the gzip label)
        deflated = ours and bool(encodings & _LABELLED_COMPRESSED)
        return response.status_code, response.headers, self._unpacked(body, params, deflated)

    def _unpacked(self, body: bytes, params: dict[str, str], deflated: bool = False) -> bytes:
        """The body as the source meant it, whatever its Content-Encoding claims (bounded
        like any body): a proxy may label a plain body gzip, PHP's output compression behind
        a compressing web server gzips twice and says so once, a cache may serve stored gzip
        without its header. No XML starts with the gzip magic bytes; a body that does not
        inflate whole is left as it came, for the parser to refuse (and the page to be
        retried). ``deflated``: the source says deflate or gzip, so a body that is no gzip
        may be deflate (zlib-wrapped or raw, both seen; under the gzip label too)."""
        for layer in range(_MAX_COMPRESSION_LAYERS):
            if body.startswith(_GZIP_MAGIC):
                formats: tuple[int, ...] = (_GZIP_WBITS,)
            elif deflated and layer == 0:  # the label names the body as it came
                formats = (zlib.MAX_WBITS, -zlib.MAX_WBITS)
            else:
                break
            unpacked = None
            for wbits in formats:
                unpacked = _inflate(body, wbits, self.max_response_bytes + 1)
                if unpacked is not None:
                    break
            if unpacked is None:
                break
            if len(unpacked) > self.max_response_bytes:
                raise self._oversized(params, " once unpacked")
            body = unpacked
        return body

    def _oversized(self, params: dict[str, str], when: str = "") -> OversizedResponse:
        larger = f"response larger than {_mebibytes(self.max_response_bytes)}{when}"
        return OversizedResponse(
            f"{self.base_url} ({params['verb']}): {larger}; if the source's pages are that "
            "large, raise the reader option max_response_mb",
            detail=f"{larger} (the reader option max_response_mb)",
        )

    def _refuse_downgrade(self, response: httpx.Response) -> None:
        """Refuse a redirect from https to plain http before it is followed: the harvest would
        go on unencrypted (a page read, or altered, on the way) although the operator set an
        https base URL, and the permanent-redirect notice then advised the http address.
        Whether a source is harvested in the clear is the operator's choice, not its."""
        if not response.has_redirect_location or response.url.scheme != "https":
            return
        try:
            target = response.url.join(response.headers["location"])
        except httpx.InvalidURL:
            return  # httpx refuses it when it builds the next request
        if target.scheme == "http":
            raise ConfigurationError(
                f"{self.base_url} redirects (HTTP {response.status_code}) from https to plain "
                f"http, {target.copy_with(query=None)}: not followed, as the harvest would go "
                "on unencrypted; ask the source's operator to serve OAI-PMH over https"
            )

    def _check_redirect(self, response: httpx.Response, params: dict[str, str]) -> None:
        """A redirect that dropped the query fails (the source answers a request we did not
        send: badVerb, a home page). One that kept it is noted once per client, permanent or
        not: httpx follows it at every request, each costing two (a base URL gone to https
        or to a new path), and the harvester's base URL should name where it leads. Never
        followed for good here: which URL is the source's, the operator decides."""
        first = response.history[0].status_code
        kept = [
            (name, value)
            for name, value in response.url.params.multi_items()
            if name not in OAI_ARGUMENTS
        ]
        # the endpoint as a base URL names it: without our OAI-PMH arguments, with its own
        # and with the user and password the registered one names (shown)
        endpoint = (
            response.url.copy_with(params=kept) if kept else response.url.copy_with(query=None)
        )
        moved_to = with_credentials_of(str(endpoint), self._registered_url)
        if response.url.params.get("verb") != params["verb"]:
            raise ConfigurationError(
                f"{self.base_url} redirects (HTTP {first}) to {response.url}, dropping the "
                f"OAI-PMH query: set the harvester's base URL to {moved_to}"
            )
        asked = httpx.URL(self._endpoint)
        if self._endpoint_params:
            asked = asked.copy_with(params=self._endpoint_params)
        # back where it was asked (a bounce through a cookie check): no other URL to set
        if self._redirect_noted or endpoint == asked:
            return
        self._redirect_noted = True
        update = f"({self._update_command('--base-url', moved_to)}{_password_hint(moved_to)})"
        if first in (301, 308):
            self._notice(
                f"{self.base_url} has moved permanently (HTTP {first}) to {moved_to}: each "
                "request goes there by a redirect (two requests for one); set the harvester's "
                f"base URL to it {update}"
            )
        else:
            self._notice(
                f"{self.base_url} redirects requests (HTTP {first}) to {moved_to}: each goes "
                "there by a redirect (two requests for one); if the source lives there now, "
                f"set the harvester's base URL to it {update}"
            )

    def _request(
        self,
        verb: Verb,
        params: dict[str, str],
        listed: dict[str, str | None] | None = None,
        *,
        stop_on_repeat: bool = False,
        retries: int | None = None,
    ) -> ParsedResponse:
        """Send until a usable OAI-PMH response arrives, or give up with HarvestProtocolError.

        ``listed``: the arguments of the list a resumption token in ``params`` continues (its
        first request's), so that a page of another list is told apart (see
        _answers_another_list).

        Retried: transport failures, 408/425/429/5xx, and bodies that are not a whole
        OAI-PMH document (truncated, not XML, HTML with status 200). A Retry-After on
        429/503 is honoured (clamped, jittered); anything else backs off exponentially.

        ``stop_on_repeat`` (a reconcile's identifier sweep, which deletes nothing when it
        fails and runs again later): an unreadable body that is not a web page, byte for
        byte the one the try before got, ends the retries: the source answers so (a page it
        cuts at the same byte, not a dropped connection's), and the rest of the budget, a
        minute and more, was spent on the same answer. A web page is still waited out (a
        proxy's maintenance page), and a harvest's pages are retried to the end, but for a
        page refused for what its bytes hold (UnusablePage.final_if_repeated: entities
        declared, a value over the parser's bounds), which ends so in any list.
        """
        max_retries = self.max_retries if retries is None else retries
        backoff_retries = polite_retries = 0
        waited = 0.0
        # what the tries that came back as whole documents not OAI-PMH's sent (hashed), and
        # whether any try failed otherwise: all alike, the source answers so (NotOAIResponse)
        answers: set[bytes] = set()
        otherwise = False
        last_unreadable: bytes | None = None  # the try before's body, hashed, if unreadable
        while True:
            self._give_up_if_abandoned()
            retry_after: float | None = None
            refused_with: int | None = None  # this try's HTTP status, if it said "retry"
            # an OAI-PMH <error> whose code the protocol does not define (_error_of_its_own)
            own_error: str | None = None
            unreadable = False  # this try's body could not be read as OAI-PMH
            # an answer to another request (a page of another list, another item's record)
            another_answer: ParsedResponse | None = None
            web_page = False  # the answer was an HTML page
            # the request's own time: dates a deletion without a datestamp in a response
            # without a responseDate (see pages._date_deletions)
            asked_at = format_datestamp(datetime.now(UTC), "seconds")
            try:
                status, headers, body = self._send(params)
            except httpx.TooManyRedirects as exc:  # a loop: the next try goes round too
                raise PersistentProtocolError(
                    f"{self.base_url} ({verb}): the source's redirects go round or on and "
                    f"on ({exc}): check the harvester's base URL in a browser"
                ) from exc
            except httpx.UnsupportedProtocol as exc:  # a redirect to a scheme not http(s)
                raise PersistentProtocolError(f"{self.base_url} ({verb}): {exc}") from exc
            except httpx.InvalidURL as exc:  # the harvester's base URL: retrying cannot help
                raise ConfigurationError(f"{self.base_url}: invalid URL: {exc}") from exc
            except (httpx.TransportError, httpx.DecodingError) as exc:
                refused = _certificate_refused(exc)
                if refused is not None:  # so until the source or our trust changes
                    raise PersistentProtocolError(
                        f"{self.base_url} ({verb}): "
                        f"{_certificate_problem(refused, _host_asked(exc))}"
                    ) from exc
                host = _unknown_host(exc)
                if host is not None:
                    # The name does not exist: a typo in a base URL that never answered
                    # (each retry meets it again), a DNS blip in one that did (retried).
                    proven = self.endpoint_proven
                    raise (HarvestProtocolError if proven else UnprovenEndpoint)(
                        f"{self.base_url} ({verb}): no host is named {host!r} ({exc})"
                        f"{'' if proven else _NEVER_ANSWERED}: check the harvester's base URL"
                    ) from exc
                if _not_tls(exc):  # https to a port that speaks plain http: the same each try
                    plain = self.base_url.replace("https://", "http://", 1)
                    raise PersistentProtocolError(
                        f"{self.base_url} ({verb}): the source does not speak https there: "
                        f"{exc} (if it serves plain http, set the harvester's base URL to "
                        f"{plain})"
                    ) from exc
                problem = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            else:
                if status in _RETRY_STATUSES or status >= 500:
                    answer = _oai_error_answer(body, verb, status)
                    own_error = None if answer is None else _error_of_its_own(answer)
                    if answer is not None and own_error is None:
                        return answer
                    problem = f"HTTP {status}" + (f" with {own_error}" if own_error else "")
                    refused_with = status
                    if status in _RETRY_AFTER_STATUSES:
                        retry_after = parse_retry_after(headers.get("retry-after"))
                        if retry_after is not None and retry_after > self.max_retry_wait:
                            # waited for a retry's time only: said, should the retries end
                            problem += (
                                f", asked to come back in {_duration(retry_after)} "
                                "(Retry-After), longer than a retry waits "
                                f"({_duration(self.max_retry_wait)}): the run resumes where "
                                "it stopped when run again after that"
                            )
                else:
                    try:
                        parsed = parse_response(
                            body,
                            verb,
                            _charset(headers),
                            self.max_response_bytes,
                            asked_at=asked_at,
                        )
                    except ForeignNamespace as exc:  # the same at every try
                        raise ForeignNamespaceResponse(f"{self.base_url} ({verb}): {exc}") from exc
                    except UnusablePage as exc:
                        if status >= 300:
                            raise self._refused(verb, params, status, headers, body) from exc
                        problem, web_page, unreadable = str(exc), exc.web_page, True
                        digest = hashlib.sha256(body).digest()
                        final = stop_on_repeat or exc.final_if_repeated
                        if final and not web_page and digest == last_unreadable:
                            raise self._same_answer(verb, problem, exc.whole) from exc
                        last_unreadable = None if web_page else digest
                        # a web page of an endpoint that answered OAI-PMH (none other gets
                        # here) is a proxy's maintenance page, the same each try while it lasts
                        # and gone after: never the source's answer (not NotOAIResponse)
                        if exc.whole and not web_page:
                            answers.add(digest)
                        else:
                            otherwise = True
                        if (web_page or exc.plain_text) and not self.endpoint_proven:
                            raise UnprovenEndpoint(
                                f"{self.base_url} ({verb}): {problem}{_NEVER_ANSWERED}"
                                f"{self._not_an_endpoint}"
                            ) from exc
                    else:
                        self.endpoint_proven = self._answered = True
                        if parsed.notice is not None:
                            self._notice(f"{self.base_url}: {parsed.notice}")
                        own_error = _error_of_its_own(parsed)
                        problem = None
                        if own_error is not None:  # a failure of the source's, retried
                            problem = own_error
                        elif verb == "GetRecord":
                            problem = _answers_another_item(
                                parsed, params["identifier"], echo=not self._echo_unreliable
                            )
                        elif not self._echo_unreliable:
                            problem = _answers_another_list(parsed, params, listed or {})
                        if problem is None:
                            return parsed
                        if own_error is None:
                            another_answer = parsed
            otherwise = otherwise or not unreadable
            if not unreadable:
                last_unreadable = None
            if retry_after is not None:
                polite_retries += 1
                exhausted = polite_retries > max_retries * _POLITE_RETRIES_PER_RETRY
                wait = jittered(clamp(retry_after, self.max_retry_wait), self._rng)
            else:
                backoff_retries += 1
                exhausted = backoff_retries > max_retries
                wait = backoff_delay(
                    backoff_retries, self.backoff_base, self.max_retry_wait, self._rng
                )
            attempts = backoff_retries + polite_retries
            if (exhausted or waited + wait > self.retry_budget_seconds) and another_answer:
                if verb == "GetRecord":
                    return another_answer  # judged by get_record: that item's error
                # The same on every try: the source's echo, not an answer mixed up.
                self._echo_unreliable = True
                self._notice(
                    f"{self.base_url} ({verb}): {problem} on each of {attempts} tries; "
                    "taken as the token's page, and the source's <request> no longer judged "
                    "(if records are missing, harvest the window again)"
                )
                return another_answer
            if exhausted or waited + wait > self.retry_budget_seconds:
                hint = self._not_an_endpoint if web_page else ""
                if unreadable and not otherwise and len(answers) == 1 and attempts > 1:
                    raise NotOAIResponse(
                        f"{self.base_url} ({verb}): {problem}, the same at each of {attempts} "
                        f"tries: the source's answer, not a passing fault{hint}",
                        detail=f"{problem}, the same at each of {attempts} tries",
                    )
                tried = (
                    f"{attempts} attempt{'s' if attempts > 1 else ''} and {waited:.0f} s of waiting"
                )
                message = f"{self.base_url} ({verb}): gave up after {tried}; last problem: "
                if unreadable:
                    raise MalformedResponse(
                        f"{message}{problem}{hint}",
                        detail=f"{problem} (the last of {tried})",
                    )
                if own_error is not None:
                    raise SourceFailure(f"{message}{problem}", status=refused_with)
                raise HarvestProtocolError(
                    f"{message}{problem}{hint}",
                    status=refused_with,
                    detail=f"gave up after {tried}",
                )
            logger.warning(
                "%s (%s): %s; retry %d in %.1f s", self.base_url, verb, problem, attempts, wait
            )
            self._pause(wait)
            waited += wait

    def _same_answer(self, verb: Verb, problem: str, whole: bool) -> MalformedResponse:
        """The error of an unreadable answer sent twice in a row byte for byte (see
        `_request`'s ``stop_on_repeat``): a whole XML document of another kind is the
        source's answer (NotOAIResponse, the run not retried); a body cut short or not XML
        stays transient, as a plain-text maintenance notice may pass."""
        said = (
            f"{self.base_url} ({verb}): {problem}, the same bytes at 2 tries in a row: the "
            "source's answer, not retried further"
        )
        detail = f"{problem}, the same bytes at 2 tries in a row"
        return (NotOAIResponse if whole else MalformedResponse)(said, detail=detail)

    def _refused(
        self, verb: Verb, params: dict[str, str], status: int, headers: httpx.Headers, body: bytes
    ) -> HarvestProtocolError:
        """The error of an HTTP error status without an OAI-PMH answer, saying what its body
        says (`what_the_body_says`) and what the status means here. 401/403 is access
        refused: before the base URL ever answered OAI-PMH, the harvester's to fix (each try
        meets it again, UnprovenEndpoint); after, a firewall or rate limiter that blocks a
        harvest for a while (some answer a burst of requests so), which the retries of the
        run, minutes apart, may outlast. 404/410 at a base URL that never answered is a
        wrong URL."""
        if status < 400 and "location" not in headers:  # httpx follows only a redirect that
            return RefusedRequest(  # says where to go
                f"{self.base_url} ({verb}): HTTP {status}, a redirect without a Location "
                "(where to go): the source's web server or proxy is misconfigured",
                status=status,
            )
        named = f"HTTP {status} {httpx.codes.get_reason_phrase(status)}".rstrip()
        says = what_the_body_says(body)
        said = f"{self.base_url} ({verb}): {named} ({says})"
        if status in _ACCESS_REFUSED_STATUSES:
            said += ": the source refuses the harvester"
            if not self.endpoint_proven:
                return UnprovenEndpoint(f"{said}{_NEVER_ANSWERED}{_ACCESS_REFUSED_HINT}")
            when = (
                "after answering this run's earlier requests"
                if self._answered
                else "though this base URL answered earlier harvests"
            )
            return RefusedRequest(
                f"{said} {when}: a firewall or rate limiter blocking it for a while, or "
                "access withdrawn; the run resumes where it stopped (retried, or run again "
                "later); if it recurs, lower the harvester's rate limit "
                "(rate_limit_per_minute) or ask the source's operator",
                status=status,
                detail=says,
            )
        # no such page: not for a token (the source forgot it)
        if status in (404, 410) and "resumptionToken" not in params:
            if not self.endpoint_proven:
                return UnprovenEndpoint(f"{said}{_NEVER_ANSWERED}{self._not_an_endpoint}")
            said += self._not_an_endpoint
        return RefusedRequest(said, status=status, detail=says)

    def _pause(self, seconds: float) -> None:
        """Every wait (request spacing, retries); a worker whose sweep stopped gives up."""
        self._give_up_if_abandoned()
        stop: threading.Event | None = getattr(self._local, "stop", None)
        if self._sleep is not None:
            self._sleep(seconds)
        elif stop is not None:
            stop.wait(seconds)
        else:
            time.sleep(seconds)
        self._give_up_if_abandoned()

    def _give_up_if_abandoned(self) -> None:
        stop: threading.Event | None = getattr(self._local, "stop", None)
        if stop is not None and stop.is_set():
            raise _Abandoned


def _answers_another_list(
    parsed: ParsedResponse, params: dict[str, str], listed: dict[str, str | None]
) -> str | None:
    """Why the answer to a resumption token is not its page, by the request the source says
    it answers (OAI-PMH's <request> element): another token, or arguments other than those
    of the list the token continues (``listed``), mean a cache or load balancer mixed
    answers up. Taken, such a page ended the list early or went on with another list, and
    the rest of ours was never harvested; retried, the source answers the token. None: it
    may be the token's (what is not echoed is not judged)."""
    sent = params.get("resumptionToken")
    if sent is None:
        return None
    echoed = parsed.answered.get("resumptionToken")
    if echoed is not None and not _token_forms(echoed.strip()) & _token_forms(sent):
        return (
            f"the source answered another resumption token ({_shorten(echoed)!r}), not "
            f"{_shorten(sent)!r} (a page of another list)"
        )
    if echoed is None:
        for name, ours in listed.items():
            theirs = parsed.answered.get(name)
            if theirs is not None and not _same_argument(theirs, ours):
                return (
                    f"the source answered the first request of another list ({name} "
                    f"{theirs!r}, not {ours!r}), not the resumption token {_shorten(sent)!r}"
                )
    return None


def _answers_another_item(parsed: ParsedResponse, identifier: str, *, echo: bool) -> str | None:
    """Why a GetRecord answer is not the one to ``identifier``: its record's header names
    another identifier, or (``echo``) its <request> does (an error answer, idDoesNotExist
    included, has no header to tell). A proxy or cache mixing answers up sends another
    item's; taken, that record was staged in place of the one asked for, and another's
    idDoesNotExist deleted ours. None: it may be ours (what is not said is not judged)."""
    echoed = parsed.answered.get("identifier") if echo else None
    if echoed is not None and not (
        _same_argument(echoed, identifier) or same_identifier(unquote(echoed), identifier)
    ):
        return (
            f"the source answered GetRecord for identifier {echoed.strip()!r}, not {identifier!r}"
        )
    for record in parsed.records:
        if record.identifier and not same_identifier(record.identifier, identifier):
            return f"the source answered with record {record.identifier!r}, not {identifier!r}"
    return None


def same_identifier(one: str, other: str) -> bool:
    """Whether two item identifiers are one, however written: around whitespace, and an OAI
    identifier's scheme and namespace (`oai:Example.ORG:…`, a domain name) in any case; its
    local part, and any other identifier, as written (the guidelines make them
    case-sensitive)."""
    return _identifier_key(one.strip()) == _identifier_key(other.strip())


def _identifier_key(identifier: str) -> tuple[str, ...]:
    scheme, _, rest = identifier.partition(":")
    namespace, colon, local = rest.partition(":")
    if scheme.lower() != "oai" or not colon:
        return (identifier,)
    return ("oai", namespace.lower(), local)


def _same_argument(echoed: str, ours: str | None) -> bool:
    """Whether an echoed list argument is ours: the same text, or that text URL-escaped as it
    was sent (a set `col_10023/1` echoed `col_10023%2F1`); for from/until the same UTC day
    (a source may echo them at another granularity or precision than sent)."""
    echoed = echoed.strip()
    if ours is None or echoed == ours or unquote(echoed) == ours:
        return unquote(echoed) == (ours or "")
    try:
        return parse_datestamp(echoed).date() == parse_datestamp(ours).date()
    except InvalidDatestamp:
        return False


def _token_forms(token: str) -> set[str]:
    """A token as sent and as a source may echo it, URL-decoded (a `+` as a space or not)."""
    return {token, unquote(token), unquote_plus(token)}


def _refuses_an_argument(parsed: ParsedResponse) -> bool:
    return bool(parsed.errors) and all(code == "badArgument" for code, _ in parsed.errors)


def _refuses_the_dates(parsed: ParsedResponse) -> bool:
    """badArgument that may concern from/until: not when every message names another
    argument alone (Zenodo: "metadataPrefix does not exist"), which a request by day would
    only be refused again."""
    return _refuses_an_argument(parsed) and any(
        _DATES_NAMED.search(message) or not _OTHER_ARGUMENT_NAMED.search(message)
        for _, message in parsed.errors
    )


def _wants_the_prefix(parsed: ParsedResponse) -> bool:
    """badArgument whose message names the metadata prefix (and not the token)."""
    return _refuses_an_argument(parsed) and any(
        _PREFIX_NAMED.search(message) and "token" not in message.lower()
        for _, message in parsed.errors
    )


def _dates_named(parsed: ParsedResponse) -> bool:
    """Whether an error message names from/until or dates."""
    return any(_DATES_NAMED.search(message) for _, message in parsed.errors)


def _dates_in_seconds(params: dict[str, str]) -> bool:
    return any("T" in params.get(name, "") for name in _DATE_ARGUMENTS)


def _in_form(name: str, datestamp: str, form: Granularity) -> str:
    """A from/until datestamp in ``form``: its UTC day, or in seconds (a day's ``until`` its
    last second: the bound holds the whole day). One that is no datestamp is left for the
    source to refuse."""
    try:
        moment = parse_datestamp(datestamp)
    except InvalidDatestamp:
        return datestamp
    if form == "seconds" and name == "until" and "T" not in datestamp:
        moment += timedelta(days=1, seconds=-1)
    return format_datestamp(moment, form)


def _password_hint(url: str) -> str:
    """What a URL to set, shown with `***` for its password, asks of the operator."""
    return ", the password in place of ***" if ":***@" in url else ""


def _duration(seconds: float) -> str:
    """A wait as an operator reads it: `90 s`, `45 min`, `2 h 0 min`."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 120 else f"{minutes // 60} h {minutes % 60} min"


def _mebibytes(size: int) -> str:
    mebibytes = size / (1024 * 1024)
    return f"{mebibytes:g} MiB" if mebibytes >= 1 else f"{size} bytes"


def _certificate_refused(exc: BaseException | None) -> ssl.SSLCertVerificationError | None:
    """Why a failed connection failed on verifying the source's certificate (None: not so)."""
    while exc is not None:
        if isinstance(exc, ssl.SSLCertVerificationError):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


# OpenSSL's verify codes (X509_V_ERR_*) whose cure is not to trust another CA bundle.
_CERTIFICATE_EXPIRED, _CERTIFICATE_NOT_YET_VALID = 10, 9
_CERTIFICATE_FOR_ANOTHER_HOST = frozenset({62, 64})  # HOSTNAME_MISMATCH, IP_ADDRESS_MISMATCH


def _certificate_problem(refused: ssl.SSLCertVerificationError, host: str) -> str:
    """What is wrong with the source's certificate, and its cure: each cause has its own
    (SSL_CERT_FILE cannot make an expired certificate or one for another host good)."""
    code = getattr(refused, "verify_code", None)
    if code == _CERTIFICATE_EXPIRED:
        return (
            f"the source's TLS certificate has expired ({refused}): ask the source's "
            "operator to renew it"
        )
    if code == _CERTIFICATE_NOT_YET_VALID:
        return (
            f"the source's TLS certificate is not valid yet ({refused}): check this machine's "
            "clock, or ask the source's operator"
        )
    if code in _CERTIFICATE_FOR_ANOTHER_HOST:
        return (
            f"the source's TLS certificate is not for host {host!r} ({refused}): set the "
            "harvester's base URL to a host name the certificate names, or ask the source's "
            "operator to fix it"
        )
    return (
        f"the source's TLS certificate is not trusted: {refused} (set SSL_CERT_FILE to a CA "
        "bundle that trusts it, or fix the base URL)"
    )


def _unknown_host(exc: BaseException | None) -> str | None:
    """The host name of a failed connection whose name does not resolve (EAI_NONAME: the
    name does not exist, not a resolver that failed for now, EAI_AGAIN), else None."""
    host = _host_asked(exc)
    while exc is not None:
        if isinstance(exc, socket.gaierror) and exc.errno == socket.EAI_NONAME:
            return host
        exc = exc.__cause__ or exc.__context__
    return None


def _host_asked(exc: BaseException | None) -> str:
    """The host an httpx error's request went to (after redirects: the last one's)."""
    if not isinstance(exc, httpx.RequestError):
        return "?"
    try:
        return exc.request.url.host  # httpx raises RuntimeError when it kept no request
    except RuntimeError:
        return "?"


# What OpenSSL says when the server answers the TLS handshake with plain HTTP (an https base
# URL for a source that serves http on that port): WRONG_VERSION_NUMBER up to OpenSSL 3.1,
# PACKET_LENGTH_TOO_LONG or HTTP_REQUEST after.
_PLAIN_HTTP_REASONS = frozenset({"WRONG_VERSION_NUMBER", "PACKET_LENGTH_TOO_LONG", "HTTP_REQUEST"})


def _not_tls(exc: BaseException | None) -> bool:
    """Whether a failed connection failed because the server does not speak TLS at all."""
    while exc is not None:
        if isinstance(exc, ssl.SSLError) and getattr(exc, "reason", None) in _PLAIN_HTTP_REASONS:
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _content_encodings(headers: httpx.Headers) -> set[str]:
    """The codings a Content-Encoding header names, lower case (none: empty)."""
    codings = headers.get_list("content-encoding", split_commas=True)
    return {coding.strip().lower() for coding in codings if coding.strip()}


def _inflate(body: bytes, wbits: int, limit: int) -> bytes | None:
    """``body`` inflated (gzip, zlib or raw deflate by ``wbits``), at most ``limit`` bytes of
    it; None unless it inflates whole (broken, cut short, or not compressed). A gzip body
    may be several members one after the other (RFC 1952 §2.2: what `cat a.gz b.gz`, and
    proxies that compress chunk by chunk, send): each is inflated in turn, zero bytes of
    padding between or after them skipped; what follows the last member that is no gzip is
    left out, as gzip(1) does (a member cut short is not whole: None).

    Inflated a step at a time into one buffer: zlib gathers one call's output in blocks and
    joins them, so a page inflated in one call was held twice at once."""
    out = io.BytesIO()
    rest = body
    while True:
        inflater = zlib.decompressobj(wbits)
        pending = rest
        try:
            while not inflater.eof:
                piece = inflater.decompress(pending, min(_INFLATE_STEP, limit - out.tell()))
                pending = inflater.unconsumed_tail
                out.write(piece)
                if out.tell() >= limit:
                    return out.getvalue()
                if not piece and not pending:
                    return None  # cut short
        except zlib.error:
            return None
        if wbits != _GZIP_WBITS:
            return out.getvalue()
        rest = inflater.unused_data.lstrip(b"\0")
        if not rest.startswith(_GZIP_MAGIC):
            return out.getvalue()


def _charset(headers: httpx.Headers) -> str | None:
    """The charset parameter of the Content-Type, if any."""
    for parameter in headers.get("content-type", "").split(";")[1:]:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip("\"'") or None
    return None


def _error_of_its_own(parsed: ParsedResponse) -> str | None:
    """What a response whose every <error> has a code OAI-PMH does not define says (None
    for one holding any of the protocol's errors, which answer the request): it was taken
    for the source's answer, and failed the run at once, though the source meant "I failed
    this time" (a timeout, a database error) and the next try may well pass."""
    if not parsed.errors or any(code in OAI_ERROR_CODES for code, _ in parsed.errors):
        return None
    said = "; ".join(f"{code}: {text}" if text else code for code, text in parsed.errors)
    return f"an error OAI-PMH does not define, the source's own ({said})"


def _oai_error_answer(body: bytes, verb: Verb, status: int) -> ParsedResponse | None:
    """An OAI ``<error>`` sent with a 5xx status (other than 503, which asks to come back
    later): the source's answer, whatever the status says; retrying would not change it."""
    if status in _RETRY_AFTER_STATUSES or status < 500 or b"error" not in body:
        return None
    try:
        parsed = parse_response(body, verb)
    except (UnusablePage, ForeignNamespace):
        return None
    return parsed if parsed.errors else None


# How far the records a sweep listed may be from the completeListSize the source last
# announced before the end is taken for the source's doing: records deleted (or, in a window
# open at its end, added) while the list was swept move the count a little, rarely by more
# than 1 % of the list; a small list moves by a few at most. A list ended early (a token
# page answered with an empty list and no token) or a size that counts something else is
# further off. Not the cursor: sources misuse it (DOAJ counts through the page, some send a
# page number).
_COUNT_SLACK_RECORDS = 5
_COUNT_SLACK_SHARE = 100


def list_size_slack(announced: int) -> int:
    """How far a list of ``announced`` records may end from that size (see above)."""
    return max(_COUNT_SLACK_RECORDS, announced // _COUNT_SLACK_SHARE)


def _lost(list_size: int | None, listed: int | None, delivered: int | None) -> bool:
    """Whether noRecordsMatch for a token means the source lost the list: the records
    listed so far are short of its completeListSize, by more than changes meanwhile
    explain (`ended_short`, the list note's rule: before, a small list short by a quarter
    but within a large list's slack was taken as ended, its last records never harvested),
    or at all when the cursor says so too. The cursor alone (a checkpoint an older
    version saved has no count) is misused by some sources: a page number made a list whose
    last page had a token look lost every time, and the window was redone until the run
    failed."""
    if list_size is None:
        return False
    by_cursor = delivered is not None and delivered < list_size
    if listed is None:
        return by_cursor
    return ended_short(listed, list_size) or (by_cursor and listed < list_size)


def _whole(list_size: int | None, listed: int | None) -> bool:
    """Whether a sweep listed every record of the completeListSize its source announced (a
    token that fails or loops after that has nothing more to give)."""
    return list_size is not None and listed is not None and listed >= list_size


def ended_short(listed: int, announced: int) -> bool:
    """Whether a list that ended with ``listed`` records fell short of the ``announced``
    completeListSize by more than records deleted while it was listed explain. Short of a
    small list, the slack of a few records was most of it (3 of 8 records, the rest never
    sent, said nothing; a reconcile deleted the 5): short by more than a quarter of its
    size (one record at least) is short."""
    return announced - listed > min(list_size_slack(announced), max(1, announced // 4))


def _count_notice(listed: int, announced: int) -> str | None:
    """What to tell of a list that ended with ``listed`` records though the source last
    announced ``announced`` (completeListSize); None: close enough."""
    if listed < announced:
        if not ended_short(listed, announced):
            return None
        return (
            f"the list ended after {listed} records, {announced - listed} fewer than the "
            f"{announced} the source announced (completeListSize), more than records "
            "deleted while it was listed explain: the source may have ended it early and "
            "records may be missing (harvest the window again; if it recurs, tell the "
            "source's operator)"
        )
    if listed - announced <= list_size_slack(announced):
        return None
    return (
        f"the list held {listed} records, {listed - announced} more than the {announced} "
        "the source announced (completeListSize): its count is off, or it listed records "
        "twice"
    )


def _refused_when_whole_notice(code: str, listed: int | None, announced: int | None) -> str:
    """What to tell of a list taken as ended because the source refused its resumption token
    after the ``announced`` completeListSize was reached (``listed`` past it: twice)."""
    if listed == announced:
        return (
            f"the source refused a resumption token ({code}) after all {announced} records "
            "its completeListSize announced; taken as the end of the list"
        )
    return (
        f"the source refused a resumption token ({code}) after {listed} records, more than "
        f"the {announced} its completeListSize announced, twice at the same point; taken as "
        "the end of the list (its count is off: if records are missing, tell the source's "
        "operator)"
    )


def _refused_twice_notice(listed: int, announced: int) -> str:
    """What to tell of a list taken as ended because the source answered noRecordsMatch to
    its resumption token after ``listed`` of the ``announced`` records in two attempts in a
    row (the count notice's rest would advise harvesting again, which was done)."""
    return (
        f"the source answered noRecordsMatch to its resumption token after {listed} of the "
        f"{announced} records its completeListSize announced, twice at the same point; taken "
        "as the end of the list (its count is off, or it leaves records out: if records are "
        "missing, tell the source's operator)"
    )


# A namespace's trailing version (DataCite's `kernel-3`, `kernel-4.5`; `…/v2/`): one format.
_NAMESPACE_VERSION = re.compile(r"[-/_.]?v?\d+(?:\.\d+)*/?$")


def _format_of(namespace: str) -> str:
    """The metadata format a namespace names, whatever its version: DataCite's OAI-PMH
    serves each record in the kernel it was registered in (kernel-3 beside kernel-4 in one
    list), which is no other format than asked for."""
    return _NAMESPACE_VERSION.sub("", namespace.rstrip("/"))


def _other_format_notice(
    where: str, other: str, namespaces: set[str], from_first_page: bool
) -> str:
    """What the operator is told of records on a list's later pages whose metadata is in
    another namespace than its first page's: DSpace answers the pages its resumption tokens
    name in oai_dc whatever prefix was asked for (DSpace/xoai#28, wontfix). Each such record
    failed its transform (unknown_root) with nothing to say why."""
    first = ", ".join(sorted(namespaces))
    page = "the list's first page" if from_first_page else "an earlier page of the list"
    return (
        f"{where}: the records of the pages resumption tokens name come in the namespace "
        f"{other}, not in {first} as on {page}: the source answers its tokens in another "
        "format than asked for (DSpace: DSpace/xoai#28); staged as sent, their transform "
        "fails (unknown_root) unless the harvester's transformer chain reads that format"
    )


def _window_words(from_: str | None, until: str | None, set_spec: str | None) -> str:
    """The list's arguments as a notice names them ("" for the whole source)."""
    parts = (("from", from_), ("until", until), ("set", set_spec))
    return "".join(f" {name} {value}" for name, value in parts if value)


def _repeats(page: Page, seen_pages: set[int]) -> bool:
    """Whether the page lists the records of an earlier page of this sweep (the same
    identifiers in the same order); remembers it otherwise. By identifier only: a page sent
    again after its records changed (a later datestamp, deleted meanwhile) lists no more
    records than the first time, and counted, it made a list lost later look whole."""
    key = hash(tuple(r.identifier for r in page.records))
    if key in seen_pages:
        return True
    seen_pages.add(key)
    return False


def _shorten(token: str, keep: int = 40) -> str:
    return token if len(token) <= keep else token[:keep] + "..."


def in_set(set_specs: Iterable[str], set_spec: str | None) -> bool:
    """Whether a record of these setSpecs is in the harvester's set (or in a set below it,
    `a:b` for `a`, as a list of the set has it); every record is when there is no set."""
    if not set_spec:
        return True
    return any(spec == set_spec or spec.startswith(set_spec + ":") for spec in set_specs)
