"""MkDocs hook: the command-line reference page, generated at build time from the config schema.

``scorebayes.apps.schema.cli_reference()`` returns the page as Markdown, written from the same
typed schema that checks configs, so the page cannot drift from what ``scorebayes run`` accepts.
The page exists only in the build (``reference/cli.md``); there is no hand-written copy.
"""

from __future__ import annotations

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

PAGE = "reference/cli.md"


def _markdown() -> str:
    try:
        from scorebayes.apps.schema import cli_reference
    except ImportError as err:
        raise PluginError(
            f"docs/hooks/cli_reference.py: cannot import scorebayes.apps.schema.cli_reference ({err}); "
            "the command-line reference is generated from the config schema and has no hand-written "
            "fallback") from None
    text = cli_reference()
    if not isinstance(text, str) or not text.strip():
        raise PluginError("scorebayes.apps.schema.cli_reference() returned no Markdown")
    return text


def on_files(files, config):
    """Add the generated page to the build (before the navigation is resolved)."""
    existing = files.get_file_from_path(PAGE)
    if existing is not None:
        files.remove(existing)
    files.append(File.generated(config, PAGE, content=_markdown()))
    return files
