"""What notebook HTML may hold in the HTML report (`evalkit.pages.report`): `sanitize`.

The tags and attributes of tables, text and figures are kept (`SAFE_TAGS`, `SAFE_ATTRIBUTES`);
anything else (``<script>``, ``<iframe>``, event handlers, ``javascript:`` links, style sheets
that load from elsewhere) is shown as escaped text or dropped, so a page built from executed
notebooks runs nothing and loads nothing from the network.
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
            return "url(" not in plain and "expression(" not in plain and "@import" not in plain
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
        if inside_style and re.search(r"@import|url\(|expression\(|</", data, re.I):
            data = "/* removed: the report loads nothing */"
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
