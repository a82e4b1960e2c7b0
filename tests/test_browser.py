"""The published report as a reader's browser shows it: real Chromium at 1280 px, network off.

The smoke profile's report (the session run shared with tests/test_notebooks.py) is loaded page by
page from ``file://``; every other request is routed to a failure and counted. Each page must make
zero such requests and log zero console errors, load every figure, show no code input (published
pages), no progress bar, traceback, warning or ``PosixPath(``, carry a meaningful ``<title>`` and
link back to the index; every index link must resolve. A screenshot of each page is saved under the
test's temporary folder for a human to look at. ``test_the_checker_flags_broken_pages`` shows the
same checker failing on pages that re-introduce a CDN script, a visible code cell, a progress bar.

Needs Debian's chromium (``apt-get install -y chromium``; ``.ci/run`` installs it when missing);
skipped with the reason where it is not installed.
"""

from __future__ import annotations

import base64
import json

import pytest

from tests import pagecheck

pytestmark = [pytest.mark.notebooks, pytest.mark.browser]


@pytest.fixture(scope="module")
def browser():
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install)")
    if pagecheck.chromium_path() is None:
        pytest.skip("chromium is not installed here: apt-get install -y chromium (.ci/run does)")
    with pagecheck.browser() as b:
        yield b


def test_the_smoke_report_reads_cleanly_in_a_browser(smoke_run, browser, tmp_path_factory):
    out, runs = smoke_run
    shots = tmp_path_factory.mktemp("screenshots")
    pages = [out / "index.html"]
    for r in runs:
        pages += [out / f"{r.name}.html", out / f"{r.name}.code.html"]
    problems, heights = {}, {}
    for page in pages:
        published = not page.name.endswith(".code.html")
        res = pagecheck.check_page(
            browser, page, published=published, screenshot=shots / f"{page.stem}.png"
        )
        heights[page.name] = res.height
        bad = list(res.problems)
        if page.name == "index.html":
            bad += [
                f"index link does not resolve: {h}"
                for h in pagecheck.unresolved_links(page, res.links)
            ]
            bad += [
                f"index does not link {r.name}.html"
                for r in runs
                if f"{r.name}.html" not in res.links
            ]
        if published and page.name != "index.html" and res.figures == 0:
            bad.append("no figure on the page")
        if bad:
            problems[page.name] = bad
    print(f"screenshots: {shots}\npage heights at {pagecheck.WIDTH} px: {json.dumps(heights)}")
    assert not problems, json.dumps(problems, indent=1)
    for png in shots.glob("*.png"):
        assert png.stat().st_size > 5_000, png


def test_the_papers_page_shows_the_citation_network_as_svg(smoke_run, browser):
    """07 draws the network inline as the SVG it saved (zoomable), at a readable width, and the
    front page carries it as 07's key figure."""
    out, _ = smoke_run
    page = browser.new_page(viewport={"width": pagecheck.WIDTH, "height": 900})
    try:
        page.goto((out / "07_papers.html").resolve().as_uri(), wait_until="load")
        # the renderer embeds an SVG output as an <img> with a data: URI; decode it to find ours
        svgs = page.evaluate(
            """() => [...document.querySelectorAll('.jp-OutputArea-output img')]
                 .filter(i => (i.getAttribute('src') || '').startsWith('data:image/svg+xml'))
                 .map(i => { const r = i.getBoundingClientRect();
                   const body = atob(i.getAttribute('src').split(',')[1]);
                   return {w: r.width, h: r.height, loaded: i.complete && i.naturalWidth > 0,
                           legend: body.includes('primary category (papers)'),
                           paths: (body.match(/<path /g) || []).length}; })"""
        )
        page.goto((out / "index.html").resolve().as_uri(), wait_until="load")
        key = page.evaluate(
            """() => [...document.querySelectorAll('[id="07_papers"] figure img')].map(
                 i => ({src: i.getAttribute('src'), w: i.naturalWidth}))"""
        )
    finally:
        page.close()
    network = [s for s in svgs if s["legend"]]
    assert len(network) == 1, svgs
    # the five smoke papers cite none of each other: one row of papers, so a short figure
    assert network[0]["loaded"] and network[0]["w"] >= 600 and network[0]["h"] >= 120
    assert network[0]["paths"] > 20  # nodes, legend markers and the labels' glyphs
    assert key == [{"src": "07_papers/figures/citation_network.png", "w": key[0]["w"]}]
    assert key[0]["w"] > 600


_IMG = base64.b64encode(
    b"<svg xmlns='http://www.w3.org/2000/svg' width='40' height='20'>"
    b"<rect width='40' height='20'/></svg>"
).decode()
_CLEAN = (
    "<!doctype html><html><head><meta charset='utf-8'><title>A clean report page</title></head>"
    "<body><nav><a href='index.html'>index</a></nav><h1>Finding</h1>"
    "<p>Hybrid scores 0.317 (95 % CI 0.269-0.373).</p>"
    f"<img src='data:image/svg+xml;base64,{_IMG}'>{{extra}}</body></html>"
)
BROKEN = {
    "cdn_script": (
        "<script src='https://cdnjs.cloudflare.com/ajax/libs/require.js/2.1.10/require.min.js'>"
        "</script>",
        "request(s) off file://",
    ),
    "code_cell": (
        "<div class='jp-Cell jp-CodeCell'><div class='jp-InputArea'><pre>import pandas as pd</pre>"
        "</div></div>",
        "visible code input",
    ),
    "progress_bar": (
        "<pre>chunk[fixed]:  40%|####      | 40/100 [00:02&lt;00:03]</pre>",
        "progress bar",
    ),
    "traceback": ("<pre>Traceback (most recent call last):</pre>", "Traceback"),
    "warning": ("<pre>tqdm/auto.py:21: TqdmWarning: IProgress not found</pre>", "warning line"),
    "posixpath": ("<pre>PosixPath('outputs/default/01_ingest/metrics.json')</pre>", "PosixPath("),
    "broken_figure": ("<img src='figures/missing.png'>", "figures not loaded"),
}


def test_the_checker_passes_a_clean_page(browser, tmp_path):
    page = tmp_path / "page.html"
    page.write_text(_CLEAN.replace("{extra}", ""), encoding="utf-8")
    assert pagecheck.check_page(browser, page).problems == []


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_the_checker_flags_broken_pages(browser, tmp_path, kind):
    extra, expected = BROKEN[kind]
    page = tmp_path / "page.html"
    page.write_text(_CLEAN.replace("{extra}", extra), encoding="utf-8")
    problems = pagecheck.check_page(browser, page).problems
    assert any(expected in p for p in problems), problems


def test_the_checker_flags_a_placeholder_title_and_no_way_back(browser, tmp_path):
    page = tmp_path / "page.html"
    page.write_text(
        _CLEAN.replace("A clean report page", "Notebook").replace(
            "href='index.html'", "href='x.html'"
        ),
        encoding="utf-8",
    )
    problems = " | ".join(pagecheck.check_page(browser, page).problems)
    assert "placeholder title" in problems and "no link back to index.html" in problems
