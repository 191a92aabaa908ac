"""The runtimes by name, in the order `--runtime auto` tries them: the registry the command line
and the bench read (this module imports nothing, so `pld --help` stays torch-free). Each name has
its opener in opening.py; a new runtime is one module, one name here and one opener there."""

KINDS = ("native", "static", "dynamic")
