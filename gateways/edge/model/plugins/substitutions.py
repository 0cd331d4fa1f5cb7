"""What redirect and proxy-rewrite share: `regex_uri` substitutions with nginx's template
syntax (`ngx.re.sub`: `$0`, `$1`, `${1}`, `$$`; any other "$" is refused, as ngx.re.sub
refuses it) and nginx's URI escaping."""

from __future__ import annotations

import re
from urllib.parse import quote

# `$1`, `${1}`, `$$`, text without `$`, or a `$` that starts none of these (malformed).
TEMPLATE_PART = re.compile(r"\$(\d+)|\$\{(\d+)\}|(\$\$)|([^$]+)|(\$)")
# nginx's ngx_escape_uri (NGX_ESCAPE_URI): space, "#", "%", "?", controls and non-ASCII bytes.
URI_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) not in "#%?")
# Control characters in a header value built from request variables would split the header.
CONTROLS = {c: f"%{c:02X}" for c in [*range(0x20), 0x7F] if c != 0x09}


def escape_uri(text: str) -> str:
    """As nginx's `ngx.escape_uri` (type URI): what cannot stand in a request line's path."""
    return quote(text, safe=URI_SAFE)


def escape_lax(text: str) -> str:
    """Like `escape_uri` but keeping "%" (already-encoded text) and "?" (a query): what was
    built from templates and decoded request variables, made safe for a request line."""
    return quote(text, safe=URI_SAFE + "%?")


def header_safe(text: str) -> str:
    """`text` with control characters percent-encoded (a header value made of variables)."""
    return text.translate(CONTROLS)


def parse_template(template: str) -> list[str | int]:
    """`template` as literal text and capture numbers; ValueError when malformed."""
    parts: list[str | int] = []
    for found in TEMPLATE_PART.finditer(template):
        number, braced, dollar, text, stray = found.groups()
        if stray is not None:
            raise ValueError(f'bad template "{template}": "$" must start $N, ${{N}} or $$')
        if number is not None or braced is not None:
            parts.append(int(number or braced))
        else:
            parts.append("$" if dollar else text)
    return parts


def expand(parts: list[str | int], found: re.Match[str]) -> str:
    """The template with the match's captures (an absent or unmatched group is empty)."""
    out = []
    for part in parts:
        if isinstance(part, int):
            group = found.group(part) if part <= found.re.groups else None
            out.append(group or "")
        else:
            out.append(part)
    return "".join(out)


class Substitution:
    """One `[regex, template]` pair, applied as `ngx.re.sub`: the first match is replaced."""

    __slots__ = ("parts", "regex")

    def __init__(self, pattern: str, template: str) -> None:
        self.regex = re.compile(pattern)
        self.parts = parse_template(template)

    def apply(self, text: str) -> tuple[str, re.Match[str] | None]:
        """`text` with its first match replaced, and the match (None: `text` unchanged)."""
        found = self.regex.search(text)
        if found is None:
            return text, None
        return text[: found.start()] + expand(self.parts, found) + text[found.end() :], found


def substitutions(pairs: list[str]) -> list[Substitution]:
    """`[regex, template, regex, template, ...]` compiled (re.error or ValueError if not)."""
    return [Substitution(pairs[i], pairs[i + 1]) for i in range(0, len(pairs) - 1, 2)]


def regex_uri_problem(pairs: list[str]) -> str | None:
    """Why `regex_uri` cannot be used, worded as APISIX's proxy-rewrite check_schema does."""
    if len(pairs) % 2:
        return "The length of regex_uri should be an even number"
    for i in range(0, len(pairs), 2):
        try:
            Substitution(pairs[i], pairs[i + 1])
        except (re.error, ValueError) as exc:
            return f"invalid regex_uri({pairs[i]}, {pairs[i + 1]}): {exc}"
    return None
