"""Subcommands of the ``slide`` command line, one module each (see slide_bringup.cli)."""
