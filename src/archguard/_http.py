"""archguard's one way to open a URL (an index's page, a release's sdist, a site's
``site.json``).

:func:`opened` is ``urllib.request.urlopen`` whose error answers are closed as they are
raised: an :class:`urllib.error.HTTPError` (a 404, say) holds the server's open response,
and a caller that turns it into an error of its own would leave that socket to the garbage
collector, which closes it whenever it next runs, with a ``ResourceWarning`` (seen: raised
in an unrelated test of the same process, on CI).

Below every subpackage (it imports nothing of archguard), so any layer may use it."""

from __future__ import annotations

import contextlib
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.client import HTTPResponse


@contextlib.contextmanager
def opened(url: str | urllib.request.Request, timeout: float) -> Iterator[HTTPResponse]:
    """The answer to ``url`` (``urlopen``'s, closed on leaving); an HTTP error answer is
    raised closed, its code and reason still readable."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            yield response
    except urllib.error.HTTPError as exc:
        exc.close()
        raise
