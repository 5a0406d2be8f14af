"""A warm process for many short ``gradsched`` commands: the package imported once, one
fork per command.

A workflow runs hundreds of commands that each take a fraction of a second of work, and a
fresh interpreter spends more than that importing numpy, pandas and scipy. The *server*
(:mod:`.server`) imports the command line and its libraries once, then forks a child per
connection; the child takes the caller's standard streams, working folder, environment and
arguments and runs :func:`gradsched.cli.main` as ``python -m gradsched`` would. The
*client* (:mod:`.client`, standard library only) is what ``python -m gradsched`` runs first
when :data:`.protocol.SOCKET_VARIABLE` names a server; whenever the server cannot take the
command exactly as a fresh process would run it (no server, another environment, another
working folder, another user), the client returns and the command runs in the client's own
process. :mod:`.lifecycle` starts and stops a server for the Snakemake workflow.

The pattern is the zygote/fork-server of Android's Zygote and Python's own
``multiprocessing`` *forkserver* start method, applied to a command line.
"""
