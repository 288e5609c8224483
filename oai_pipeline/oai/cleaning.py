"""Make a page from a real feed well-formed where that is safe: before the one strict parse.

Real feeds carry characters XML 1.0 forbids (literal control characters, and numeric
references such as ``&#1;``, ``&#xFFFE;`` or lone surrogates ``&#xD800;``), and declare
encodings they do not use (UTF-8 declared, Latin-1 sent, or the other way round). Both are
repaired here; everything else is left to the strict parser to refuse. A page the parser
refuses gets one more repair before its records are isolated (:func:`repair_references`):
feeds built from HTML carry ``&nbsp;`` and bare ampersands.
"""

from __future__ import annotations

import codecs
import re
from html.entities import html5

# XML 1.0 Char: #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF]
_ILLEGAL_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
# The C0 controls XML forbids, as single bytes: in UTF-8 (and ASCII) they stand for themselves.
_CONTROL_BYTES = tuple(bytes([c]) for c in range(0x20) if c not in (0x9, 0xA, 0xD))
_CHAR_REFERENCE = re.compile(r"&#(?:[xX]([0-9a-fA-F]+)|([0-9]+));")
_DECLARATION = re.compile(
    rb"""^(\s*<\?xml\s[^>]*?encoding\s*=\s*)(["'])([A-Za-z0-9._:-]+)\2""", re.ASCII
)
_LATIN_NAMES = {"iso-8859-1", "iso8859-1", "latin-1", "latin1", "l1", "cp1252", "windows-1252"}
_UTF8_NAMES = {"utf-8", "utf8"}
_WIDE_PREFIXES = ("utf-16", "utf16", "utf-32", "utf32", "ucs-2", "ucs2", "ucs-4", "ucs4")


def _is_legal(code_point: int) -> bool:
    return (
        code_point in (0x9, 0xA, 0xD)
        or 0x20 <= code_point <= 0xD7FF
        or 0xE000 <= code_point <= 0xFFFD
        or 0x10000 <= code_point <= 0x10FFFF
    )


def _drop_illegal_reference(match: re.Match[str]) -> str:
    hex_digits, decimal = match.groups()
    code_point = int(hex_digits, 16) if hex_digits else int(decimal)
    return match.group(0) if _is_legal(code_point) else ""


def _single_byte_fallback(error: UnicodeError) -> tuple[str, int]:
    """Decode error handler: bytes that are not UTF-8 are taken as Windows-1252 (Latin-1).

    Works byte by byte, so one Latin-1 record in an otherwise UTF-8 page does not garble the
    others. UTF-8 encoded surrogates (ED A0..BF xx) are illegal characters and are dropped.
    """
    assert isinstance(error, UnicodeDecodeError)
    data, start = error.object, error.start
    if (
        data[start] == 0xED
        and start + 2 < len(data)
        and 0xA0 <= data[start + 1] <= 0xBF
        and 0x80 <= data[start + 2] <= 0xBF
    ):
        return "", start + 3
    byte = bytes(data[start : start + 1])
    try:
        return byte.decode("cp1252"), start + 1
    except UnicodeDecodeError:
        return byte.decode("latin-1"), start + 1


codecs.register_error("oai_pipeline_latin1_fallback", _single_byte_fallback)


def _declared_encoding(data: bytes) -> tuple[str | None, re.Match[bytes] | None]:
    match = _DECLARATION.match(data[:512])
    if match is None:
        return None, None
    return match.group(3).decode("ascii").lower(), match


# Where the NUL bytes of ASCII characters fall in UTF-16 and UTF-32: (code unit size, the
# positions within a unit that are NUL); the other position(s) hold the character.
_WIDE_LAYOUTS = {
    "utf-16-le": (2, (1,)),
    "utf-16-be": (2, (0,)),
    "utf-32-le": (4, (1, 2, 3)),
    "utf-32-be": (4, (0, 1, 2)),
}


def _wide_without_bom(data: bytes) -> str | None:
    """UTF-16 or UTF-32 sent without its byte order mark, known by its first four characters
    (ASCII in every XML document: the declaration, or whitespace and the root's start; XML
    1.0 appendix F looks at as many). Read as UTF-8, its NUL bytes were dropped as illegal
    characters and every character beyond Latin-1 garbled, without an error."""
    if b"\x00" not in data[:4]:
        return None
    for name, (size, nul_positions) in _WIDE_LAYOUTS.items():
        head = data[: 4 * size]
        if len(head) < 4 * size:
            continue
        units = [head[start : start + size] for start in range(0, len(head), size)]
        if all(
            unit[position] == 0 if position in nul_positions else unit[position] != 0
            for unit in units
            for position in range(size)
        ):
            return name
    return None


