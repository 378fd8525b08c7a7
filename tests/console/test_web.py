"""The web page at `/` in a real headless Chromium (Debian's chromium-headless-shell, driven by Playwright)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.console.served import FACTS, MEMORIES, Served, served

playwright = pytest.importorskip("playwright.sync_api")
CHROMIUM = shutil.which("chromium-headless-shell") or ("/usr/bin/chromium-headless-shell"
                                                       if Path("/usr/bin/chromium-headless-shell").exists() else None)
if CHROMIUM is None and os.environ.get("CI") == "true":  # CI runs no skipped lane: make test installs it
    pytest.fail("chromium-headless-shell is not installed (make test installs it with apt)", pytrace=False)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium-headless-shell is not installed (make test installs it)")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Served]:
    """A running open service with a garden.engram space and Kindgi facts."""
    with served(tmp_path / "data") as running:
        yield running


@pytest.fixture
def page(service: Served) -> Iterator[playwright.Page]:
    """A fresh browser page on the service's `/`."""
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            tab = browser.new_page(viewport={"width": 1100, "height": 900})
            errors: list[str] = []
            tab.on("pageerror", lambda exc: errors.append(str(exc)))
            tab.goto(service.url + "/")
            yield tab
            assert errors == [], errors  # no script error on the page
        finally:
            browser.close()


def sign_in(page: playwright.Page, key: str = "") -> None:
    """Sign in with `key` (none: an open service) by keyboard."""
    page.locator("#key").fill(key)
    page.locator("#key").press("Enter")


def test_the_page_is_served_with_a_strict_content_policy(service: Served) -> None:
    answer = httpx.get(service.url + "/")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in answer.headers["content-security-policy"]
    assert httpx.get(service.url + "/console/app.js").headers["content-type"].startswith("text/javascript")


def test_results_show_snippets_highlighted_from_utf8_byte_offsets(page: playwright.Page, tmp_path: Path) -> None:
    sign_in(page)
    page.locator("#query").fill("green tea")
    page.locator("#mode").select_option("hybrid")
    page.locator("#query").press("Enter")
    first = page.locator("#results li").first
    playwright.expect(first.locator(".snippet")).to_have_text(MEMORIES[0][0])
    # "café crème" comes first: two 2-byte characters, so byte offsets used as string offsets would be off by 2.
    assert first.locator("mark").all_inner_texts() == ["green", "tea"]
    playwright.expect(first.locator(".tag")).to_have_text([f"#{t}" for t in MEMORIES[0][1]])
    playwright.expect(first.locator("time")).to_have_count(1)
    page.screenshot(path=str(tmp_path / "results.png"), full_page=True)


def test_a_result_explains_its_terms_bm25_similarity_and_fusion(page: playwright.Page, tmp_path: Path) -> None:
    sign_in(page)
    page.locator("#query").fill("green tea")
    page.locator("#mode").select_option("hybrid")
    page.locator("#query").press("Enter")
    why = page.locator("#results li").first.locator("details.why")
    why.locator("summary").click()
    values = dict(zip(why.locator("dt").all_inner_texts(), why.locator("dd").all_inner_texts()))
    assert set(values["Matched terms"].split(", ")) == {"green", "tea"}
    assert float(values["BM25"].split()[0]) > 0
    assert -1 <= float(values["Vector similarity"].split()[0]) <= 1
    assert values["Fusion"].startswith("convex")
    page.screenshot(path=str(tmp_path / "explained.png"))


def test_a_keyword_search_says_so_and_marks_text_after_cjk(page: playwright.Page) -> None:
    sign_in(page)
    page.locator("#query").fill("kyoto")
    page.locator("#mode").select_option("keyword")
    page.locator("#query").press("Enter")
    first = page.locator("#results li").first
    playwright.expect(first.locator("mark")).to_have_text(["Kyoto"])
    playwright.expect(page.locator("#summary")).to_contain_text("(keyword)")
    values = first.locator("dd").all_text_contents()
    assert values[2].startswith("—")  # no vector similarity in a keyword-only ranking


def test_a_filter_narrows_the_results(page: playwright.Page) -> None:
    sign_in(page)
    page.locator("#tags").fill("sport")
    page.locator("#query").fill("morning")
    page.locator("#query").press("Enter")
    playwright.expect(page.locator("#results li .snippet")).to_have_text([MEMORIES[2][0]])


