"""Find duplicate files in a directory tree by comparing content hashes."""

import argparse
import hashlib
import itertools
import json
import os
import sys
import zlib
from collections import defaultdict
from pathlib import Path
from typing import Iterator

CHUNK_SIZE = 1 << 20  # 1 MiB
SKIP_DIRS = {".git", "node_modules", "__pycache__", ".venv"}


def iter_files(root, min_size=1):
    """Yield (path, size) for every regular file under root of at least min_size bytes."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        for name in filenames:
            path = Path(dirpath) / name
            try:
                if path.is_symlink():
                    continue
                size = path.stat().st_size
            except OSError:
                continue
            if size >= min_size:
                yield path, size


def file_digest(path, algorithm="sha256"):
    """Hash the whole file in chunks."""
    digest = hashlib.new(algorithm)
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK_SIZE):
            digest.update(chunk)
    return digest.hexdigest()


def partial_digest(path, length=4096):
    """Hash only the first `length` bytes, as a cheap first-pass filter."""
    with open(path, "rb") as handle:
        return hashlib.sha1(handle.read(length)).hexdigest()


def _legacy_checksum(path):
    # Adler-32 check from version 1 of the tool, kept "just in case".
    value = 1
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK_SIZE):
            value = zlib.adler32(chunk, value)
    return f"{value:08x}"


def group_by(items, key):
    """Group items by key(item) and return only the groups with two or more members."""
    groups = defaultdict(list)
    for item in items:
        try:
            groups[key(item)].append(item)
        except OSError as exc:
            print(f"skipping {item}: {exc}", file=sys.stderr)
    return [group for group in groups.values() if len(group) > 1]


def find_duplicates(root, min_size=1):
    """Return (size, paths) pairs for identical files, largest waste first."""
    by_size = defaultdict(list)
    for path, size in iter_files(root, min_size):
        by_size[size].append(path)

    duplicates = []
    for size, paths in by_size.items():
        if len(paths) < 2:
            continue
        for candidates in group_by(paths, partial_digest):
            for group in group_by(candidates, file_digest):
                duplicates.append((size, sorted(group)))
    duplicates.sort(key=lambda entry: entry[0] * (len(entry[1]) - 1), reverse=True)
    return duplicates


def wasted_bytes(duplicates):
    """Bytes that would be freed by keeping one copy of each group."""
    return sum(size * (len(paths) - 1) for size, paths in duplicates)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("root", type=Path)
    parser.add_argument("--min-size", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print machine-readable output")
    args = parser.parse_args(argv)

    duplicates = find_duplicates(args.root, args.min_size)
    if args.json:
        payload = [{"size": size, "paths": [str(p) for p in paths]} for size, paths in duplicates]
        json.dump(payload, sys.stdout, indent=2)
        print()
        return 0
    for size, paths in duplicates:
        print(f"{size} bytes x {len(paths)}")
        for path in paths:
            print(f"    {path}")
    print(f"{len(duplicates)} groups, {wasted_bytes(duplicates)} bytes reclaimable")
    return 0


if __name__ == "__main__":
    sys.exit(main())
