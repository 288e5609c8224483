"""Readers: where a harvester's records come from. A plug-in interface plus the OAI-PMH one.

A reader is registered under the ``oai_pipeline.readers`` entry point group and named by a
harvester's ``loader`` spec (``oai-pmh{json5 options}``); its ``Options`` model validates
those options.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar

import httpx
from pydantic import BaseModel, ConfigDict, Field

from oai_pipeline.errors import PipelineError
from oai_pipeline.harvesters.model import Harvester
from oai_pipeline.oai.client import OAIClient
from oai_pipeline.oai.types import HarvestedRecord, IdentifyInfo, Page, SweepCheckpoint
from oai_pipeline.xml_safety import MAX_DOCUMENT_BYTES


class Reader(ABC):
    """Reads one harvester's source: Identify, the list sweep of a window, an identifier sweep
    (for reconciling sources without persistent deletions) and records by identifier."""

    Options: ClassVar[type[BaseModel]]

    def __init__(self, options: BaseModel, harvester: Harvester) -> None:
        self.options = options
        self.harvester = harvester

    @abstractmethod
    def identify(self) -> IdentifyInfo:
        """The source's Identify (granularity, earliest datestamp, deletion policy)."""

    def identify_once(self) -> IdentifyInfo:
        """Identify asked once, without retries: a harvest holding the Identify saved last
        time falls back on that, where a source down, or one whose Identify broke, cost the
        retries' wait (a minute with the defaults) before the list waited as long again.
        A reader that cannot ask so asks as `identify` does."""
        return self.identify()

    @abstractmethod
    def sweep(
        self,
        *,
        from_: str | None,
        until: str | None,
        checkpoint: SweepCheckpoint | None,
        save_checkpoint: Callable[[SweepCheckpoint], None],
    ) -> Iterator[Page]:
        """Every page of the records of one window (ListRecords), resumable from a checkpoint."""

    @abstractmethod
    def list_identifiers(
        self, *, from_: str | None = None, until: str | None = None
    ) -> Iterator[Page]:
        """Every page of headers the source holds (ListIdentifiers), for reconcile runs."""

    @abstractmethod
    def get_records(self, identifiers: list[str]) -> Iterator[HarvestedRecord]:
        """The given records, one by one; an unknown identifier is that record's error."""

    @property
    def notices(self) -> list[str]:
        """Quirks of the source met so far that the operator should know of (one line each),
        for the harvest's outcome; a reader that meets none need not override."""
        return []

    def get_record(self, identifier: str) -> HarvestedRecord | None:
        """One record (`get_records` of it), None if the reader gives none: asked one at a
        time, a failure is that identifier's, not the end of a generator of several."""
        return next(iter(self.get_records([identifier])), None)

    def answers_now(self) -> bool:
        """Whether the source answers a request now, asked anew (not a remembered answer):
        it tells a source refusing single records from one refusing the harvester. A reader
        that cannot ask says False."""
        return False

    def know_set(self, set_spec: str) -> None:  # noqa: B027 - a hint, free to ignore
        """The harvester's set is one the source has (a run listed it before): an empty
        dated list of it need not be checked against the source's sets."""

    def first_contact(self) -> None:  # noqa: B027 - a hint, free to ignore
        """The harvester's source has never answered (no Identify of it is saved): an answer
        that is no harvesting protocol's at all (a web page) is a wrong address, to report
        at once rather than wait out as a source's passing outage."""

    def close(self) -> None:  # noqa: B027 - readers without resources need not override
        """Release connections and files."""

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


DAY_SECONDS = 86_400


class OAIPMHReaderOptions(BaseModel):
    """Options of the ``oai-pmh`` loader spec, e.g. ``oai-pmh{timeout: 120, max_retries: 8}``."""

    model_config = ConfigDict(extra="forbid")

    # Waits are bounded by a day: a socket timeout or a sleep beyond the platform's time_t
    # was an OverflowError at the first request, not a refusal at registration.
    timeout: float = Field(
        60.0,
        gt=5,
        le=DAY_SECONDS,
        description="seconds the source may stay silent during a request; a whole response "
        "may take 5 times as long",
    )
    max_retries: int = Field(6, ge=0, description="retries of a failed request")
    backoff_base: float = Field(1.0, ge=0, description="first backoff wait in seconds")
    max_retry_wait: float = Field(
        300.0, ge=0, le=DAY_SECONDS, description="longest single wait in seconds"
    )
    retry_budget_seconds: float = Field(
        1800.0, ge=0, description="total waiting allowed for one request's retries"
    )
    max_response_mb: int = Field(
        MAX_DOCUMENT_BYTES // (1024 * 1024),
        ge=1,
        le=1024,
        description="largest response in MiB (a page of the list); a larger one fails the run",
    )
    user_agent: str | None = Field(None, description="User-Agent with your contact details")
    rate_limit_per_minute: int | None = Field(
        None, gt=0, description="overrides the harvester's rate limit"
    )
    max_empty_pages: int = Field(50, ge=1, description="empty pages in a row before giving up")
    max_restarts: int = Field(3, ge=0, description="window restarts after badResumptionToken")
    prefetch: bool = Field(
        True, description="request the next page while the current one is being stored"
    )


