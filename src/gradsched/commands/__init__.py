"""Sub-command modules of the ``gradsched`` CLI (each defines ``register(subparsers)``)."""
