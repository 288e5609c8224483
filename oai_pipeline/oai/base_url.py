"""What a registered base URL names: the endpoint, apart from the OAI-PMH arguments pasted
with it. Apart from the client, so that comparing base URLs (`harvesters show`) does not
load the harvesting machinery (sickle)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from urllib.parse import SplitResult, unquote, urlsplit, urlunsplit

import httpx

from oai_pipeline.errors import ConfigurationError

# The arguments OAI-PMH defines: in a registered base URL's query (a request URL pasted as the
# base URL, `…/oai?verb=Identify`) they are not the endpoint's and are left out.
OAI_ARGUMENTS = frozenset(
    {"verb", "metadataPrefix", "from", "until", "set", "resumptionToken", "identifier"}
)


def _authority(url: str) -> tuple[SplitResult, str, str] | None:
    """The URL split, the user information it names (`alice:secret` of
    `https://alice:secret@host/oai`) and the rest of its authority; None when it names none
    (or is no URL)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    userinfo, at, host = parts.netloc.rpartition("@")
    return (parts, userinfo, host) if at else None


# `${NAME}` for the user or the password: read from the environment when the harvest runs,
# so that neither the state database nor a launchpad's run config holds the secret.
_ENVIRONMENT_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def credentials_apart(
    base_url: str, environ: Mapping[str, str] = os.environ
) -> tuple[str, tuple[str, str] | None]:
    """The base URL without the user and password it names, and them (percent-decoded, a
    `${NAME}` read from `environ`): a source behind HTTP basic auth is registered so. The
    client sends them as an Authorization header and names the URL without them in every
    message and log line."""
    authority = _authority(base_url)
    if authority is None:
        return base_url, None
    parts, userinfo, host = authority
    user, _, password = (unquote(part) for part in userinfo.partition(":"))
    credentials = (_from_environment(user, environ), _from_environment(password, environ))
    return urlunsplit(parts._replace(netloc=host)), credentials


def _from_environment(value: str, environ: Mapping[str, str]) -> str:
    reference = _ENVIRONMENT_REFERENCE.fullmatch(value)
    if reference is None:
        return value
    name = reference.group(1)
    if name not in environ:
        raise ConfigurationError(
            f"the base URL's credentials name the environment variable {name}, which is not "
            "set where the harvest runs (set it there, e.g. in the Dagster code location's "
            "environment)"
        )
    return environ[name]


def _shown_userinfo(userinfo: str) -> str:
    """User information as it is printed: a password as `***`, a `${NAME}` as written."""
    user, colon, password = userinfo.partition(":")
    if not colon or _ENVIRONMENT_REFERENCE.fullmatch(unquote(password)):
        return userinfo
    return f"{user}:***"


def shown(base_url: str) -> str:
    """The base URL as it is printed (command line, Dagster metadata, errors): a password it
    names as `***` (a `${NAME}` it reads from the environment as written, no secret), so
    that logs and screens do not carry it."""
    authority = _authority(base_url)
    if authority is None:
        return base_url
    parts, userinfo, host = authority
    hidden = _shown_userinfo(userinfo)
    if hidden == userinfo:
        return base_url
    return urlunsplit(parts._replace(netloc=f"{hidden}@{host}"))


def with_credentials_of(url: str, base_url: str) -> str:
    """`url` (where a redirect of `base_url` leads) with the user and password `base_url`
    names, as `shown` writes them: the URL to set the harvester's base URL to. Without them,
    the harvest of the new URL goes without its credentials."""
    theirs = _authority(base_url)
    if theirs is None or _authority(url) is not None:
        return url
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"{_shown_userinfo(theirs[1])}@{parts.netloc}"))


def split_base_url(base_url: str) -> tuple[str, list[tuple[str, str]]]:
    """The base URL without its query, and the query's own parameters to send with every
    request (`…/index.php?option=com_oai`: httpx would replace the query by the OAI-PMH
    arguments, not add them). A URL httpx cannot read is refused at the first request."""
    try:
        url = httpx.URL(base_url)
    except httpx.InvalidURL:
        return base_url, []
    kept = [(name, value) for name, value in url.params.multi_items() if name not in OAI_ARGUMENTS]
    return str(url.copy_with(query=None)), kept


