"""The orders workflow in the n8n editor at fit-to-window (1600x900, a laptop screen), in Debian's
headless Chromium: every node is on the canvas and its label readable. Runs after the
interruption suite (file name), on the same n8n user folder with `n8n start`.
DURABLE_UPDATE_SCREENSHOTS=1 writes docs/img/orders-pipeline.png."""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
import requests
from conftest import REPO
from orders_stack import WORKFLOW_FILE
from pipeline_stack import HERE as STACK, Service, free_port, wait_http

SHOT = "orders-pipeline.png"


def test_editor_shows_the_orders_workflow(stack, tmp_path):
    if not (shutil.which("chromium") and Path("/usr/bin/chromedriver").exists()):
        pytest.fail("chromium / chromium-driver not installed (make reconcile-browser installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service as ChromeService
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**stack.n8n_env(), "N8N_PORT": str(port), "N8N_LISTEN_ADDRESS": "127.0.0.1"}
    t0 = time.monotonic()
    server = Service("n8n-editor", ["bash", str(STACK / "n8n.sh"), "n8n", "start"], env, stack.workdir / "n8n-editor.log")
    try:
        wait_http(url + "/healthz/readiness", timeout=120, proc=server.proc, log=server.log_path)
        boot = round(time.monotonic() - t0, 1)
        owner = {"email": "owner@example.test", "firstName": "Demo", "lastName": "Owner", "password": "Durable-Steps-1"}
        r = requests.post(f"{url}/rest/owner/setup", json=owner, timeout=30)
        assert r.status_code == 200, r.text
        opts = webdriver.ChromeOptions()
        for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--window-size=1600,900", f"--user-data-dir={tmp_path / 'chromium'}"):
            opts.add_argument(arg)
        opts.binary_location = "/usr/bin/chromium"
        driver = webdriver.Chrome(service=ChromeService("/usr/bin/chromedriver"), options=opts)
        wf = json.loads(WORKFLOW_FILE.read_text())
        nodes = [n["name"] for n in wf["nodes"] if not n["type"].endswith("stickyNote")]
        try:
            driver.get(url + "/signin")
            driver.add_cookie({"name": "n8n-auth", "value": r.cookies.get("n8n-auth"), "path": "/"})
            driver.get(f"{url}/workflow/{wf['id']}")
            WebDriverWait(driver, 60).until(
                lambda d: len(d.find_elements(By.CSS_SELECTOR, "[data-test-id='canvas-node']")) >= len(nodes))
            time.sleep(1.5)  # the canvas fits the view after the nodes are measured
            driver.find_element(By.TAG_NAME, "body").send_keys("1")  # n8n's shortcut: zoom to fit
            time.sleep(1.0)
            labels = driver.execute_script(
                "return [...document.querySelectorAll(\"[data-test-id='canvas-node']\")].map(n => n.innerText)")
            text = " ".join(labels)
            for name in nodes:
                assert name in text, (name, labels)
            shot = tmp_path / SHOT
            driver.save_screenshot(str(shot))
        finally:
            driver.quit()
        print(f"\nDURABLE_ORDERS editor screenshot {shot} ({len(nodes)} nodes, n8n start {boot} s)")
        if os.environ.get("DURABLE_UPDATE_SCREENSHOTS") == "1":
            (REPO / "docs" / "img").mkdir(exist_ok=True)
            shutil.copy(shot, REPO / "docs" / "img" / SHOT)
    finally:
        server.stop()
