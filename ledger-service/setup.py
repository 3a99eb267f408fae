"""Build hook only (metadata lives in pyproject.toml): ships the WordPress plugin sources
(wordpress/durable-ops.php, uninstall.php, readme.txt) inside the package as
durable_ledger/wordpress/, so an installed wheel carries the exact mu-plugin it was tested with
(`python -c "import durable_ledger, pathlib; print(pathlib.Path(durable_ledger.__file__).parent / 'wordpress')"`).
The sdist includes wordpress/ (MANIFEST.in), so a wheel built from the sdist has it too."""
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
PLUGIN_FILES = ("durable-ops.php", "uninstall.php", "readme.txt")


class BuildPyWithPlugin(build_py):
    def run(self):
        super().run()
        dest = Path(self.build_lib) / "durable_ledger" / "wordpress"
        dest.mkdir(parents=True, exist_ok=True)
        for name in PLUGIN_FILES:
            self.copy_file(str(HERE / "wordpress" / name), str(dest / name))


setup(cmdclass={"build_py": BuildPyWithPlugin})