class OAIPMHReader(Reader):
    """The built-in reader (entry point ``oai-pmh``): the harvester's OAI-PMH endpoint,
    metadata prefix and set, through :class:`OAIClient`."""

    Options: ClassVar[type[BaseModel]] = OAIPMHReaderOptions

    def __init__(
        self,
        options: BaseModel | Mapping[str, Any] | None,
        harvester: Harvester,
        *,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        if options is None or isinstance(options, Mapping):
            options = OAIPMHReaderOptions.model_validate(dict(options or {}))
        elif not isinstance(options, OAIPMHReaderOptions):
            options = OAIPMHReaderOptions.model_validate(options.model_dump())
        super().__init__(options, harvester)
        self._options: OAIPMHReaderOptions = options
        self._identify: IdentifyInfo | None = None
        self._client = OAIClient(
            harvester.base_url,
            rate_limit_per_minute=(
                options.rate_limit_per_minute or harvester.rate_limit_per_minute
            ),
            timeout=options.timeout,
            max_retries=options.max_retries,
            backoff_base=options.backoff_base,
            max_retry_wait=options.max_retry_wait,
            retry_budget_seconds=options.retry_budget_seconds,
            max_response_bytes=options.max_response_mb * 1024 * 1024,
            user_agent=options.user_agent,
            harvester_id=harvester.id,
            transport=transport,
            sleep=sleep,
        )

    @property
    def client(self) -> OAIClient:
        return self._client

    @property
    def notices(self) -> list[str]:
        undated = self._client.undated_deletions_notice
        return [*self._client.notices, *([undated] if undated else [])]

    def set_rate_limit(self, per_minute: int | None) -> None:
        """A run option overrides the configured rate limit; None restores it."""
        self._client.rate_limit_per_minute = (
            per_minute
            or self._options.rate_limit_per_minute
            or self.harvester.rate_limit_per_minute
        )

    def identify(self) -> IdentifyInfo:
        """Asked once per reader and remembered."""
        return self._identified(retries=None)

    def identify_once(self) -> IdentifyInfo:
        return self._identified(retries=0)

    def _identified(self, *, retries: int | None) -> IdentifyInfo:
        """The Identify this reader got, or asked now (`retries`: the client's if None)."""
        if self._identify is None:
            self._identify = self._client.identify(retries=retries)
        return self._identify

    def answers_now(self) -> bool:
        """A fresh Identify (after the client's retries) answered."""
        try:
            self._client.identify()
        except PipelineError:
            return False
        return True

    def sweep(
        self,
        *,
        from_: str | None,
        until: str | None,
        checkpoint: SweepCheckpoint | None,
        save_checkpoint: Callable[[SweepCheckpoint], None],
    ) -> Iterator[Page]:
        return self._client.sweep(
            "ListRecords",
            metadata_prefix=self.harvester.metadata_prefix,
            from_=from_,
            until=until,
            set_spec=self.harvester.setspec,
            checkpoint=checkpoint,
            save_checkpoint=save_checkpoint,
            max_empty_pages=self._options.max_empty_pages,
            max_restarts=self._options.max_restarts,
            prefetch=self._options.prefetch,
        )

    def list_identifiers(
        self, *, from_: str | None = None, until: str | None = None
    ) -> Iterator[Page]:
        return self._client.sweep(
            "ListIdentifiers",
            metadata_prefix=self.harvester.metadata_prefix,
            from_=from_,
            until=until,
            set_spec=self.harvester.setspec,
            max_empty_pages=self._options.max_empty_pages,
            max_restarts=self._options.max_restarts,
            prefetch=self._options.prefetch,
            # a reconcile's sweep: a failure deletes nothing, the next reconcile lists again
            stop_on_repeat=True,
        )

    def know_set(self, set_spec: str) -> None:
        self._client.know_set(set_spec)

    def first_contact(self) -> None:
        self._client.endpoint_proven = False

    def get_records(self, identifiers: list[str]) -> Iterator[HarvestedRecord]:
        for identifier in identifiers:
            yield self._client.get_record(identifier, self.harvester.metadata_prefix)

    def close(self) -> None:
        self._client.close()
