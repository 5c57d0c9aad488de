"""The page's finder: choose a torch, a CUDA, a Python and a GPU, and see the one install
command (or why no wheel fits), as ``archguard which`` says it, with no server: the site's
``site.json`` data is embedded in the page and a small script judges the wheels in the
browser. The same rules, simplified to what a page can know: the torch pin, the CUDA major,
the Python tag (``cpXY`` or ``abi3`` from its floor), a cubin for the GPU (same major, its
minor at most the GPU's; an ``a`` cubin only on its own device). A query string preselects
(``index.html?torch=2.14.1&cuda=13.0&python=3.11&gpu=8.6``)."""

from __future__ import annotations

import html
import json
from importlib import resources

from archguard.core.coverage import known_devices
from archguard.core.site import Site

# the script, beside this module (package data): judges the embedded site.json's wheels
_SCRIPT = resources.files("archguard.farm").joinpath("finder.js")


def finder_html(site: Site) -> str:
    """The finder's form, its output, the site's data and the script."""
    cudas = sorted({tuple(int(x) for x in c.cuda.split(".")) for c in site.cells})
    gpus = sorted(
        {d.cc_text for cuda in cudas for d in known_devices((cuda[0], cuda[1]))},
        key=lambda t: tuple(int(x) for x in t.split(".")),
    )
    data = json.dumps(site.as_json()).replace("</", "<\\/")
    selects = "".join(
        f'<label>{html.escape(label)} <select id="{name}"></select></label> '
        for name, label in (
            ("torch", "torch"),
            ("cuda", "CUDA"),
            ("python", "Python"),
            ("platform", "machine"),
            ("gpu", "GPU"),
        )
    )
    return (
        '<h2>Which wheel?</h2><p id="finder">'
        + selects
        + '</p><pre id="finder-out">(the finder needs JavaScript; or run: python -m archguard '
        "which SITE_URL)</pre>"
        f'<script type="application/json" id="site-data">{data}</script>'
        f"<script>const GPUS = {json.dumps(gpus)};\n{_SCRIPT.read_text(encoding='utf-8')}</script>"
    )
