"""``python -m gradsched``."""

import sys

try:
    from gradsched.cli import main
except KeyboardInterrupt:  # Ctrl-C while the entry point itself loads: no traceback
    print("gradsched: interrupted", file=sys.stderr)
    sys.exit(130)

sys.exit(main())
