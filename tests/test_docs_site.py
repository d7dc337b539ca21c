"""The documentation site (mkdocs.yml) builds in strict mode, and every link and image of every page it builds
resolves inside the site: nothing it shows points at a file a static host would not have."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

REPO = Path(__file__).resolve().parents[1]
pytest.importorskip("mkdocs")
pytest.importorskip("mkdocstrings")

REFERENCE = re.compile(r"""(?:href|src)=["']([^"']+)["']""")


def target_exists(site: Path, page: Path, reference: str) -> bool:
    parts = urlsplit(reference)
    if parts.scheme or parts.netloc or not parts.path:  # an absolute URL, or an anchor on the same page
        return True
    path = (page.parent / unquote(parts.path)).resolve()
    return site.resolve() in (path, *path.parents) and (path.is_file() or (path / "index.html").is_file())


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def test_the_site_builds_strictly_with_every_link_inside_it(site):
    pages = sorted(p for p in site.rglob("*.html") if p.name != "404.html")  # 404.html is served from any path
    assert len(pages) > 30
    broken = [(page.relative_to(site).as_posix(), reference) for page in pages
              for reference in REFERENCE.findall(page.read_text(encoding="utf-8"))
              if not target_exists(site, page, reference)]
    assert not broken, broken[:20]


def test_the_site_has_the_readme_the_guides_the_boards_and_the_api(site):
    front = (site / "index.html").read_text(encoding="utf-8")
    assert "Quickstart" in front and "a2c-tiny-mlp" in front  # the README is the front page
    for board in ("tmaze-cpu", "tmaze-submissions", "popgym-cpu", "popgym-repeat-previous-cpu"):
        page = (site / "leaderboard" / board / "LEADERBOARD" / "index.html").read_text(encoding="utf-8")
        assert "success_by_length.png" in page and (site / "leaderboard" / board / "success_by_length.png").is_file()
    api = {name: (site / "api" / name / "index.html").read_text(encoding="utf-8")
           for name in ("envs", "memory", "buffers", "agents", "leaderboard", "experiments")}
    assert "tmaze_params" in api["envs"] and "relit_monoid" in api["memory"] and "JaxCells" in api["leaderboard"]
    assert "eq. 3.5" in api["memory"]  # the docstrings' equations reach the reference
    assert ":func:<code>" not in api["memory"] and "with <code>make</code>" in api["memory"]  # Sphinx roles as code
    assert (site / "search" / "search_index.json").is_file()  # the site can be searched
    assert (site / "repository" / "benchmarks" / "train_speed.py").is_file()  # a script a page links to