def test_an_unknown_key_is_refused_at_sign_in(page: playwright.Page) -> None:
    sign_in(page, "kg_unknown_key")
    playwright.expect(page.locator("#error")).to_contain_text("Sign-in refused: HTTP 401")
    playwright.expect(page.locator("#workspace")).to_be_hidden()
    sign_in(page, "not-a-key")
    playwright.expect(page.locator("#error")).to_contain_text("not as a bearer key")


def test_the_page_works_by_keyboard_down_to_a_facts_revisions(page: playwright.Page, service: Served,
                                                              tmp_path: Path) -> None:
    sign_in(page, service.kindgi_key)
    playwright.expect(page.locator("#who")).to_contain_text("kindgi")
    page.keyboard.type("herbal tea")  # the query box has the focus after signing in
    page.keyboard.press("Enter")
    playwright.expect(page.locator("#results li").first.locator(".snippet")).to_contain_text(FACTS[1])
    page.locator("body").click(position={"x": 5, "y": 5})
    page.keyboard.press("ArrowDown")
    playwright.expect(page.locator("#results li").first).to_be_focused()
    page.keyboard.press("Enter")
    dialog = page.locator("#detail")
    playwright.expect(dialog).to_be_visible()
    playwright.expect(page.locator("#detail-text")).to_have_text(FACTS[1])
    playwright.expect(page.locator("#detail-versions li")).to_contain_text(["version 1"])
    page.screenshot(path=str(tmp_path / "detail.png"))
    page.keyboard.press("Escape")
    playwright.expect(dialog).to_be_hidden()
    page.keyboard.press("/")
    playwright.expect(page.locator("#query")).to_be_focused()


def test_a_search_answer_saying_why_fewer_came_back_shows_its_message(page: playwright.Page) -> None:
    # The faces' whyFewer object ({"message": …}) is passed through as the search answer carries it;
    # here the page's own API answer is given one, to check the page shows it.
    def with_why(route: playwright.Route) -> None:
        answer = route.fetch()
        body = answer.json()
        body["whyFewer"] = {"message": "the tag filter left 1 of 4 memories", "collection": body["collection"]}
        route.fulfill(response=answer, json=body)

    sign_in(page)
    page.route("**/console/api/recall", with_why)
    page.locator("#tags").fill("sport")
    page.locator("#query").fill("morning")
    page.locator("#query").press("Enter")
    playwright.expect(page.locator("#whyfewer")).to_have_text("the tag filter left 1 of 4 memories")
    playwright.expect(page.locator("#results li")).to_have_count(1)


def test_a_refused_search_shows_the_faces_message_and_clears_old_results(page: playwright.Page) -> None:
    sign_in(page)
    page.locator("#query").fill("tea")
    page.locator("#query").press("Enter")
    playwright.expect(page.locator("#results li")).not_to_have_count(0)
    page.locator("#metadata").fill("kind=fact")
    page.locator("#query").press("Enter")
    playwright.expect(page.locator("#error")).to_contain_text("cannot filter by metadata")
    playwright.expect(page.locator("#results li")).to_have_count(0)


def test_browsing_pages_through_a_collection_newest_first(page: playwright.Page) -> None:
    sign_in(page)
    page.locator("#limit").fill("3")
    page.get_by_role("button", name="Newest").click()
    snippets = page.locator("#results li .snippet")
    playwright.expect(snippets).to_have_count(3)
    page.get_by_role("button", name="More").click()
    playwright.expect(snippets).to_have_count(len(MEMORIES))
    assert set(snippets.all_inner_texts()) == {t for t, _ in MEMORIES}
    playwright.expect(page.locator("#more")).to_be_hidden()  # the last page
    playwright.expect(page.locator("#results li details")).to_have_count(0)  # nothing to explain when listing


def test_no_key_is_refused_on_a_service_that_checks_credentials(tmp_path: Path) -> None:
    from engram_index.app import space_credentials

    data = tmp_path / "data"
    data.mkdir()
    with served(data, space_credentials(data, "did:web:localhost")) as running:
        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            try:
                tab = browser.new_page()
                tab.goto(running.url + "/")
                sign_in(tab)
                playwright.expect(tab.locator("#error")).to_contain_text("this service checks credentials")
                playwright.expect(tab.locator("#workspace")).to_be_hidden()
                sign_in(tab, running.kindgi_key)  # the faces' own keys still sign in
                playwright.expect(tab.locator("#workspace")).to_be_visible()
            finally:
                browser.close()
