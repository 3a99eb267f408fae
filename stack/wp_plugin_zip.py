#!/usr/bin/env python3
"""Builds the regular WordPress plugin zip from the must-use plugin's own source.

    python3 stack/wp_plugin_zip.py --out dist     # -> dist/durable-ops-<VERSION>.zip

The zip holds durable-ops/durable-ops.php (byte for byte the mu-plugin file), uninstall.php and
readme.txt from ledger-service/durable_ledger/wordpress/: one source, two packagings. Entries are written in a
fixed order with a fixed timestamp, so the same sources give the same zip. Stdlib only.
"""
from __future__ import annotations

import argparse
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "ledger-service" / "durable_ledger" / "wordpress"
SLUG = "durable-ops"
FILES = ("durable-ops.php", "uninstall.php", "readme.txt")


def build(out_dir: Path) -> Path:
    version = (REPO / "VERSION").read_text().strip()
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{SLUG}-{version}.zip"
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        dir_info = zipfile.ZipInfo(f"{SLUG}/", date_time=(2020, 1, 1, 0, 0, 0))
        dir_info.external_attr = (0o40755 << 16) | 0x10
        zf.writestr(dir_info, b"")
        for name in FILES:
            info = zipfile.ZipInfo(f"{SLUG}/{name}", date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = 0o100644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, (SRC / name).read_bytes())
    return target


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=str(REPO / "dist"))
    print(build(Path(p.parse_args(argv).out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
