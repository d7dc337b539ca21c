"""Whether a published PNG plot is the one its data draws now.

A PNG written by matplotlib names its version (the ``Software`` text of the file). Under that version
the rebuilt plot must match the published one pixel for pixel; under another version (fonts and
anti-aliasing differ between releases) it must still be an image of the same size in pixels: the
same figure, panels and legend room.
"""

from __future__ import annotations

import re
from pathlib import Path

PNG = b"\x89PNG\r\n\x1a\n"


def writer_version(path: Path) -> str | None:
    """The matplotlib version that wrote the PNG at ``path`` (None: not named in the file)."""
    from PIL import Image

    with Image.open(path) as image:
        found = re.match(r"Matplotlib version(\S+),", image.info.get("Software", ""))
    return found.group(1) if found else None


def assert_same_image(rebuilt: Path, published: Path, rebuild: str) -> None:
    """``rebuilt`` (drawn now) is ``published`` (see the module); ``rebuild`` says how to refresh it."""
    import matplotlib
    import matplotlib.image
    import numpy as np

    assert published.read_bytes()[:8] == PNG, f"{published} is not a PNG image"
    assert rebuilt.read_bytes()[:8] == PNG, f"{rebuilt} was not written as a PNG image"
    new, old = matplotlib.image.imread(rebuilt), matplotlib.image.imread(published)
    assert new.shape == old.shape, (
        f"{published} is {old.shape[1]}×{old.shape[0]} pixels, its data draws {new.shape[1]}×{new.shape[0]}: "
        f"{rebuild}")
    if writer_version(published) == matplotlib.__version__:
        differ = int(np.any(new != old, axis=-1).sum())
        assert differ == 0, f"{published} is not what its data draws ({differ} pixels differ): {rebuild}"
