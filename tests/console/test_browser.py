"""The three consoles of a real served marketplace, in a real headless browser (Chromium through
Selenium): ``serve --console`` (the operator's), ``agent --console`` (the owners') and ``marketplace
console --reports`` (the consumer's), each as its own process, after two requests, the second of which
owner-2 declines (its budget is spent). Every figure checked is read again from the files the
processes wrote: server.json, the ledgers, the consumer's reports. A screenshot of each page goes to
``$MARKETPLACE_SCREENSHOTS`` when set (``docs/images`` regenerates the documentation's), else to the
test's folder. Skipped, naming what is missing, without chromium, chromedriver or selenium."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "service"))
import test_serve  # noqa: E402
from test_serve import Market, cli, free_port  # noqa: E402

from marketplace.market.sales import request_sale  # noqa: E402
from marketplace.privacy.lifetime import LifetimeLedger, ledger_file  # noqa: E402

pytestmark = pytest.mark.slow

OWNERS = ("owner-1", "owner-2", "owner-3")
PRICE_PER_EPS = 2.0


def _browser_tools() -> tuple[str, str]:
    """(chromium, chromedriver), or a skip naming what is missing."""
    missing = [tool for tool in ("chromium", "chromedriver") if shutil.which(tool) is None]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("selenium (pip install selenium)")
    if missing:
        pytest.skip(f"no {', '.join(missing)}: apt-get install chromium chromium-driver runs the consoles in a browser")
    return str(shutil.which("chromium")), str(shutil.which("chromedriver"))


def _wait_for(url: str, proc, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{url} never answered"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One served marketplace for the module: its server with the operator's console, one agent of its
    three owners with theirs (a privacy price per eps, so sales earn), two requests done, and a
    consumer's console over their output folders."""
    chromium, chromedriver = _browser_tools()
    tmp = tmp_path_factory.mktemp("consoles")
    ports = {"operator": free_port(), "owner": free_port(), "consumer": free_port()}
    market = Market(tmp, "--no-owners", "--console", f"127.0.0.1:{ports['operator']}", consumers="alice,bob")
    try:
        agent = cli(
            "agent",
            "--market",
            market.endpoint,
            "--keys",
            str(market.state / "owners"),
            "--ids",
            "owner-1..owner-3",
            "--price-per-eps",
            str(PRICE_PER_EPS),
            "--console",
            f"127.0.0.1:{ports['owner']}",
        )
        for consumer in ("alice", "bob"):  # one after the other: bob's finds owner-2's budget spent
            proc = market.request(consumer, f"reports/{consumer}")
            out, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, (consumer, out, err)
        shop = cli("console", "--reports", str(tmp / "reports"), "--listen", f"127.0.0.1:{ports['consumer']}")
        urls = {name: f"http://127.0.0.1:{port}/" for name, port in ports.items()}
        for name, proc in (("operator", market.proc), ("owner", agent), ("consumer", shop)):
            _wait_for(urls[name], proc)
        yield {"market": market, "tmp": tmp, "urls": urls, "chromium": chromium, "chromedriver": chromedriver}
    finally:
        while test_serve.STARTED:
            proc = test_serve.STARTED.pop()
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=60)
                except Exception:  # noqa: BLE001 - one that does not stop is killed
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()


@pytest.fixture(scope="module")
def browser(served):
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = served["chromium"]
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1200,1800"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=served["chromedriver"]))
    try:
        yield driver
    finally:
        driver.quit()


def _shot(browser, served, name: str) -> None:
    """A screenshot of the page shown, as console-<name>.png: into $MARKETPLACE_SCREENSHOTS, else the test's folder."""
    folder = Path(os.environ.get("MARKETPLACE_SCREENSHOTS") or served["tmp"])
    folder.mkdir(parents=True, exist_ok=True)
    height = browser.execute_script("return document.body.scrollHeight")
    browser.set_window_size(1200, min(max(int(height) + 120, 600), 4000))
    assert browser.save_screenshot(str(folder / f"console-{name}.png"))


def _text(browser, selector: str) -> str:
    from selenium.webdriver.common.by import By

    return browser.find_element(By.CSS_SELECTOR, selector).text


def test_the_operators_console_shows_what_server_json_says(served, browser):
    status = json.loads((served["market"].state / "server.json").read_text())
    browser.get(served["urls"]["operator"])
    assert _text(browser, "#running b") == "0" and _text(browser, "#queued b") == "0"
    assert _text(browser, "#ended-completed b") == str(status["ended"]["completed"]) == "2"
    assert _text(browser, "#owners-present b") == "3 / 3"
    owners = _text(browser, "#owners")
    for owner in OWNERS:
        admitted = status["admitted"][owner]
        assert f"eps={admitted['eps']:.4g}" in owners
        assert f"price_per_eps={PRICE_PER_EPS:.4g}" in owners
    assert "owner-2" in _text(browser, "#declines")
    sessions = _text(browser, "#sessions")
    assert all(s["session"] in sessions for s in status["sessions"])
    page = browser.page_source
    for private in ("spent", "rows"):
        assert private not in _text(browser, "#owners")
    assert "Not shown" in page
    _shot(browser, served, "operator")


def test_the_owners_console_shows_their_ledgers(served, browser):
    browser.get(served["urls"]["owner"])
    ledgers = served["market"].state / "owners"
    for owner in OWNERS:
        with LifetimeLedger.read(ledger_file(ledgers, owner)) as ledger:
            spent, standing = ledger.spent(), ledger.sales_standing()
            declined = sum(r.state == "declined" for r in ledger.history())
        section = f"#owner-{owner}"
        assert _text(browser, f"{section} .spent b") == f"eps={spent.eps:.4g}, delta={spent.delta:.4g}"
        assert _text(browser, f"{section} .earnings b") == f"{standing['earnings']:.4g}"
        assert _text(browser, f"{section} .privacy-earnings b") == f"{standing['privacy_earnings']:.4g}"
        assert _text(browser, f"{section} .declined b") == str(declined)
    assert _text(browser, "#owner-owner-2 .declined b") == "1"
    assert float(_text(browser, "#owner-owner-1 .earnings b")) > 0  # the privacy price of two releases
    plots = browser.execute_script(
        "return Array.from(document.images).map(i => [i.getAttribute('src'), i.complete && i.naturalWidth > 0])"
    )
    assert len(plots) == 2 * len(OWNERS) and all(ok for _, ok in plots), plots
    _shot(browser, served, "owner")


def test_the_consumers_console_shows_its_purchases_and_bills(served, browser):
    from selenium.webdriver.common.by import By

    reports = {c: json.loads((served["tmp"] / "reports" / c / "report.json").read_text()) for c in ("alice", "bob")}
    browser.get(served["urls"]["consumer"])
    assert _text(browser, "#purchases b") == "2" and _text(browser, "#completed b") == "2"
    paid = sum(request_sale(r)["paid"] for r in reports.values())
    assert _text(browser, "#paid b") == f"{paid:.4g}"
    listed = _text(browser, "#purchase-list")
    assert all(r["run_id"] in listed for r in reports.values())
    _shot(browser, served, "consumer")
    browser.find_element(By.LINK_TEXT, "bob").click()
    assert reports["bob"]["run_id"] in browser.page_source
    assert "owner-2" in _text(browser, "#charges") and "declined" in _text(browser, "#charges")
    bill = request_sale(reports["bob"])
    assert f"{bill['privacy_paid']:.4g}" in _text(browser, "#bill")
    assert _text(browser, "#figures")
    _shot(browser, served, "report")
