"""The package version, in a leaf module: modules import it from here, never from the package
face (`pipec/__init__.py`), so importing any module does not run the face's imports."""

__version__ = "0.1.0"
