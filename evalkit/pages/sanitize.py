"""What notebook HTML may hold in the HTML report (`evalkit.pages.report`): `sanitize`.

The tags and attributes of tables, text and figures are kept (`SAFE_TAGS`, `SAFE_ATTRIBUTES`);
anything else (``<script>``, ``<iframe>``, event handlers, ``javascript:`` links) is shown as
escaped text or dropped, so a page built from executed notebooks runs nothing and loads nothing
from the network.

CSS (a ``style`` attribute, a ``<style>`` element) is kept only when it is plainly static
(`safe_css`): lowercased, its text (comments included: a comment cannot split a name the rule
reads) may hold no backslash (no CSS escape, so ``\\75 rl(`` cannot spell ``url(``), no ``@``
(no ``@import``, ``@font-face`` ``src:``, ``@media``), no ``<`` and no ``(`` but one that opens a
function of `CSS_FUNCTIONS` (colours, ``calc`` and the structural pseudo-classes: none of them
fetches). Anything else is dropped whole (the attribute, or the element's text), so ``url(``,
``image-set(``, ``-webkit-image-set(``, ``image(``, ``cross-fade(``, ``element(``,
``expression(`` and whatever a browser adds later are refused by the rule rather than by a list
of the known ones.
"""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

# What notebook HTML may hold in the report: the tags and attributes of tables, text and figures.
# Anything else (<script>, <iframe>, event handlers, javascript: links) is shown as escaped text.
SAFE_TAGS = {"a", "abbr", "b", "blockquote", "br", "caption", "code", "col", "colgroup", "dd", "del", "details",
             "div", "dl", "dt", "em", "figcaption", "figure", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img",
             "ins", "kbd", "li", "mark", "ol", "p", "pre", "s", "samp", "small", "span", "strong", "style", "sub",
             "summary", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "u", "ul"}
SAFE_ATTRIBUTES = {"class", "id", "colspan", "rowspan", "align", "title", "alt", "width", "height", "border",
                   "open", "href", "src", "style", "scope", "start"}
VOID_TAGS = {"br", "hr", "img", "col"}
# The CSS functions `safe_css` lets through: none of them can name a resource.
CSS_FUNCTIONS = {"rgb", "rgba", "hsl", "hsla", "calc", "not", "nth-child", "nth-of-type", "nth-last-child",
                 "nth-last-of-type"}
REMOVED_CSS = "/* removed: the page loads nothing */"


def safe_css(css: str) -> bool:
    """True for CSS that cannot fetch anything (the module docstring's rule): no backslash, ``@``, ``<``
    or NUL, and every ``(`` opens a function of `CSS_FUNCTIONS`. A strict allow rule: what it does
    not know it refuses."""
    plain = css.lower()
    if any(c in plain for c in "\\@<\x00"):
        return False
    return all(name in CSS_FUNCTIONS for name in re.findall(r"([a-z0-9_-]*)\s*\(", plain))


class _Sanitizer(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=False)
        self.out: list[str] = []
        self.open: list[str] = []

    def _safe_value(self, name: str, value: str) -> bool:
        plain = re.sub(r"[\s\x00-\x1f]", "", value).lower()
        if name == "href":
            return plain.startswith(("#", "http:", "https:")) or not re.match(r"^[a-z][a-z0-9+.-]*:", plain)
        if name == "src":
            return plain.startswith(("data:image/png", "data:image/jpeg", "data:image/gif"))
        if name == "style":
            return safe_css(value)
        return True

    def handle_starttag(self, tag, attrs):
        if tag not in SAFE_TAGS:
            self.out.append(html.escape(self.get_starttag_text() or f"<{tag}>"))
            return
        kept = "".join(f' {n}="{html.escape(v or "", quote=True)}"' for n, v in attrs
                       if n in SAFE_ATTRIBUTES and self._safe_value(n, v or ""))
        self.out.append(f"<{tag}{kept}>")
        if tag not in VOID_TAGS:
            self.open.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag in SAFE_TAGS and tag not in VOID_TAGS and self.open and self.open[-1] == tag:
            self.open.pop()
            self.out.append(f"</{tag}>")

    def handle_endtag(self, tag):
        if tag in SAFE_TAGS and tag in self.open:
            while self.open:
                last = self.open.pop()
                self.out.append(f"</{last}>")
                if last == tag:
                    break
        elif tag not in VOID_TAGS:
            self.out.append(html.escape(f"</{tag}>"))

    def handle_data(self, data):
        inside_style = bool(self.open) and self.open[-1] == "style"
        if inside_style and not safe_css(data):
            data = REMOVED_CSS
        self.out.append(data if inside_style else html.escape(data, quote=False))

    def handle_entityref(self, name):
        self.out.append(f"&{name};")

    def handle_charref(self, name):
        self.out.append(f"&#{name};")

    def handle_comment(self, data):
        pass

    def handle_decl(self, decl):
        pass

    def unknown_decl(self, data):
        self.out.append(html.escape(data))


def sanitize(fragment: str) -> str:
    """Notebook HTML as the report shows it: `SAFE_TAGS` with `SAFE_ATTRIBUTES` kept (links to
    pages and anchors, images inline), everything else escaped, so a cell's ``<script>`` is shown
    as text and never runs; unclosed tags closed."""
    parser = _Sanitizer()
    parser.feed(fragment)
    parser.close()
    return "".join(parser.out) + "".join(f"</{tag}>" for tag in reversed(parser.open))
