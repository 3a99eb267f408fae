"""The wheel alone, installed into a fresh venv (no source tree anywhere on its path), runs the
ledger and the publishing proxy: init-db, serve, lease, begin / proxy write to a real WordPress /
confirm over HTTP, the console's templates, proxy serve /health, a sweep pass."""
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest
import requests

from dist_support import REPO, artifact, version
from localhost import free_port as _free_port

TENANT, RUNNER, EDITOR = "acme", "wheel-runner-token", "wheel-editor-token"


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """python3 -m venv + pip install <wheel> (its dependencies from the package index), timed."""
    whl = artifact(f"durable_ledger-{version()}-py3-none-any.whl")
    root = tmp_path_factory.mktemp("wheel-venv")
    t0 = time.monotonic()
    base_python = getattr(sys, "_base_executable", None) or "python3"
    subprocess.run([base_python, "-m", "venv", str(root / "venv")], check=True)
    subprocess.run([str(root / "venv/bin/pip"), "install", "-q", "--disable-pip-version-check", str(whl)],
                   check=True, cwd=root)
    print(f"\n[wheel] fresh venv + pip install {whl.name} in {time.monotonic() - t0:.1f} s")
    return root / "venv"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("wheel-run")   # cwd of every process: not the repository


def _env(run_dir, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "DURABLE_"))}
    env.update(DURABLE_DATABASE_URL=f"sqlite:///{run_dir / 'ledger.db'}", DURABLE_LOG_LEVEL="WARNING",
               DURABLE_BOOTSTRAP_TOKENS=f"{TENANT}:runner:{RUNNER}:test,{TENANT}:editor:{EDITOR}", **extra)
    return env


def _wait(url, proc, log, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"{url}: process exited {proc.returncode}:\n{Path(log).read_text()[-3000:]}")
        try:
            r = requests.get(url, timeout=2)
            if r.status_code == 200:
                return r.json()
        except requests.ConnectionError:
            pass
        time.sleep(0.2)
    pytest.fail(f"{url} did not answer in {timeout} s:\n{Path(log).read_text()[-3000:]}")


def _start(venv, run_dir, name, args, env):
    log = run_dir / f"{name}.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen([str(venv / "bin/durable-ledger"), *args], cwd=run_dir, env=env,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    return proc, log


def _stop(proc):
    if proc.poll() is None:
        os.killpg(proc.pid, 15)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait(5)


def test_wheel_imports_from_the_venv_not_the_source_tree(venv, run_dir):
    code = ("import json, pathlib, durable_ledger; p = pathlib.Path(durable_ledger.__file__).parent; "
            "print(json.dumps({'file': durable_ledger.__file__, 'version': durable_ledger.__version__, "
            "'plugin': (p / 'wordpress' / 'durable-ops.php').read_text(), "
            "'templates': sorted(x.name for x in (p / 'console' / 'templates').glob('*.html'))}))")
    out = json.loads(subprocess.run([str(venv / "bin/python"), "-c", code], cwd=run_dir, env=_env(run_dir),
                                    check=True, text=True, capture_output=True).stdout)
    assert Path(out["file"]).resolve().is_relative_to(venv.resolve()), out["file"]
    assert not Path(out["file"]).resolve().is_relative_to(REPO.resolve())
    assert out["version"] == version()
    assert out["plugin"] == (REPO / "ledger-service/durable_ledger/wordpress/durable-ops.php").read_text()
    assert "console_login.html" in out["templates"]


