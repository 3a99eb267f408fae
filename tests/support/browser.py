"""Debian's headless Chromium under selenium, started one way for every suite (the console, the
review page, the n8n editor). Without the background-networking flags Chromium keeps dialling
Google's hosts, which this machine's closed network refuses."""

from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")


def require_chromium():
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.fail("Chromium or chromedriver is missing: `make deps` installs them (chromium, chromium-driver)")


def chromium(profile_dir, window="1280,900", *extra):
    """A new headless Chromium with its own profile in ``profile_dir``; the caller quits it."""
    require_chromium()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    for arg in (*FLAGS, f"--window-size={window}", *extra, f"--user-data-dir={profile_dir}"):
        opts.add_argument(arg)
    opts.binary_location = CHROMIUM
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
