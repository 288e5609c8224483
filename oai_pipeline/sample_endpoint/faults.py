"""Misbehaviour the sample endpoint can be told to show, as real OAI-PMH endpoints do.

All switches are off by default. Request numbers count from 1 over the endpoint's life
(every HTTP request counts, faulty ones included); see `OAIEndpoint.request_count`.
When several switches hit the same request, the first in field order wins.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Faults(BaseModel):
    """What goes wrong, and when; assign a new one to `OAIEndpoint.faults` while it runs."""

    model_config = ConfigDict(extra="forbid")

    drop_connection_on: set[int] = set()
    """Close the socket without sending a response on these request numbers."""
    unavailable_every: int = Field(default=0, ge=0)
    """Every Nth request gets HTTP 503 with `Retry-After` (0: never)."""
    retry_after: str = "1"
    """The 503's `Retry-After`: seconds or an HTTP date (which may lie in the past)."""
    not_xml_on: set[int] = set()
    """HTTP 200 whose body is not XML at all (but is labelled text/xml)."""
    html_error_on: set[int] = set()
    """HTTP 200 with an HTML error page, as some proxies and frameworks send."""
    truncate_on: set[int] = set()
    """HTTP 200 with the XML body cut at 60 % (correct Content-Length for what is sent)."""
    refuse_list_from_cursor: int | None = Field(default=None, ge=0)
    """A list page asked for by a resumption token whose cursor is at least this gets HTTP
    403 (a source that blocks the harvester mid-list): not "come back later", the run fails.
    By cursor, not request number, so that every harvest of the list fails at the same page."""
    expire_tokens_after_pages: int | None = Field(default=None, ge=1)
    """After this many list pages (counted from when these faults were set) the server
    "restarts" once: every resumption token issued so far answers badResumptionToken."""
    illegal_characters: bool = False
    """Inject a literal U+0001 and the references `&#1;`, `&#xFFFE;`, `&#xD800;` (all
    illegal in XML 1.0) into the first title (or first text) of every record's metadata."""
    slow_on: dict[int, float] = {}
    """Wait this many seconds before answering these request numbers (a slow source)."""
    ratelimit_headers: bool = False
    """Send `x-ratelimit-limit/-remaining/-reset` and a `Retry-After` on 200, like Zenodo."""
    ratelimit_limit: int = Field(default=133, ge=1)
    """Requests allowed per window in the rate-limit headers (Zenodo: 133 a minute)."""
    ratelimit_window_seconds: int = Field(default=60, ge=1)
    """Length of the rate-limit window the headers describe."""
    identify_granularity: Literal["day", "seconds"] | None = None
    """Identify declares this granularity whatever the endpoint takes: `seconds` at an
    endpoint of `day` granularity (badArgument to a from/until in seconds) is the Identify
    of DSpace, EPrints and OJS installs that declare more than they take."""
    identify_base_url: str | None = None
    """Identify names this baseURL instead of the endpoint's own (http for https, the host
    behind a proxy, another path)."""
    undated_deletions: bool = False
    """Deleted records' headers carry no <datestamp>, as Zenodo's tombstones do."""
    plain_labelled_gzip: bool = False
    """Every response is sent plain but labelled `Content-Encoding: gzip`, as a
    misconfigured proxy does."""
    unlisted_identifiers: set[str] = set()
    """ListIdentifiers leaves these records out (its completeListSize too) while ListRecords
    and GetRecord still serve them live, as sources with a stale identifier index do
    (DSpace's withdrawn or embargoed items, Invenio, EPrints' per-verb caches)."""
    get_record_without_sets: bool = False
    """GetRecord's headers name no set (its lists' headers do), as some sources' GetRecord
    leaves setSpec out."""
    failing_verbs: set[str] = set()
    """Every request of these verbs gets HTTP 500 (a source whose GetRecord breaks while its
    lists work), after the request-numbered faults above."""
