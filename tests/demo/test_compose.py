"""docker-compose.yml cannot run here (no Docker engine), so it is checked against the code:
image tags pinned and matching what the project tests, every env var read by the code that
receives it, every bind mount present in the repository, every command a real CLI command."""

import re
import shlex
from pathlib import Path

import pytest
import yaml

from durable_ledger.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
PACKAGE_SOURCE = "\n".join(p.read_text() for p in (ROOT / "ledger-service" / "durable_ledger").rglob("*.py"))


def _env(service):
    env = dict(SERVICES[service].get("environment") or {})
    return env


def test_compose_images_are_pinned():
    for name, svc in SERVICES.items():
        image = svc.get("image")
        assert image or svc.get("build"), name
        if image:
            assert ":" in image and not image.endswith(":latest"), f"{name} image {image} must be pinned"


def test_compose_versions_match_what_we_test():
    n8n_version = re.search(r'N8N_VERSION="\$\{N8N_VERSION:-([0-9.]+)\}"', (ROOT / "stack/n8n.sh").read_text()).group(1)
    assert SERVICES["n8n"]["image"] == f"n8nio/n8n:{n8n_version}"
    wp = SERVICES["wordpress"]["image"].split(":")[1]
    major, minor = (int(x) for x in wp.split("-")[0].split(".")[:2])
    assert (major, minor) >= (6, 1)
    assert "Requires at least: 6.1" in (ROOT / "ledger-service/durable_ledger/wordpress/durable-ops.php").read_text()


@pytest.mark.parametrize("service", ["ledger", "proxy"])
def test_compose_env_vars_are_read_by_the_code(service):
    for name in _env(service):
        assert f'"{name}"' in PACKAGE_SOURCE, f"{service}: {name} is not read anywhere in durable_ledger"


def test_compose_variables_are_documented_in_env_example():
    text = (ROOT / "docker-compose.yml").read_text()
    documented = {line.split("=", 1)[0] for line in (ROOT / ".env.example").read_text().splitlines()
                  if "=" in line and not line.startswith("#")}
    for var, default in re.findall(r"\$\{([A-Z0-9_]+)(:-[^}]*)?", text):
        assert default or var in documented, f"${{{var}}} has no default and is missing from .env.example"


def test_compose_bind_mounts_exist():
    for name, svc in SERVICES.items():
        for vol in svc.get("volumes") or []:
            source = vol.split(":", 1)[0]
            if source.startswith("."):
                assert (ROOT / source).exists(), f"{name}: {source} does not exist"
            else:
                assert source in COMPOSE["volumes"], f"{name}: named volume {source} is not declared"
        if svc.get("build"):
            assert (ROOT / svc["build"] / "Dockerfile").exists()


@pytest.mark.parametrize("service", ["ledger", "proxy"])
def test_compose_commands_are_real_cli_commands(service):
    cmd = SERVICES[service]["command"]
    assert cmd[0] == "durable-ledger"
    args = build_parser().parse_args(cmd[1:])
    assert args.host == "0.0.0.0" and callable(args.func)


def test_compose_proxy_reads_the_secret_the_setup_writes():
    secret_path = _env("proxy")["WORDPRESS_APP_PASSWORD_FILE"]
    assert secret_path in (ROOT / "stack/docker/wp-setup.sh").read_text()
    assert "app_password_file" in PACKAGE_SOURCE
    assert not any("APP_PASSWORD" in k and not k.endswith("_FILE") for k in _env("proxy"))


def test_compose_standin_only_in_offline_profile():
    assert SERVICES["openai-standin"]["profiles"] == ["offline"]
    cmd = " ".join(shlex.quote(c) for c in SERVICES["openai-standin"]["command"])
    assert "openai_standin.py" in cmd


def test_compose_has_no_secret_values():
    text = (ROOT / "docker-compose.yml").read_text()
    for line in text.splitlines():
        if re.search(r"(PASSWORD|TOKEN|KEY)\s*:", line) and "_FILE" not in line and "RANDOM_ROOT" not in line:
            assert "${" in line, f"hard-coded secret-looking value: {line.strip()}"
