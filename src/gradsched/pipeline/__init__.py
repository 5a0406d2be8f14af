"""Helper logic of the Snakemake workflow, one module per stage.

Plain functions that turn a (validated) configuration mapping into target lists and
``gradsched`` command-line arguments; ``workflow/rules/*.smk`` keep only the rules and call
these. They import only the common layer (errors, io, limits, networks, units) so that the
workflow stays light to parse.
"""