def _decode(data: bytes, charset: str | None = None) -> tuple[str, bool]:
    """The page as text, and whether the bytes must be re-encoded (declaration rewritten).

    ``charset`` is the HTTP Content-Type's: for bytes that are not UTF-8 it names the
    encoding before the XML declaration does (RFC 7303); UTF-8 bytes are UTF-8 regardless."""
    if data.startswith(codecs.BOM_UTF8):
        return data[3:].decode("utf-8", "oai_pipeline_latin1_fallback"), True
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return data.decode("utf-16", "replace"), True
    wide = _wide_without_bom(data)
    if wide is not None:
        return data.decode(wide, "replace"), True
    declared, _ = _declared_encoding(data)
    if declared is None or declared in _UTF8_NAMES or declared.startswith(_WIDE_PREFIXES):
        # A UTF-16/32 declaration readable as ASCII bytes (no BOM) is wrong: one byte a letter.
        try:
            return data.decode("utf-8"), declared not in _UTF8_NAMES and declared is not None
        except UnicodeDecodeError:
            pass
        # Said to be UTF-8 but not quite: byte by byte, so one Latin-1 record in a UTF-8
        # page garbles nothing else. Undeclared: the HTTP charset, if it names another.
        external = _decode_as(data, charset) if declared is None else None
        if external is not None:
            return external, True
        return data.decode("utf-8", "oai_pipeline_latin1_fallback"), True
    if data.isascii():
        # Re-encoded (declaration rewritten) only when the parser would not know the name.
        return data.decode("ascii"), not _known_codec(declared)
    # Non-ASCII bytes that decode as UTF-8 are UTF-8 whatever the declaration says: text in
    # a single-byte charset (Latin-1, Latin-2, Windows-125x) almost never does.
    try:
        return data.decode("utf-8"), True
    except UnicodeDecodeError:
        pass
    for name in (charset, declared):
        text = _decode_as(data, name)
        if text is not None:
            return text, True
    return data.decode("utf-8", "oai_pipeline_latin1_fallback"), True


def _decode_as(data: bytes, name: str | None) -> str | None:
    """``data`` in the single- or multi-byte charset ``name``; None for no name, UTF-8 or
    UTF-16/32 (tried already, or impossible without a BOM), or a charset that does not fit."""
    if name is None or name in _UTF8_NAMES or name.startswith(_WIDE_PREFIXES):
        return None
    if name in _LATIN_NAMES:
        return _latin(data)
    try:
        return data.decode(name)
    except (LookupError, UnicodeDecodeError):
        return None


def _known_codec(name: str) -> bool:
    try:
        codecs.lookup(name)
    except LookupError:
        return False
    return True


def _latin(data: bytes) -> str:
    try:
        return data.decode("cp1252")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def _may_hold_illegal(data: bytes, text: str, reencode: bool) -> bool:
    """False when ``text`` surely holds no illegal character, found with byte searches
    (memchr) instead of the character-class regex.

    Only for text that is ``data`` decoded strictly as UTF-8 or ASCII (``reencode`` false):
    then a control character is the very same byte in ``data``, and a lone surrogate cannot
    be there at all (the strict decoder refuses UTF-8-encoded surrogates).
    """
    if reencode:
        return True
    if any(byte in data for byte in _CONTROL_BYTES):
        return True
    return "\ufffe" in text or "\uffff" in text


# What a page's bytes are searched for in UTF-8: U+FFFE and U+FFFF, references to characters.
_NONCHARACTER_BYTES = (b"\xef\xbf\xbe", b"\xef\xbf\xbf")
_CHAR_REFERENCE_BYTES = re.compile(rb"&#(?:[xX]([0-9a-fA-F]+)|([0-9]+));")
# How much of a page is decoded at a time to check that it is UTF-8 (see _sound_utf8).
_VALIDATION_STEP = 256 * 1024


