"""The repository root is the package `pipec`; dsl/, compiler/ and runtime/ are its subpackages.

setuptools' `find` cannot give a found folder a package name of its own, so the subpackages are
discovered here instead of listed: a module or subpackage added under those folders is always
in the wheel, never only in the editable install. The rest of the configuration is in
pyproject.toml.
"""

from setuptools import find_namespace_packages, setup
from setuptools.command.build_py import build_py

SUBPACKAGES = find_namespace_packages(include=["cli", "cli.*", "dsl", "dsl.*", "compiler", "compiler.*", "plan", "plan.*", "runtime", "runtime.*"],
                                      exclude=["*.__pycache__"])


class BuildPy(build_py):
    """This script lies in the package's folder but is no module of pipec."""

    def find_package_modules(self, package, package_dir):
        return [found for found in super().find_package_modules(package, package_dir)
                if found[:2] != ("pipec", "setup")]


setup(packages=["pipec", *(f"pipec.{name}" for name in SUBPACKAGES)], package_dir={"pipec": "."},
      cmdclass={"build_py": BuildPy})
