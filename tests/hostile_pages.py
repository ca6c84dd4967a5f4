"""Hostile inputs for the pages' tests (tests/pages/test_report.py, test_explore.py, test_browser.py).

Each attack tries to make a page built by the kit load `root`/NAME (a recording server in the
browser test) or run a script that sets the page's title to `PWNED`. The ones here all got
through the kit's pages before the strict CSS rule and the escaping (issue 37): CSS escapes that
spell ``url(`` and ``@import``, ``image-set``, a style sheet in a model's label, an ``<img
onerror>`` in an explore page's file name or in a figure's data.
"""

from __future__ import annotations

PWNED = "pwned"
SCRIPT = f"document.title='{PWNED}'"


def style_attributes(root: str) -> dict[str, str]:
    """style="..." values that fetch `root`/NAME, by NAME."""
    return {"escape": f"background:\\75 rl({root}/escape)",
            "escape6": f"background:\\000075rl({root}/escape6)",
            "image-set": f'background-image:image-set("{root}/image-set" 1x)',
            "webkit-image-set": f'background-image:-webkit-image-set("{root}/webkit-image-set" 1x)',
            "escape-r": f"background:u\\72 l({root}/escape-r)"}


def style_sheets(root: str) -> dict[str, str]:
    """<style> texts that fetch `root`/NAME, by NAME."""
    return {"import-escape": f'@\\69 mport "{root}/import-escape";',
            "import-escape6": f'@\\000069mport "{root}/import-escape6";',
            "rule-escape": f"div{{background:\\75 rl({root}/rule-escape)}}",
            "rule-image-set": f'p{{background-image:image-set("{root}/rule-image-set" 1x)}}',
            "font-face": f"@font-face{{font-family:h;src:\\75 rl({root}/font-face)}}body{{font-family:h}}"}


def notebook_html(root: str) -> str:
    """One notebook output (text/html) holding every attack of `style_attributes` and `style_sheets`,
    on elements that are shown (so a browser would fetch their backgrounds)."""
    divs = "".join(f'<div style="{value.replace(chr(34), "&quot;")}">{name}</div>'
                   for name, value in style_attributes(root).items())
    sheets = "".join(f"<style>{text}</style>" for text in style_sheets(root).values())
    return f"{sheets}<p>shown</p>{divs}"


def label(root: str) -> str:
    """A model label (a user's models file) holding a style sheet and an image with an onerror script."""
    return f'<style>@\\69 mport "{root}/label";</style><img src=x onerror="{SCRIPT}">Hostile'


def file_name(root: str) -> str:
    """An explore page's file name ('/' cannot be in one: a browser reads '\\' as '/' in an http URL)."""
    server = root.replace("/", "\\")
    return f'explore-<img src={server}\\filename onerror="{SCRIPT}">.html'


def png(root: str) -> str:
    """image/png data that would break out of the report's src attribute."""
    return f'iVBORw0KGgo=" onerror="{SCRIPT}" data-x="{root}/png'
