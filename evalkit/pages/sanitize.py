"""What notebook HTML may hold in the HTML report (`evalkit.pages.report`): `sanitize`.

nh3 (the Rust sanitizer ammonia) does the sanitizing: it parses the fragment as a browser does and
keeps the tags and attributes of tables, text and figures (`SAFE_TAGS`, `SAFE_ATTRIBUTES`); other
tags are dropped (``<script>`` with its content), event handlers and ``javascript:`` links removed,
unclosed tags closed, so a page built from executed notebooks runs nothing.

What nh3 does not cover, kept here: CSS, which nh3 passes through unread, and which could load from
the network (``url(``, ``@import``). CSS (a ``style`` attribute, a ``<style>`` element) is kept only
when it is plainly static (`safe_css`): lowercased, its text (comments included: a comment cannot
split a name the rule reads) may hold no backslash (no CSS escape, so ``\\75 rl(`` cannot spell
``url(``), no ``@`` (no ``@import``, ``@font-face`` ``src:``, ``@media``), no ``<`` and no ``(`` but
one that opens a function of `CSS_FUNCTIONS` (colours, ``calc`` and the structural pseudo-classes:
none of them fetches). Anything else is dropped whole (the attribute, or the element's text), so
``url(``, ``image-set(``, ``-webkit-image-set(``, ``image(``, ``cross-fade(``, ``element(``,
``expression(`` and whatever a browser adds later are refused by the rule rather than by a list of
the known ones. The kit's rule for ``src``: only inline images (``data:image/png|jpeg|gif``), so
nothing is fetched; links (``href``) may be relative or http(s), never ``data:``. And a choice of
display: nh3 drops a refused tag, the report shows it as text (a reader sees that a cell held a
``<script>``), so the tags outside `SAFE_TAGS` are escaped first (`_TAG`); this is no boundary
(whatever that pass misreads, nh3 still cleans).
"""

from __future__ import annotations

import html
import re

import nh3

# What notebook HTML may hold in the report: the tags and attributes of tables, text and figures.
SAFE_TAGS = {"a", "abbr", "b", "blockquote", "br", "caption", "code", "col", "colgroup", "dd", "del", "details",
             "div", "dl", "dt", "em", "figcaption", "figure", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img",
             "ins", "kbd", "li", "mark", "ol", "p", "pre", "s", "samp", "small", "span", "strong", "style", "sub",
             "summary", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "u", "ul"}
SAFE_ATTRIBUTES = {"class", "id", "colspan", "rowspan", "align", "title", "alt", "width", "height", "border",
                   "open", "href", "src", "style", "scope", "start"}
IMAGES = ("data:image/png", "data:image/jpeg", "data:image/gif")  # the only `src` kept: nothing is fetched
# The CSS functions `safe_css` lets through: none of them can name a resource.
CSS_FUNCTIONS = {"rgb", "rgba", "hsl", "hsla", "calc", "not", "nth-child", "nth-of-type", "nth-last-child",
                 "nth-last-of-type"}
REMOVED_CSS = "/* removed: the page loads nothing */"
# A <style> element in nh3's output: there `<` is escaped everywhere but in tags (text, attribute values;
# comments are removed), and a style text ends at its first `</style`, so this finds each element whole.
_TAG = re.compile(r"</?([A-Za-z][^\s/>]*)[^>]*>")
_STYLE = re.compile(r"<style>(.*?)</style>", re.S)


def safe_css(css: str) -> bool:
    """True for CSS that cannot fetch anything (the module docstring's rule): no backslash, ``@``, ``<``
    or NUL, and every ``(`` opens a function of `CSS_FUNCTIONS`. A strict allow rule: what it does
    not know it refuses."""
    plain = css.lower()
    if any(c in plain for c in "\\@<\x00"):
        return False
    return all(name in CSS_FUNCTIONS for name in re.findall(r"([a-z0-9_-]*)\s*\(", plain))


def _attribute(tag: str, name: str, value: str) -> str | None:
    """nh3's attribute filter: the value kept, or None to drop the attribute (CSS, `src`, `data:` links)."""
    plain = re.sub(r"[\s\x00-\x1f]", "", value).lower()
    if name == "style":
        return value if safe_css(value) else None
    if name == "src":
        return value if plain.startswith(IMAGES) else None
    if name == "href" and plain.startswith("data:"):
        return None
    return value


def sanitize(fragment: str) -> str:
    """Notebook HTML as the report shows it: nh3 keeps `SAFE_TAGS` with `SAFE_ATTRIBUTES` (links to
    pages and anchors, images inline), other tags are shown as text, so a cell's ``<script>``
    never runs; CSS is kept only where `safe_css` allows it (a style sheet that does not becomes
    `REMOVED_CSS`)."""
    shown = _TAG.sub(lambda m: m.group(0) if m.group(1).lower() in SAFE_TAGS else html.escape(m.group(0)), fragment)
    cleaned = nh3.clean(shown, tags=SAFE_TAGS, clean_content_tags={"script"},
                        attributes={"*": SAFE_ATTRIBUTES}, attribute_filter=_attribute,
                        url_schemes={"http", "https", "data"}, link_rel=None)
    parts = _STYLE.split(cleaned)  # even: outside <style> elements; odd: a style element's text
    return "".join(f"<style>{part if safe_css(part) else REMOVED_CSS}</style>" if odd
                   else part.replace("'", "&#x27;")  # spelled as the kit's html.escape spells it
                   for odd, part in ((i % 2, p) for i, p in enumerate(parts)))
