"""Store URLs as people see them (a baseline store's, a trace store's): shown with the password elided, messages
scrubbed of it, credentials encoded for a client's parser. Every message, log line and command output about a
store goes through here."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

__all__ = ["display_url", "encoded_credentials", "password_of", "scheme_of", "scrub"]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")


def display_url(url: str | Path) -> str:
    """``url`` as every message, log line and command output shows it: the password replaced by ``***``.

    Whatever characters the password holds (an unencoded ``#``, ``/``, ``?`` or ``@`` included): the credentials
    are everything between ``scheme://`` and the last ``@`` of the URL, and what follows their first ``:`` is
    elided. A URL whose port cannot be parsed is shown up to its host and port, so the message names the setting
    that is wrong (``redis://127.0.0.1:abc``, the path and query left out, the password elided as ever). A plain
    path is shown as it is."""
    text = str(url)
    match = _SCHEME.match(text)
    if match is None:
        return text
    scheme, rest = text[: match.end()], text[match.end() :]
    user, at, host = rest.rpartition("@")
    if at and ":" in user:
        rest = f"{user.split(':', 1)[0]}:***@{host}"
    location = host if at else rest
    try:
        parts = urlsplit(scheme + location)
        parts.port  # noqa: B018  (raises ValueError for a port that is not a number)
    except ValueError:
        netloc = re.split(r"[/?#]", location, maxsplit=1)[0]
        return scheme + (rest[: len(rest) - len(location)] if at else "") + netloc
    return scheme + rest


def password_of(url: str | Path) -> str:
    """The password a URL holds, as written (``""`` when none): what :func:`scrub` removes from messages."""
    match = _SCHEME.match(str(url))
    if match is None:
        return ""
    user, at, _host = str(url)[match.end() :].rpartition("@")
    return user.split(":", 1)[1] if at and ":" in user else ""


def scrub(text: str, url: str | Path) -> str:
    """``text`` (a message from a client library, which may quote what it was given) with the password of
    ``url`` removed, as written and percent-decoded."""
    secret = password_of(url)
    if not secret:
        return text
    for form in sorted({secret, unquote(secret), quote(unquote(secret), safe="")}, key=len, reverse=True):
        if form:
            text = text.replace(form, "***")
    return text


def encoded_credentials(url: str) -> str:
    """``url`` with its user and password percent-encoded (as :func:`display_url` finds them), so a client's
    URL parser reads a password holding ``#``, ``/``, ``?`` or ``@`` as the password; an encoded one stays as
    it is."""
    match = _SCHEME.match(url)
    if match is None:
        return url
    user, at, host = url[match.end() :].rpartition("@")
    if not at:
        return url
    name, colon, password = user.partition(":")
    credentials = quote(unquote(name), safe="") + (colon + quote(unquote(password), safe="") if colon else "")
    return f"{url[: match.end()]}{credentials}@{host}"


def scheme_of(url: str) -> str:
    """The URL's scheme; ``"sqlite"`` for a plain path (Windows drive letters included)."""
    match = _SCHEME.match(url)
    return match.group(1).lower() if match else "sqlite"
