"""A real throwaway WordPress for test suites, started through stack/wordpress.sh.

Use from a conftest.py:

    from support.wordpress import wordpress_site, wordpress_plain_site  # noqa: F401  (fixtures)

`wordpress_site` is session-scoped: one WordPress (with the durable-ops mu-plugin) per test
session, torn down (server stopped, database dropped) at the end. `wordpress_plain_site` is a
second instance without the plugin, started only if a test asks for it.
Set DURABLE_WP_STATE=/path/state.json to reuse an instance started by `make wp-up` instead.
DURABLE_WP_VERSION=7.1.4 runs the sites on that WordPress core (stack/wordpress.py fetches and
caches it; default: Debian 12's 6.1). DURABLE_WP_PLUGIN_ZIP=dist/durable-ops-X.zip gives the
plugin site the regular plugin installed and activated through WordPress's plugin API instead
of the must-use plugin.
The state (and so the app password) lives in pytest's temp dir, never in the repository.
"""
from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

REPO = Path(__file__).resolve().parents[2]
LAUNCHER = REPO / "stack" / "wordpress.sh"


@dataclass
class WordPressSite:
    url: str
    rest_url: str
    user: str
    app_password: str
    uploads_dir: str
    db_name: str
    plugin: bool
    boot_seconds: float | None
    state_file: str
    wp_version: str = "unknown"
    plugin_mode: str = "mu"   # mu | zip | none

    @property
    def auth(self):
        return (self.user, self.app_password)

    def rest(self, route: str) -> str:
        """Plain-permalink REST URL: /?rest_route=/wp/v2/posts&..."""
        route, _, query = route.partition("?")
        return f"{self.rest_url}{route}" + (f"&{query}" if query else "")

    def session(self) -> requests.Session:
        s = requests.Session()
        s.auth = self.auth
        return s

    def count_uploaded_files(self) -> int:
        return sum(1 for p in Path(self.uploads_dir).rglob("*") if p.is_file())


def start_wordpress(state_file: Path, plugin: bool = True, plugin_zip: str | None = None) -> WordPressSite:
    """plugin_zip: None = DURABLE_WP_PLUGIN_ZIP from the environment (unset: the mu-plugin)."""
    cmd = ["bash", str(LAUNCHER), "up", "--state", str(state_file)]
    plugin_zip = plugin_zip if plugin_zip is not None else os.environ.get("DURABLE_WP_PLUGIN_ZIP")
    if not plugin:
        cmd.append("--no-plugin")
    elif plugin_zip:
        cmd += ["--plugin-zip", plugin_zip]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, text=True, capture_output=True)
    if proc.returncode != 0:
        raise RuntimeError(f"stack/wordpress.sh up failed:\n{proc.stderr[-3000:]}")
    st = json.loads(Path(state_file).read_text())
    st.setdefault("boot_seconds", round(time.monotonic() - t0, 2))
    return _site(st)


def _site(st: dict) -> WordPressSite:
    return WordPressSite(
        url=st["url"], rest_url=st["rest_url"], user=st["user"], app_password=st["app_password"],
        uploads_dir=st["uploads_dir"], db_name=st["db_name"], plugin=st["plugin"],
        boot_seconds=st.get("boot_seconds"), state_file=st["state_file"],
        wp_version=st.get("wp_version", "unknown"), plugin_mode=st.get("plugin_mode", "mu" if st["plugin"] else "none"),
    )


def stop_wordpress(state_file: Path) -> None:
    subprocess.run(["bash", str(LAUNCHER), "down", "--state", str(state_file)], text=True, capture_output=True)


def _session_site(tmp_path_factory, plugin: bool):
    reuse = os.environ.get("DURABLE_WP_STATE") if plugin else os.environ.get("DURABLE_WP_PLAIN_STATE")
    if reuse:
        yield _site(json.loads(Path(reuse).read_text()))
        return
    state = tmp_path_factory.mktemp("wordpress") / "state.json"
    site = start_wordpress(state, plugin=plugin)
    print(f"\n[wordpress] {'plugin (' + site.plugin_mode + ')' if plugin else 'plain'} site, WordPress "
          f"{site.wp_version}, up in {site.boot_seconds} s at {site.url}")
    try:
        yield site
    finally:
        stop_wordpress(state)


@pytest.fixture(scope="session")
def wordpress_site(tmp_path_factory):
    yield from _session_site(tmp_path_factory, plugin=True)


@pytest.fixture(scope="session")
def wordpress_plain_site(tmp_path_factory):
    yield from _session_site(tmp_path_factory, plugin=False)
