"""The n8n editor in Debian's headless Chromium: the docs' screenshots of workflows and node panels.

One owner signs in through n8n's REST API and Chromium gets its auth cookie, so no form is typed.
A workflow is shown at fit-to-window (n8n's shortcut `1`) and the test asserts that every node
label it names is on the canvas; a node's parameter panel is opened by double-clicking the node.
DURABLE_UPDATE_SCREENSHOTS=1 also copies each picture into docs/img/ (see `keep`).

    with Editor(url, tmp_path, window="1600,900") as editor:
        labels = editor.open_workflow(wf_id, min_nodes=8)
        editor.save(tmp_path / "orders-pipeline.png")
"""
from __future__ import annotations

import base64
import os
import shutil
import time
from pathlib import Path

import requests

from support.browser import chromium
from support.browser import require_chromium as require_browser

REPO = Path(__file__).resolve().parents[2]
OWNER = {"email": "owner@example.test", "firstName": "Demo", "lastName": "Owner", "password": "Durable-Steps-1"}
CANVAS_NODE = "[data-test-id='canvas-node']"


def sign_in(url: str, owner: dict = OWNER) -> str:
    """The n8n-auth cookie of the instance owner: set up on a fresh n8n, else logged in."""
    r = requests.post(f"{url}/rest/owner/setup", json=owner, timeout=30)
    if r.status_code != 200:  # the owner exists already (an earlier screenshot on this user folder)
        r = requests.post(f"{url}/rest/login", json={"emailOrLdapLoginId": owner["email"],
                                                     "password": owner["password"]}, timeout=30)
    assert r.status_code == 200, r.text
    return r.cookies.get("n8n-auth")


def keep(shot: Path) -> None:
    """With DURABLE_UPDATE_SCREENSHOTS=1, the picture becomes docs/img/<its name>."""
    if os.environ.get("DURABLE_UPDATE_SCREENSHOTS") == "1":
        (REPO / "docs" / "img").mkdir(exist_ok=True)
        shutil.copy(shot, REPO / "docs" / "img" / shot.name)


class Editor:
    """A signed-in headless Chromium on one n8n (a context manager: the browser quits at exit)."""

    def __init__(self, url: str, profile_dir: Path, window: str = "1600,900", cookie: str | None = None):
        self.url, self.profile_dir, self.window, self.cookie = url, Path(profile_dir), window, cookie
        self.driver = None

    def __enter__(self) -> "Editor":
        require_browser()
        cookie = self.cookie or sign_in(self.url)
        self.driver = chromium(self.profile_dir / "chromium", self.window)
        self.driver.get(self.url + "/signin")
        self.driver.add_cookie({"name": "n8n-auth", "value": cookie, "path": "/"})
        return self

    def __exit__(self, *exc) -> None:
        self.driver.quit()

    def labels(self) -> list[str]:
        """Each canvas node's visible text (name, subtitle, output labels), as the reader sees it."""
        return self.driver.execute_script(
            f"return [...document.querySelectorAll(\"{CANVAS_NODE}\")].map(n => n.innerText)")

    def open_workflow(self, workflow_id: str, min_nodes: int, must_show=()) -> list[str]:
        """The workflow at fit-to-window; asserts that each name in must_show is on the canvas."""
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import WebDriverWait

        self.driver.get(f"{self.url}/workflow/{workflow_id}")
        WebDriverWait(self.driver, 60).until(
            lambda d: len(d.find_elements(By.CSS_SELECTOR, CANVAS_NODE)) >= min_nodes)
        time.sleep(1.5)  # the canvas fits the view only after the nodes are measured
        self.driver.find_element(By.TAG_NAME, "body").send_keys("1")  # n8n's shortcut: zoom to fit
        time.sleep(1.0)
        labels = self.labels()
        text = " ".join(labels)
        for name in must_show:
            assert name in text, (name, labels)
        return labels

    def open_node(self, name: str) -> None:
        """The node's panel (NDV), as a double-click on the canvas opens it."""
        from selenium.webdriver.common.action_chains import ActionChains
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import WebDriverWait

        node = next((n for n in self.driver.find_elements(By.CSS_SELECTOR, CANVAS_NODE)
                     if name in n.text.split("\n")), None)
        assert node is not None, (name, self.labels())
        ActionChains(self.driver).double_click(node).perform()
        WebDriverWait(self.driver, 30).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, "[data-test-id='node-parameters']"))
        time.sleep(1.0)  # the panel's fields render after it opens

    def box_around(self, names, below: int = 60) -> dict:
        """The page rectangle around the named canvas nodes, with a margin (for `save(clip=...)`);
        `below`: the margin under them, for edges that run below the nodes."""
        box = self.driver.execute_script("""
          const want = arguments[0];
          const r = [...document.querySelectorAll(arguments[1])]
            .filter(n => want.some(w => n.innerText.split('\\n').includes(w))).map(n => n.getBoundingClientRect());
          const x0 = Math.max(0, Math.min(...r.map(b => b.left)) - 80), y0 = Math.max(0, Math.min(...r.map(b => b.top)) - 60);
          return {n: r.length, x: x0, y: y0, width: Math.max(...r.map(b => b.right)) + 80 - x0,
                  height: Math.max(...r.map(b => b.bottom)) + arguments[2] - y0};""", list(names), CANVAS_NODE, below)
        assert box.pop("n") == len(names), (box, names)
        return box

    def parameters_box(self) -> dict:
        """The open node panel's Parameters column, from its tabs to its last field (the window must
        be tall enough to show every field: the column scrolls otherwise)."""
        return self.driver.execute_script("""
          const q = s => document.querySelector(s).getBoundingClientRect();
          const tabs = q("[data-test-id='tab-params']"), panel = q("[data-test-id='node-parameters']");
          const bottom = Math.max(...[...document.querySelectorAll(
            "[data-test-id='node-parameters'] [data-test-id='parameter-item']")].map(e => e.getBoundingClientRect().bottom));
          return {x: panel.left, y: tabs.top - 8, width: panel.width, height: bottom + 24 - (tabs.top - 8)};""")

    def save(self, shot: Path, clip: dict | None = None) -> Path:
        """The window (or the clip rectangle of the page) as a PNG; kept in docs/img/ on request."""
        if clip:
            png = self.driver.execute_cdp_cmd("Page.captureScreenshot", {
                "format": "png", "clip": {**clip, "scale": 1}})
            shot.write_bytes(base64.b64decode(png["data"]))
        else:
            self.driver.save_screenshot(str(shot))
        keep(shot)
        return shot
