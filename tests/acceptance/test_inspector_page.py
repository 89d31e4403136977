"""The inspector page in a real browser (Debian's chromium and chromium-driver, driven by Selenium), against
``hrag serve`` on the demo's documents with the real models: what a person sees for the seed's questions.

Screenshots go to ``HRAG_SCREENSHOT_DIR`` (``make screenshots`` points it at docs/images, which
docs/inspector.md shows), else to the test's temporary directory.  Without the browser the tests are
skipped, saying what to install; on CI (``CI`` set) they fail instead, so a missing browser cannot pass
unseen.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import hrag_serve

pytestmark = pytest.mark.model

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")

PROBATION = "試用期間中の2ヶ月間、通勤手当と昼食手当は支給されますか？"
ANTIVIRUS = "私物のスマートフォンにウイルス対策ソフトを入れる必要はありますか？"
BYOD = "私物端末（BYOD）を業務で使う場合の義務をすべて教えてください"


@pytest.fixture(scope="module")
def served(examples_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with hrag_serve(examples_url, tmp_path_factory.mktemp("serve") / "serve.log") as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not (CHROMIUM and CHROMEDRIVER):
        message = "no chromium/chromedriver on PATH (apt-get install chromium chromium-driver)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1500,1000",
                     "--lang=en-US"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_script_timeout(30)
    yield driver
    driver.quit()


@pytest.fixture
def screenshot(tmp_path: Path) -> Any:
    folder = Path(os.environ.get("HRAG_SCREENSHOT_DIR") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)

    def save(driver: Any, name: str, height: int = 1000) -> Path:
        driver.set_window_size(1500, height)
        path = folder / f"{name}.png"
        assert driver.save_screenshot(str(path)), path
        driver.set_window_size(1500, 1000)
        return path

    return save


class Page:
    """The inspector as a person uses it: choose a collection, type, choose modes, ask, read."""

    def __init__(self, driver: Any, url: str, *, compare: bool = False) -> None:
        from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
        from selenium.webdriver.support.ui import WebDriverWait

        self.driver = driver
        # (a panel the page redraws between finding an element and reading it: read it again)
        self.wait = WebDriverWait(driver, 60,
                                  ignored_exceptions=(NoSuchElementException, StaleElementReferenceException))
        driver.get(url + ("/?compare=1" if compare else "/"))
        self.wait.until(lambda d: d.find_elements("css selector", "#outline .node-row"))

    def find(self, css: str) -> Any:
        return self.driver.find_element("css selector", css)

    def find_all(self, css: str) -> list[Any]:
        return list(self.driver.find_elements("css selector", css))

    def choose(self, css: str, value: str) -> None:
        from selenium.webdriver.support.ui import Select

        Select(self.find(css)).select_by_value(value)

    def collection(self, name: str) -> None:
        self.choose("#collection", name)
        self.wait.until(lambda d: self.find_all(f'#outline[data-collection="{name}"] .node-row'))

    def ask(self, question: str, *, mode: str = "auto", other: str | None = None, **settings: Any) -> None:
        self.choose("#settings-a [name=mode]", mode)
        for name, value in settings.items():
            field = self.find(f"#settings-a [name={name}]")
            field.clear()
            field.send_keys(str(value))
        if other is not None:
            self.choose("#settings-b [name=mode]", other)
        box = self.find("#question")
        box.clear()
        box.send_keys(question)
        for answer in self.find_all(".answer"):
            self.driver.execute_script("arguments[0].replaceChildren()", answer)
        self.find("#ask-button").click()
        self.wait.until(lambda d: self.find_all("#answer-a [data-role=summary]") or self.find("#error").is_displayed())

    def column(self, name: str) -> Any:
        return self.find(f"#answer-{name}")

    def passages(self, column: str = "a") -> list[str]:
        return [li.text for li in self.column(column).find_elements("css selector", "[data-role=passages] > li")]

    def map_row(self, column: str, label_start: str) -> Any:
        """The row of the answer's map whose label starts with ``label_start``."""
        rows = self.column(column).find_elements("css selector", "[data-role=map] .node-row")
        found = [r for r in rows if r.find_element("css selector", ".label").text.startswith(label_start)]
        assert found, [r.text for r in rows]
        return found[0]