def test_wheel_smoke_gated_write_through_the_proxy_to_wordpress(venv, run_dir, wordpress_site):
    env = _env(run_dir, WORDPRESS_SITES=json.dumps({"test": {
        "url": wordpress_site.url, "user": wordpress_site.user, "app_password": wordpress_site.app_password}}))
    cli = str(venv / "bin/durable-ledger")
    t0 = time.monotonic()
    subprocess.run([cli, "init-db"], cwd=run_dir, env=env, check=True, capture_output=True)
    lport, pport = _free_port(), _free_port()
    ledger, llog = _start(venv, run_dir, "ledger", ["serve", "--port", str(lport), "--workers", "1"], env)
    proxy = None
    try:
        ledger_url = f"http://127.0.0.1:{lport}"
        health = _wait(ledger_url + "/health", ledger, llog)
        assert health["version"] == version()
        proxy, plog = _start(venv, run_dir, "proxy", ["proxy", "serve", "--port", str(pport), "--workers", "1"], env)
        proxy_url = f"http://127.0.0.1:{pport}"
        phealth = _wait(proxy_url + "/health", proxy, plog)
        assert phealth["version"] == version() and "test" in json.dumps(phealth)
        assert wordpress_site.app_password not in json.dumps(phealth)
        print(f"\n[wheel] init-db + serve + proxy serve healthy in {time.monotonic() - t0:.1f} s")

        h = {"Authorization": f"Bearer {RUNNER}"}
        job = f"wheel-{uuid.uuid4().hex[:8]}"
        title = f"From the wheel {job}"
        q = quote(job, safe="")
        requests.put(f"{ledger_url}/v1/jobs/{q}", json={}, headers=h, timeout=30).raise_for_status()
        lease = requests.post(f"{ledger_url}/v1/jobs/{q}/lease", json={"owner": "wheel", "ttl_s": 600},
                              headers=h, timeout=30)
        lease.raise_for_status()
        fence = lease.json()["fencing_token"]
        payload = {"title": title, "content": f"<p>{title}</p>"}
        begin = requests.post(f"{ledger_url}/v1/operations/begin", headers=h, timeout=30, json={
            "job_id": job, "action": "create_draft", "target": "wordpress:test", "fencing_token": fence,
            "payload": payload}).json()
        assert begin["decision"] == "dispatch", begin
        key = begin["operation"]["operation_key"]
        wrote = requests.post(f"{proxy_url}/v1/sites/test/drafts", headers=h, timeout=60, json={
            "operation_key": key, "job_id": job, "fencing_token": fence, **payload})
        assert wrote.status_code < 300, wrote.text
        answer = wrote.json()
        assert answer["outcome"] == "confirmed", answer
        confirmed = requests.post(f"{ledger_url}/v1/operations/{quote(key, safe='')}/confirm", headers=h, timeout=30,
                                  json={"fencing_token": fence, "remote_id": answer["remote_id"],
                                        "receipt": {"site": answer["site"], "replayed": answer["replayed"]}})
        assert confirmed.status_code == 200, confirmed.text
        assert confirmed.json()["operation"]["state"] == "CONFIRMED"
        again = requests.post(f"{ledger_url}/v1/operations/begin", headers=h, timeout=30, json={
            "job_id": job, "action": "create_draft", "target": "wordpress:test", "fencing_token": fence,
            "payload": payload}).json()
        assert again["decision"] != "dispatch", again          # answered from the receipt, not repeated
        drafts = requests.get(wordpress_site.rest(f"/wp/v2/posts?status=draft&context=edit&search={job}"),
                              auth=wordpress_site.auth, timeout=30).json()
        assert [p["id"] for p in drafts if p["title"]["raw"] == title] == [int(answer["remote_id"])]
        print(f"\n[wheel] gated write: begin {begin['decision']} -> proxy {answer['outcome']} (post "
              f"{answer['remote_id']}) -> confirm; second begin {again['decision']}; drafts in WordPress: 1")

        console = requests.get(f"{ledger_url}/console/jobs", timeout=30)   # packaged templates render
        assert console.status_code in (200, 401) and "<form" in console.text, console.text[:300]
        sweep = subprocess.run([cli, "sweep"], cwd=run_dir, env=env, text=True, capture_output=True, timeout=120)
        assert sweep.returncode == 0, sweep.stderr
    finally:
        if proxy is not None:
            _stop(proxy)
        _stop(ledger)
