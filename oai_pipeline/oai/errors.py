"""Errors of the OAI-PMH client: what the source said (OAIError) and what it did (protocol)."""

from __future__ import annotations

from oai_pipeline.errors import ConfigurationError, PipelineError


class OAIError(PipelineError):
    """An OAI-PMH ``<error>`` the run cannot get past (badArgument, cannotDisseminateFormat, ...).

    A response may carry several ``<error>`` elements: all are in ``errors`` as (code, message);
    ``code`` and ``message`` are the first one's; ``hint``, what the operator should check,
    ends the text. Retrying cannot help, so the client never does.
    """

    def __init__(
        self,
        code: str,
        message: str = "",
        *,
        errors: list[tuple[str, str]] | None = None,
        context: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.code = code
        self.message = message
        self.errors = list(errors) if errors else [(code, message)]
        detail = "; ".join(f"{c}: {m}" if m else c for c, m in self.errors)
        if hint:
            detail = f"{detail} ({hint})"
        super().__init__(f"OAI-PMH error from {context}: {detail}" if context else detail)


class UnknownSet(OAIError, ConfigurationError):
    """The source has no such set (or no sets at all): the harvester's setspec is wrong. Not
    an empty list, which a later reconcile would take for every record deleted."""


class UnknownMetadataFormat(OAIError, ConfigurationError):
    """The source does not disseminate the harvester's metadata prefix at all: its
    metadata prefix is wrong. Every harvest would fail the same way until it is changed."""


class BadResumptionToken(OAIError):
    """The source no longer accepts the token (expired, server restarted): redo the window."""


class NoRecordsMatchForToken(BadResumptionToken):
    """``noRecordsMatch`` in answer to a resumption token. Some sources end a list so (a
    token on the last full page); from others it means the list was lost, which the sweep
    tells apart by the list's completeListSize."""

    def __init__(self, *args: object, response_date: str = "", **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.response_date = response_date


class HarvestProtocolError(PipelineError):
    """The source misbehaves beyond repair: a repeated token, endless empty pages,
    retries exhausted, or a page that stays unparseable after retries.

    ``status``: the HTTP status the source refused the request with (when the retries ran
    out, their last try's), None when there was none (no HTTP answer at all: a connection
    refused, a timeout; or a fault of the answer itself); a caller tells a source refusing
    one item (a GetRecord's 403, or 5xx after the retries) from one that is down.
    ``detail``: what the refusal says besides its status (its body; how long it was tried),
    for a caller that words it its own way."""

    def __init__(self, message: str = "", *, status: int | None = None, detail: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail


class PersistentProtocolError(HarvestProtocolError):
    """A fault the source shows at every attempt (asked again, it answers the same): a
    retry of the run or step fails the same way, so Dagster's retry policy leaves it."""


class LoopingSource(PersistentProtocolError):
    """The source's list goes round (a resumption token repeated short of its end, endless
    empty pages): asked again, it goes round again, so the run is not retried."""


class OversizedResponse(PersistentProtocolError):
    """A response larger than the reader's bound: the same every time it is asked for, so
    it is neither retried nor taken for a resumption token the source lost."""


class UnprovenEndpoint(PersistentProtocolError):
    """A base URL that has never answered OAI-PMH fails as no endpoint would (its host name
    does not exist, a web page or HTTP 404 in its place, HTTP 401/403: access refused):
    almost always a typo in it, or a source that does not let this machine in, which each
    retry meets again. Once it has answered, the same faults are a DNS blip, a maintenance
    page or a firewall blocking a burst of requests (transient)."""


class MalformedResponse(HarvestProtocolError):
    """A response that cannot be read as OAI-PMH after the client's own retries. Transient as
    such: a body cut short (a connection dropped, a Content-Length short of the body) may
    come whole at the next attempt, and a web page sent with status 200 is a proxy's
    maintenance page, the same at each try while it lasts, gone after."""


class NotOAIResponse(MalformedResponse, PersistentProtocolError):
    """A whole XML document that is not OAI-PMH nor a web page (XML of another kind, an
    OAI-PMH envelope without the verb's element), identical at each of the client's tries:
    the source's answer, not a passing fault, so the run is not retried."""


class ForeignNamespaceResponse(NotOAIResponse):
    """A sound OAI-PMH document whose records or token are in another namespace than
    OAI-PMH's: the same every time it is asked for, so it is neither retried nor taken for a
    resumption token the source lost."""


class SourceFailure(HarvestProtocolError):
    """The source answered with an OAI-PMH <error> of its own making (a code the protocol
    does not define: a timeout, a database error) at each of the client's tries: a failure
    of the source's, retried by Dagster as any transient one, not an answer to the request."""


class RefusedRequest(HarvestProtocolError):
    """An HTTP error status that is not "come back later", without an OAI-PMH answer."""

    def __init__(self, message: str, *, status: int, detail: str = "") -> None:
        super().__init__(message, status=status, detail=detail)
        self.status: int = status


class InvalidDatestamp(ConfigurationError, ValueError):
    """Text that is neither an OAI day (YYYY-MM-DD) nor seconds (YYYY-MM-DDThh:mm:ssZ) datestamp."""
