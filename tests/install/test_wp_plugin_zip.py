"""The regular plugin zip through WordPress's own plugin API, on a site without the mu-plugin:
Plugin_Upgrader::install(zip) + activate_plugin() (what wp-admin's "Upload Plugin" and "Activate"
do) creates the tables at activation; the plugin guards writes; deactivate + delete (wp-admin's
"Delete", which runs uninstall.php) leaves no table and no option behind.
The plugin suite itself (tests/wordpress/test_plugin.py) runs against the zip install through
DURABLE_WP_PLUGIN_ZIP (see mk/dist.mk). WordPress core: DURABLE_WP_VERSION (default 6.1)."""
import json
import subprocess
import uuid

import pytest
import requests
from support.wordpress import LAUNCHER, start_wordpress, stop_wordpress

from dist_support import artifact, version


def _sql(db, statement):
    return subprocess.run(["mysql", "-h127.0.0.1", "-uroot", "--batch", "--skip-column-names", db, "-e", statement],
                          check=True, text=True, capture_output=True).stdout.split()


def _leftovers(db):
    tables = _sql(db, "SELECT table_name FROM information_schema.tables "
                      f"WHERE table_schema = '{db}' AND table_name LIKE 'wp\\_durable\\_%'")
    options = _sql(db, "SELECT option_name FROM wp_options WHERE option_name LIKE '%durable%'")
    return tables, options


@pytest.fixture()
def zip_site(tmp_path):
    state = tmp_path / "state.json"
    site = start_wordpress(state, plugin=True, plugin_zip=str(artifact(f"durable-ops-{version()}.zip")))
    try:
        yield site, json.loads(state.read_text())
    finally:
        stop_wordpress(state)


def test_plugin_zip_activates_guards_writes_and_uninstalls_without_leftovers(zip_site):
    site, st = zip_site
    installed = st["plugin_install"]
    assert st["plugin_mode"] == "zip"
    assert installed["installed_as"] == "durable-ops/durable-ops.php"
    assert installed["active"] and installed["active_plugins"] == ["durable-ops/durable-ops.php"]
    assert installed["mu_plugins"] == []                                  # not a must-use install
    assert installed["header"]["Version"] == version() and installed["header"]["RequiresWP"] == "6.1"
    # created by the activation hook, inside the activating PHP process (before any request's init)
    assert sorted(installed["tables"]) == ["wp_durable_fences", "wp_durable_operations"]
    assert installed["options"] == ["durable_ops_db_version"]

    uid = uuid.uuid4().hex[:10]
    body = {"title": f"Zip {uid}", "content": "<p>zip</p>", "status": "draft"}
    h = {"Idempotency-Key": f"acme:job-{uid}:v1:create_draft", "X-Durable-Job-Id": f"job-{uid}",
         "X-Durable-Fencing-Token": "3"}
    first = requests.post(site.rest("/wp/v2/posts"), json=body, headers=h, auth=site.auth, timeout=30)
    second = requests.post(site.rest("/wp/v2/posts"), json=body, headers=h, auth=site.auth, timeout=30)
    assert first.status_code == 201, first.text
    assert second.status_code == 200 and second.headers.get("Idempotent-Replayed") == "true"
    assert second.json()["id"] == first.json()["id"]
    assert _sql(site.db_name, "SELECT COUNT(*) FROM wp_durable_operations") == ["1"]
    assert _sql(site.db_name, "SELECT hw FROM wp_durable_fences") == ["3"]

    out = subprocess.run(["bash", str(LAUNCHER), "plugin", "--state", site.state_file, "uninstall"],
                         text=True, capture_output=True)
    assert out.returncode == 0, out.stderr
    after = json.loads(out.stdout)
    assert not after["installed"] and not after["active"] and after["active_plugins"] == []
    tables, options = _leftovers(site.db_name)
    assert tables == [] and options == [], (tables, options)            # information_schema + wp_options
    r = requests.get(site.rest("/durable/v1/status"), auth=site.auth, timeout=10)
    assert r.status_code == 404 and r.json()["code"] == "rest_no_route"
    # The post the plugin guarded stays, with its provenance meta (documented in readme.txt).
    kept = _sql(site.db_name, f"SELECT meta_value FROM wp_postmeta WHERE post_id = {first.json()['id']} "
                              "AND meta_key = '_durable_operation_key'")
    assert kept == [h["Idempotency-Key"]]
    print(f"\n[wp-zip] WordPress {site.wp_version}: installed + activated through Plugin_Upgrader, "
          f"tables {installed['tables']}, uninstall left tables={tables} options={options}")
