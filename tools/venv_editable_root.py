"""Print the folder that the running interpreter's editable ``gradsched`` install points at
(resolved), or nothing when gradsched is not installed, or not as an editable install.

The Makefile asks a ``.venv`` it finds without its owner mark (made by an earlier Makefile)
whether it is this clone's: pip records an editable install's folder in the distribution's
``direct_url.json`` (PEP 610), ``{"url": "file:///...", "dir_info": {"editable": true}}``.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.parse
from importlib import metadata


def main() -> int:
    try:
        text = metadata.distribution("gradsched").read_text("direct_url.json")
        record = json.loads(text or "{}")
    except (metadata.PackageNotFoundError, ValueError):
        return 0
    if not record.get("dir_info", {}).get("editable"):
        return 0
    url = urllib.parse.urlparse(record.get("url", ""))
    if url.scheme == "file":
        print(os.path.realpath(urllib.parse.unquote(url.path)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