def _sound_utf8(data: bytes) -> bool:
    """Whether ``data`` is a page to parse as it is: UTF-8 (declared so, or undeclared)
    without a character XML forbids, literal or referenced. Found with byte searches, and the
    UTF-8 checked a slice at a time: a large page was decoded whole for the check, a copy of
    one to four times its size held beside it (the usual page needs no other)."""
    if data.startswith(codecs.BOM_UTF8):
        return False
    declared, _ = _declared_encoding(data)
    if declared is not None and declared not in _UTF8_NAMES:
        return False
    if any(byte in data for byte in _CONTROL_BYTES + _NONCHARACTER_BYTES):
        return False
    if b"&#" in data:
        for match in _CHAR_REFERENCE_BYTES.finditer(data):
            hex_digits, decimal = match.groups()
            if not _is_legal(int(hex_digits, 16) if hex_digits else int(decimal)):
                return False
    decoder = codecs.getincrementaldecoder("utf-8")()
    view = memoryview(data)
    try:
        for start in range(0, len(data), _VALIDATION_STEP):
            decoder.decode(view[start : start + _VALIDATION_STEP])
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


_LEADING_JUNK = re.compile(rb"(?:\s|\xef\xbb\xbf)+")


def _without_leading_junk(data: bytes) -> bytes:
    """``data`` from its first ``<``, when only whitespace and UTF-8 BOMs come before it; one
    BOM kept in front if there was any (it says the bytes are UTF-8)."""
    junk = _LEADING_JUNK.match(data)
    if junk is None or not data.startswith(b"<", junk.end()):
        return data
    bom = codecs.BOM_UTF8 if codecs.BOM_UTF8 in junk.group(0) else b""
    return bom + data[junk.end() :]


def clean_page(data: bytes, charset: str | None = None) -> bytes:
    """UTF-8 bytes of the page without illegal characters; the input itself when already clean.

    ``charset``: the HTTP Content-Type's, if any. Whitespace and UTF-8 byte order marks
    before the XML declaration (PHP endpoints send what their included files hold before
    ``<?php``: line breaks, BOMs, in any order) are dropped: no parser accepts them there.
    The fast path (valid UTF-8, nothing illegal) costs one decode and a few byte searches.
    """
    if data[:1].isspace() or data.startswith(codecs.BOM_UTF8):
        data = _without_leading_junk(data)
    if _sound_utf8(data):
        return data
    text, reencode = _decode(data, charset.lower() if charset else None)
    if _may_hold_illegal(data, text, reencode) and _ILLEGAL_CHARS.search(text):
        text = _ILLEGAL_CHARS.sub("", text)
        reencode = True
    if "&#" in text:
        cleaned = _CHAR_REFERENCE.sub(_drop_illegal_reference, text)
        if cleaned != text:
            text, reencode = cleaned, True
    if not reencode:
        return data
    out = text.encode("utf-8")
    declared, match = _declared_encoding(out)
    if match is not None and declared not in _UTF8_NAMES:
        out = out[: match.start(3)] + b"UTF-8" + out[match.end(3) :]
    return out


# CDATA sections and comments (left as they are; one left open runs to the end, so that the
# search stays linear), or an ampersand and the reference it starts.
_REFERENCE_OR_VERBATIM = re.compile(
    rb"<!\[CDATA\[(?:.*?\]\]>|.*)|<!--(?:.*?-->|.*)"
    rb"|&(#[0-9]+;|#[xX][0-9a-fA-F]+;|[A-Za-z][A-Za-z0-9]*;)?",
    re.S,
)
_XML_ENTITIES = frozenset({b"amp;", b"lt;", b"gt;", b"quot;", b"apos;"})


def _repair_reference(match: re.Match[bytes]) -> bytes:
    reference = match.group(1)
    if match.group(0).startswith(b"<") or (
        reference is not None and (reference.startswith(b"#") or reference in _XML_ENTITIES)
    ):
        return match.group(0)
    if reference is None:  # a bare ampersand: `Tom & Jerry`, a token `a=1&b=2`
        return b"&amp;"
    characters = html5.get(reference.decode("ascii"))
    if characters is None:  # no entity of HTML either: an error the parser reports
        return match.group(0)
    return "".join(f"&#{ord(c)};" for c in characters).encode("ascii")


def repair_references(data: bytes) -> bytes:
    """``data`` (cleaned UTF-8) with its bare ampersands escaped and its HTML named entities
    (``&nbsp;``, ``&eacute;``, which XML does not know) written as character references;
    the input itself when there is nothing to repair. Other undeclared entities stay (the
    record's error): nothing is ever expanded from a declaration. Only for a page the strict
    parser refused: a well-formed page never has either."""
    repaired = _REFERENCE_OR_VERBATIM.sub(_repair_reference, data)
    return data if repaired == data else repaired