def test_the_probation_question_takes_article_4_whole_and_shows_the_budget_used(
        served: str, browser: Any, screenshot: Any) -> None:
    page = Page(browser, served)
    page.collection("hr")
    page.ask(PROBATION)
    assert not page.find("#error").is_displayed()
    summary = page.column("a").find_element("css selector", "[data-role=summary]").text
    used, budget = (int(n.replace(",", "")) for n in re.findall(r"([\d,]+)[ -]token", summary))
    assert budget == 2000 and 0 < used <= budget, summary
    bar = page.column("a").find_element("css selector", "[data-role=budget-bar] .used")
    assert float(bar.value_of_css_property("width").removesuffix("px")) == pytest.approx(
        used / budget * page.column("a").find_element("css selector", "[data-role=budget-bar]").size["width"],
        abs=3)
    assert any("第4条" in p for p in page.passages()), page.passages()
    article = page.map_row("a", "第4条")
    assert "passage #" in article.text and "in-context" in article.get_attribute("class")
    context = page.column("a").find_element("css selector", "[data-role=context]").get_attribute("value")
    assert "毎月25日" in context and "3. 試用期間中" in context
    screenshot(browser, "inspector-probation", 1400)


def test_the_byod_question_side_by_side_shows_article_8_merged_with_its_hit_ratio(
        served: str, browser: Any, screenshot: Any) -> None:
    page = Page(browser, served, compare=True)
    page.collection("security")
    page.ask(BYOD, mode="auto", other="auto-merge")
    assert page.column("b").is_displayed()
    merged = page.map_row("b", "第8条").find_element("css selector", "[data-role=merged]").text
    ratio, threshold = (float(x) for x in re.findall(r"\d\.\d\d", merged))
    assert ratio >= threshold == 0.5, merged
    hits_under_8 = page.map_row("b", "第8条").find_element("xpath", "./ancestor::details[1]") \
        .find_elements("css selector", "[data-role=hit]")
    assert hits_under_8, "the hits the merge counted are marked below it"
    assert not any(p.split(" › ")[-1].startswith("第2章") for p in page.passages("b"))
    assert any("第8条" in p for p in page.passages("a")), page.passages("a")
    screenshot(browser, "inspector-byod-side-by-side", 1500)


def test_the_antivirus_question_keeps_8_1_alone_without_the_rest_of_chapter_2(served: str, browser: Any) -> None:
    page = Page(browser, served)
    page.collection("security")
    page.ask(ANTIVIRUS, mode="auto-merge")
    passages = page.passages()
    assert "8.1" in passages[0] or "ウイルス" in passages[0], passages
    assert not any(p.split(" › ")[-1].startswith(("第2章", "第8条")) for p in passages), passages
    hits = page.column("a").find_elements("css selector", "[data-role=hit]")
    summary = page.column("a").find_element("css selector", "[data-role=summary]").text
    assert len(hits) == int(re.search(r"(\d+) hits", summary).group(1))  # type: ignore[union-attr]


def test_a_node_opens_with_its_path_text_and_children(served: str, browser: Any, screenshot: Any) -> None:
    page = Page(browser, served)
    page.collection("hr")
    chapter = next(r for r in page.find_all("#outline .node-row .label") if r.text.startswith("第2章"))
    chapter.click()
    page.wait.until(lambda d: page.find("#node").is_displayed() and "第2章" in page.find("#node-body h2").text)
    page.wait.until(lambda d: page.find_all("#node-body ol li .label"))  # its children are listed
    first_child = page.find("#node-body ol li .label")
    name = first_child.text
    first_child.click()
    page.wait.until(lambda d: page.find("#node-body h2").text.startswith(name[:3]))
    assert page.find("#node-body [data-role=node-text]").text.strip()
    screenshot(browser, "inspector-node")


def test_a_question_to_all_collections_searches_each_with_its_own_model(served: str, browser: Any) -> None:
    page = Page(browser, served)
    page.collection("")  # (all collections): the Japanese ones on e5, the English manual on MiniLM
    assert "multilingual-e5-small-q4" in page.find("#model").text and "all-MiniLM-L6-v2" in page.find("#model").text
    page.ask("How long are messages kept before they are deleted?", mode="auto")
    documents = [p.text for p in page.column("a").find_elements("css selector", "[data-role=map] > div > .path")]
    assert any(d.endswith("(manual)") for d in documents), documents


def test_a_bad_setting_is_a_readable_message_on_the_page(served: str, browser: Any) -> None:
    page = Page(browser, served)
    page.collection("hr")
    page.ask(PROBATION, mode="auto-merge", top_k=0)
    error = page.find("#error")
    assert error.is_displayed()
    assert "top_k must be between 1 and 1000, got 0" in error.text
    assert "Traceback" not in error.text and "{" not in error.text
