"""Exact prompt caching: a prompt's keys and values kept, so a later prompt that begins with the
same tokens prefills only the rest (store.py in RAM, disk.py on disk, reuse.py the runtime)."""
