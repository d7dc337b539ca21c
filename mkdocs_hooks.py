"""MkDocs hooks of the documentation site (``mkdocs.yml``): the README is its front page, and a repository file
that a page links to (a benchmark script, an example, the changelog) is published beside the pages.

* ``README.md`` becomes the front page, ``index.md``.
* A link from a page to a file of the repository outside ``docs/`` is rewritten to ``repository/<path>``, and
  that file is published there (a Markdown file as a page, its own links rewritten the same way, the others as
  they are), so that the site, a folder any static host can publish, holds everything its pages link to.
* A link to a folder of the repository (``benchmarks/``, ``docs/leaderboard/``) keeps its text and loses its
  target: a static site has no folder listings.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent
DOCS = ROOT / "docs"
PUBLISHED = "repository"  # the site folder of the repository files that pages link to
# a Markdown link or image: [text](target) or [text](target#anchor), the target not an absolute URL
LINK = re.compile(r"(!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\()([^)\s#]*)((?:#[^)\s]*)?)\)")


def site_path(path: Path) -> str:
    """Where the repository file ``path`` lives in the site."""
    if DOCS in path.parents:
        return path.relative_to(DOCS).as_posix()
    if path == ROOT / "README.md":
        return "index.md"
    return posixpath.join(PUBLISHED, path.relative_to(ROOT).as_posix())


def rewrite(markdown: str, source: Path, wanted: set[Path]) -> str:
    """``markdown`` of the repository file ``source`` with every relative link pointed at its target's place in
    the site, seen from ``source``'s own place there; the repository files it links to outside docs/ are added to
    ``wanted``."""
    here = posixpath.dirname(site_path(source))

    def replace(match: re.Match) -> str:
        opening, text, target, anchor = match.group(1), match.group(2), match.group(3), match.group(4)
        if not target or re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("/"):
            return match.group(0)
        resolved = (source.parent / target).resolve()
        if ROOT != resolved and ROOT not in resolved.parents or not resolved.exists():
            return match.group(0)  # not the repository's: mkdocs' own validation reports it
        if resolved.is_dir():
            return text  # a folder: a static site has no listing of it
        if DOCS not in resolved.parents:
            wanted.add(resolved)
        return f"{opening}{posixpath.relpath(site_path(resolved), here or '.')}{anchor})"

    return LINK.sub(replace, markdown)


def on_files(files: Files, config) -> Files:
    """Add the README as the front page and, transitively, the repository files the pages link to."""
    wanted: set[Path] = {ROOT / "README.md"}
    for file in list(files):
        if file.src_uri.endswith(".md") and file.abs_src_path:
            rewrite(Path(file.abs_src_path).read_text(encoding="utf-8"), Path(file.abs_src_path).resolve(), wanted)
    added: set[Path] = set()
    while wanted - added:
        path = sorted(wanted - added)[0]
        added.add(path)
        if path.suffix == ".md":
            content = rewrite(path.read_text(encoding="utf-8"), path, wanted)
            files.append(File.generated(config, site_path(path), content=content))
        else:
            files.append(File.generated(config, site_path(path), abs_src_path=str(path)))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Point a docs/ page's links to repository files at their published copies (the generated pages, the README
    among them, were rewritten when they were added)."""
    if not page.file.abs_src_path or page.file.generated_by:
        return markdown
    return rewrite(markdown, Path(page.file.abs_src_path).resolve(), set())


# a Sphinx role that the docstrings use (:func:`make`, :class:`~pkg.Name`), as mkdocstrings renders it
ROLE = re.compile(r":(?:func|class|mod|meth|data|attr|exc|obj|py:\w+):(<code>)~?")


def on_page_content(html: str, page, config, files) -> str:
    """The API reference shows a docstring's Sphinx role (``:func:`make```) as its code span alone."""
    return ROLE.sub(r"\1", html)
