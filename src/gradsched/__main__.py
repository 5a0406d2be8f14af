"""``python -m gradsched``.

The working folder that ``python -m`` puts first on the import path is removed before
anything else is imported: a file planted there (``evil.py``, ``torch.py``) is never
loaded (``docs/errors.md``, "Data never selects code")."""

from gradsched.names import drop_implicit_cwd

drop_implicit_cwd()

import sys  # noqa: E402 - after the import path is cleaned

from gradsched.cli import main  # noqa: E402

sys.exit(main())
