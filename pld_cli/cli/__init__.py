"""The `pld` command line: options, the commands (app, run, bench), rendering on stderr."""
