"""Serve `js/plotly.min.js` from the installed plotly package instead of vendoring 4 MB into git.

runserver (and WhiteNoise in DEBUG) find it through this finder; `collectstatic` copies it into STATIC_ROOT
for production like any other static file.
"""

from __future__ import annotations

from pathlib import Path

from django.contrib.staticfiles import utils
from django.contrib.staticfiles.finders import BaseFinder
from django.core.checks import Error
from django.core.files.storage import FileSystemStorage

PLOTLY_STATIC_PATH = "js/plotly.min.js"


def plotly_js_dir() -> Path:
    """The directory of the installed plotly package that holds plotly.min.js."""
    import plotly

    return Path(plotly.__file__).resolve().parent / "package_data"


class _JsStorage(FileSystemStorage):
    # collectstatic writes a listed file under its storage's `prefix` when it has one: js/plotly.min.js.
    prefix = "js"


class PlotlyFinder(BaseFinder):
    """A static files finder that knows exactly one file: js/plotly.min.js."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.storage = _JsStorage(location=str(plotly_js_dir()))

    def check(self, **kwargs):
        """Error when the installed plotly package has no plotly.min.js."""
        if (plotly_js_dir() / "plotly.min.js").is_file():
            return []
        return [Error("plotly.min.js not found in the installed plotly package.", id="gpufinops.E003")]

    def find(self, path: str, find_all: bool = False, **kwargs):
        """Absolute path of plotly.min.js for `js/plotly.min.js`, else nothing."""
        if path != PLOTLY_STATIC_PATH:
            return [] if find_all else None
        match = str(plotly_js_dir() / "plotly.min.js")
        return [match] if find_all else match

    def list(self, ignore_patterns):
        """Yield (path, storage) for collectstatic."""
        if not utils.matches_patterns("plotly.min.js", ignore_patterns or []):
            yield "plotly.min.js", self.storage