def without_oai_arguments(base_url: str) -> tuple[str, list[str]]:
    """The base URL as a harvester registers it: without the OAI-PMH arguments pasted into
    its query (`…/oai?verb=Identify`), which every request sets itself, and their names.
    Without any, the URL as given."""
    try:
        url = httpx.URL(base_url)
    except httpx.InvalidURL:
        return base_url, []
    pasted = [name for name, _ in url.params.multi_items() if name in OAI_ARGUMENTS]
    if not pasted:
        return base_url, []
    kept = [(name, value) for name, value in url.params.multi_items() if name not in OAI_ARGUMENTS]
    return str(url.copy_with(params=kept)), list(dict.fromkeys(pasted))


def pasted_arguments_note(given: str | None) -> str | None:
    """What an operator is told when the base URL they gave was registered without its
    OAI-PMH arguments (None: registered as given), so that `harvesters show` and the
    Dagster UI name the endpoint, not one request to it."""
    if not given:
        return None
    cleaned, pasted = without_oai_arguments(given.strip())
    if not pasted:
        return None
    return (
        f"base URL {shown(given.strip())} holds OAI-PMH arguments ({', '.join(pasted)}) that "
        f"every request sets itself: registered as {shown(cleaned)}"
    )


def another_base_url(registered: str, declared: str) -> str | None:
    """The warning for an Identify whose baseURL names another endpoint than the harvester's
    (https for http, the host behind a proxy, another path); None for ours, however written
    (`is_our_base_url`). The harvest keeps to the registered URL: which is right, the
    operator knows; but never is an https harvester told to move to plain http."""
    if not declared or is_our_base_url(registered, declared):
        return None
    if _scheme(registered) == "https" and _scheme(declared) == "http":
        advice = "that one is plain http: keep to https"
    else:
        advice = "if the source lives there, set the harvester's base URL to it"
    return (
        f"{shown(registered)}: the source's Identify names another base URL, {declared}; "
        f"harvesting the registered one ({advice})"
    )


def is_our_base_url(registered: str, declared: str) -> bool:
    """Whether a base URL a source declares is the registered one: the same endpoint
    (`same_endpoint`), or the plain http form of a registered https one, which a source
    behind a TLS-terminating proxy declares (the same source; not a move, nor to follow)."""
    if same_endpoint(registered, declared):
        return True
    if _scheme(registered) != "https" or _scheme(declared) != "http":
        return False
    return _endpoint_key(registered)[1:] == _endpoint_key(declared)[1:]


def same_endpoint(one: str, other: str) -> bool:
    """Whether two base URLs name one endpoint, however written (`_endpoint_key`): a base
    URL edited only so is no move of the source."""
    return _endpoint_key(one) == _endpoint_key(other)


def _scheme(url: str) -> str:
    try:
        return httpx.URL(url.strip()).scheme.lower()
    except httpx.InvalidURL:
        return ""


_DEFAULT_PORTS = {"http": 80, "https": 443}


def _endpoint_key(url: str) -> tuple[object, ...]:
    """What tells endpoints apart: scheme and host in any case, the port (the scheme's
    default written or not: the same), the path with or without a trailing slash, the
    URL's own query."""
    try:
        parsed = httpx.URL(url.strip())
    except httpx.InvalidURL:
        return (url.strip(),)
    scheme = parsed.scheme.lower()
    query = sorted(
        (name, value) for name, value in parsed.params.multi_items() if name not in OAI_ARGUMENTS
    )
    # the scheme's default port written or not: the same (None, whatever the scheme)
    port = None if parsed.port == _DEFAULT_PORTS.get(scheme) else parsed.port
    return (scheme, parsed.host.lower(), port, parsed.path.rstrip("/"), tuple(query))
