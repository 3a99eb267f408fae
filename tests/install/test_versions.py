"""One version everywhere: VERSION, the Python package, the n8n package, the WordPress plugin,
and the artifacts `make dist` built from them carry the same number."""
import json
import subprocess
import sys
import tarfile
import zipfile

from dist_support import REPO, artifact, version


def test_sources_agree_with_the_version_file():
    proc = subprocess.run([sys.executable, str(REPO / "stack" / "version.py"), "check"], text=True, capture_output=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == version()


def test_artifacts_carry_the_version_and_the_same_plugin_source():
    v = version()
    php = (REPO / "ledger-service" / "durable_ledger" / "wordpress" / "durable-ops.php").read_bytes()
    whl = artifact(f"durable_ledger-{v}-py3-none-any.whl")
    with zipfile.ZipFile(whl) as zf:
        names = set(zf.namelist())
        assert f"Version: {v}" in zf.read(f"durable_ledger-{v}.dist-info/METADATA").decode()
        assert zf.read("durable_ledger/wordpress/durable-ops.php") == php      # the mu-plugin, byte for byte
        assert {"durable_ledger/wordpress/uninstall.php", "durable_ledger/wordpress/readme.txt"} <= names
        templates = {n for n in names if n.startswith("durable_ledger/console/templates/")}
        source_templates = {f"durable_ledger/console/templates/{p.name}"
                            for p in (REPO / "ledger-service/durable_ledger/console/templates").glob("*.html")}
        assert templates == source_templates
    with tarfile.open(artifact(f"durable_ledger-{v}.tar.gz")) as tf:
        assert tf.extractfile(f"durable_ledger-{v}/durable_ledger/wordpress/durable-ops.php").read() == php
    with tarfile.open(artifact(f"n8n-nodes-durable-{v}.tgz")) as tf:
        pkg = json.load(tf.extractfile("package/package.json"))
        assert pkg["version"] == v
        assert pkg["peerDependencies"] == {"n8n-workflow": "*"}
        assert not pkg.get("dependencies")
        assert "package/dist/nodes/DurableStep/DurableStep.node.js" in tf.getnames()
    with zipfile.ZipFile(artifact(f"durable-ops-{v}.zip")) as zf:
        assert sorted(zf.namelist()) == ["durable-ops/", "durable-ops/durable-ops.php", "durable-ops/readme.txt",
                                         "durable-ops/uninstall.php"]
        assert zf.read("durable-ops/durable-ops.php") == php                   # one source, two packagings
        readme = zf.read("durable-ops/readme.txt").decode()
        assert f"Stable tag: {v}" in readme and readme.startswith("=== Durable Ops ===")
    for p in sorted((REPO / "dist").iterdir()):
        print(f"\n[dist] {p.name} {p.stat().st_size} bytes", end="")
