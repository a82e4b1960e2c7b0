"""The demo page in a real browser: ask, see citations, click one, see its passage; offline.

Playwright for Python drives Debian's ``chromium`` (``apt-get install -y chromium``; Playwright
cannot download its own browsers here). The page is served by uvicorn on 127.0.0.1 from the
tiny lab of :mod:`tests.serve_support`; every request the page makes is recorded, and any that
does not go to that server fails the test (the page must work with the network off).
"""

from __future__ import annotations

import shutil
import socket
import threading
import time
from pathlib import Path

import playwright  # noqa: F401  (a dev dependency: missing means a broken install, not a skip)
import pytest
import uvicorn

from rag.serve.app import create_app
from rag.serve.config import ServeSettings
from tests.pagecheck import CHROMIUM_ARGS
from tests.serve_support import tiny_lab
from tests.test_serve import WordJudge

CHROMIUM = next(
    (p for p in ("/usr/bin/chromium", shutil.which("chromium") or "") if p and Path(p).exists()),
    None,
)
ARGS = CHROMIUM_ARGS
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="apt-get install -y chromium")


@pytest.fixture()
def served(tmp_cache, tmp_path):
    lab = tiny_lab(tmp_path / "served", judge=WordJudge())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = create_app(lab, serve=ServeSettings(allow_network=False), api_key="")
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(200):
        if server.started:
            break
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


def test_demo_page_asks_shows_citations_and_passages_offline(served):
    from playwright.sync_api import sync_playwright

    requests: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            page = browser.new_page()
            page.on("request", lambda r: requests.append(r.url))
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(served + "/")
            page.wait_for_function(
                "document.getElementById('status').textContent.startsWith('ready')"
            )
            page.fill("#question", "How are sentences represented in fastText?")
            page.check("#judge")
            page.click("#ask")
            page.wait_for_selector("#answer a.cite")
            answer = page.inner_text("#answer")
            assert "[" in answer and "bag of words" in answer
            assert page.locator("#sources li").count() >= 2
            assert page.locator("#verdicts li").count() >= 1

            first = page.locator("#answer a.cite").first
            n = int(first.get_attribute("data-n"))
            first.click()
            page.wait_for_selector("#passage", state="visible")
            assert page.inner_text("#passage-title").startswith(f"[{n}] ")
            where = page.inner_text("#passage-where")
            assert where.startswith("arXiv:") and "page" in where
            passage = " ".join(page.inner_text("#passage-text").split())
            cited_sentence = answer.split(f" [{n}]")[0].split("] ")[-1].strip()
            assert cited_sentence and cited_sentence in passage  # extractive: copied verbatim

            # Chat mode: a follow-up shows the question actually retrieved with.
            page.fill("#question", "What does pair2vec learn?")
            page.check("#chat")
            page.click("#ask")
            page.wait_for_selector("#history .turn")
            page.fill("#question", "How is this model trained?")
            page.click("#ask")
            page.wait_for_function(
                "document.getElementById('rewritten').textContent.includes('pair2vec trained')"
            )
            assert errors == []
        finally:
            browser.close()
    outside = [u for u in requests if not u.startswith(served)]
    assert outside == [], f"requests left localhost: {outside}"
    assert any(u.endswith("/static/app.js") for u in requests)
