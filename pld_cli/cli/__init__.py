"""The `pld` command line: options, rendering on stderr, the app."""
