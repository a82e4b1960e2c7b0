"""What a reader's browser sees on a rendered report page, checked in real Chromium.

Playwright cannot download its own browsers here, so it drives Debian's ``chromium``
(``apt-get install -y chromium``). :func:`check_page` loads one page from ``file://`` at 1280 px
with every other request routed to a failure and counted, and returns the problems a reader would
meet: network requests, console errors, figures that did not load, visible code, progress bars,
tracebacks, warnings, leaked ``PosixPath(`` reprs, a placeholder ``<title>``, no link back to the
index. The same function grades the real report and the deliberately broken pages of the test that
shows it can fail.
"""

from __future__ import annotations

import contextlib
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WIDTH = 1280
PROGRESS_BAR = re.compile(r"\d+%\|")
WARNING_LINE = re.compile(r"^.*\b\w*Warning:", re.MULTILINE)
PLACEHOLDER_TITLES = {"", "notebook", "untitled"}


def chromium_path() -> str | None:
    """Debian's chromium, if installed."""
    for c in CHROMIUM_CANDIDATES:
        if Path(c).exists():
            return c
    return shutil.which("chromium")


@contextlib.contextmanager
def browser() -> Iterator[Any]:
    """A headless Chromium driven by Playwright (raises if either is missing)."""
    from playwright.sync_api import sync_playwright

    exe = chromium_path()
    if exe is None:
        raise FileNotFoundError("chromium is not installed (apt-get install -y chromium)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


@dataclass
class PageCheck:
    """What one page showed; ``problems`` is empty for a publishable page."""

    path: Path
    title: str = ""
    height: int = 0
    external_requests: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    figures: int = 0
    problems: list[str] = field(default_factory=list)


_INSPECT = """() => {
  const visible = el => { const r = el.getBoundingClientRect();
    const s = getComputedStyle(el);
    return r.width > 0 && r.height > 0 && s.visibility !== 'hidden' && s.display !== 'none'; };
  const imgs = [...document.querySelectorAll('img')];
  const svgs = [...document.querySelectorAll('.jp-OutputArea-output svg, figure svg')];
  const code = [...document.querySelectorAll(
      '.jp-CodeCell .jp-InputArea, .jp-InputArea-editor, .input_area, pre code.language-python')]
      .filter(visible);
  return {
    title: document.title,
    height: Math.max(document.documentElement.scrollHeight, document.body.scrollHeight),
    text: document.body.innerText,
    broken: imgs.filter(i => !(i.complete && i.naturalWidth > 0))
      .map(i => (i.src || '').slice(0, 80)),
    figures: imgs.length + svgs.length,
    emptySvg: svgs.filter(s => s.getBoundingClientRect().width === 0).length,
    code: code.map(e => e.innerText.slice(0, 60)),
    links: [...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href')),
  };
}"""


def check_page(
    b: Any, path: Path, *, published: bool = True, screenshot: Path | None = None
) -> PageCheck:
    """Load ``path`` in ``b`` at 1280 px; return what it showed and what is wrong with it.

    Args:
        b: a Playwright browser (see :func:`browser`).
        path: an HTML file.
        published: also require no visible code input and no debris text (progress bars,
            tracebacks, warnings, reprs); false for the ``.code.html`` rendering.
        screenshot: where to save a full-page PNG.
    """
    res = PageCheck(path=path)
    context = b.new_context(viewport={"width": WIDTH, "height": 900})
    page = context.new_page()

    def route(r: Any) -> None:
        url = r.request.url
        if url.startswith(("file://", "data:", "blob:", "about:")):
            r.continue_()
        else:
            res.external_requests.append(url)
            r.abort()

    page.route("**/*", route)
    page.on("console", lambda m: m.type == "error" and res.console_errors.append(m.text))
    page.on("pageerror", lambda e: res.console_errors.append(str(e)))
    try:
        page.goto(path.resolve().as_uri(), wait_until="load")
        page.wait_for_timeout(150)
        info = page.evaluate(_INSPECT)
        if screenshot is not None:
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(screenshot), full_page=True)
    finally:
        context.close()

    res.title, res.height, res.links, res.figures = (
        info["title"],
        info["height"],
        info["links"],
        info["figures"],
    )
    text = info["text"]
    p = res.problems
    if res.external_requests:
        p.append(
            f"{len(res.external_requests)} request(s) off file://: {res.external_requests[:3]}"
        )
    if res.console_errors:
        p.append(f"console errors: {res.console_errors[:3]}")
    if info["broken"]:
        p.append(f"figures not loaded: {info['broken'][:3]}")
    if info["emptySvg"]:
        p.append(f"{info['emptySvg']} svg figure(s) with zero width")
    if published and info["code"]:
        p.append(f"visible code input: {info['code'][:2]}")
    if not published:  # the rendering with code shows the notebook as executed, on purpose
        text = ""
    if m := PROGRESS_BAR.search(text):
        p.append(f"progress bar text: {text[max(0, m.start() - 30) : m.end() + 20]!r}")
    if "Traceback" in text:
        p.append("a Traceback is shown")
    if m := WARNING_LINE.search(text):
        p.append(f"warning line shown: {m.group(0)[-80:]!r}")
    if "PosixPath(" in text:
        p.append("a PosixPath( repr is shown")
    if res.title.strip().lower() in PLACEHOLDER_TITLES or len(res.title.strip()) < 8:
        p.append(f"placeholder title {res.title!r}")
    if path.name != "index.html" and "index.html" not in res.links:
        p.append("no link back to index.html")
    return res


def unresolved_links(path: Path, links: list[str]) -> list[str]:
    """Relative links of ``path`` whose target file does not exist."""
    bad = []
    for href in links:
        target = href.split("#", 1)[0].split("?", 1)[0]
        if not target or re.match(r"^[a-z]+:", target):
            continue
        if not (path.parent / target).exists():
            bad.append(href)
    return bad
