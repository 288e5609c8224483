"""A base URL's user and password: sent as basic auth, never shown."""

from __future__ import annotations

import pytest

from oai_pipeline.errors import ConfigurationError
from oai_pipeline.oai.base_url import credentials_apart, same_endpoint, shown, with_credentials_of


@pytest.mark.parametrize(
    ("url", "apart", "credentials", "as_shown"),
    [
        (
            "https://alice:s3cret@oai.example.org/oai?x=1",
            "https://oai.example.org/oai?x=1",
            ("alice", "s3cret"),
            "https://alice:***@oai.example.org/oai?x=1",
        ),
        # percent-encoded `@` and `:` in either part, a port
        (
            "http://a%40b:p%3Aw%40d@host:8080/oai",
            "http://host:8080/oai",
            ("a@b", "p:w@d"),
            "http://a%40b:***@host:8080/oai",
        ),
        # a user without a password: nothing to hide
        ("http://alice@host/oai", "http://host/oai", ("alice", ""), "http://alice@host/oai"),
        ("http://host/oai", "http://host/oai", None, "http://host/oai"),
        ("http://[::1", "http://[::1", None, "http://[::1"),  # no URL: as it is
    ],
)
def test_credentials_apart_and_shown(
    url: str, apart: str, credentials: tuple[str, str] | None, as_shown: str
) -> None:
    assert credentials_apart(url) == (apart, credentials)
    assert shown(url) == as_shown


def test_credentials_do_not_make_another_endpoint() -> None:
    """A password changed is no move of the source (its resumption tokens stay good)."""
    assert same_endpoint("https://alice:old@host/oai", "https://alice:new@host/oai")
    assert same_endpoint(shown("https://alice:old@host/oai"), "https://host/oai")


@pytest.mark.parametrize(
    "url", ["https://alice:${OAI_PW}@host/oai", "https://alice:$%7BOAI_PW%7D@host/oai"]
)
def test_a_password_named_by_an_environment_variable_is_read_when_the_harvest_runs(
    url: str,
) -> None:
    """Neither the state database nor a run's config holds it; shown as written (no secret)."""
    assert credentials_apart(url, {"OAI_PW": "s3:cret@"}) == (
        "https://host/oai",
        ("alice", "s3:cret@"),
    )
    assert shown(url) == url
    with pytest.raises(ConfigurationError, match="environment variable OAI_PW, which is not set"):
        credentials_apart(url, {})


def test_a_url_to_move_to_is_named_with_the_harvesters_user_as_shown() -> None:
    assert with_credentials_of("https://new/oai", "http://alice:pw@old/oai") == (
        "https://alice:***@new/oai"
    )
    assert with_credentials_of("https://new/oai", "http://old/oai") == "https://new/oai"
    # one naming its own is left as it is
    assert with_credentials_of("https://bob@new/oai", "http://alice:pw@old/oai") == (
        "https://bob@new/oai"
    )
