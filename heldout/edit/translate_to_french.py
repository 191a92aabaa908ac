"""Generate a table of contents for a Markdown document.

The table is inserted between the markers <!-- toc --> and <!-- /toc -->;
anything already between them is replaced.
"""

import re
import sys
import unicodedata
from pathlib import Path

START_MARKER = "<!-- toc -->"
END_MARKER = "<!-- /toc -->"

# Only ATX headings ("## Title") are supported, not underlined ones.
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
FENCE = re.compile(r"^(```|~~~)")


def slugify(title, seen):
    """Turn a heading into an anchor the same way most Markdown renderers do."""
    # Strip accents so that "Café" becomes "cafe".
    text = unicodedata.normalize("NFKD", title)
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    # Drop inline code markers and links, keeping only their text.
    text = re.sub(r"`([^`]*)`", r"\1", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    slug = re.sub(r"[^\w\- ]", "", text.lower()).strip().replace(" ", "-")
    # Duplicate headings get a numeric suffix: "setup", "setup-1", "setup-2".
    count = seen.get(slug, 0)
    seen[slug] = count + 1
    return slug if count == 0 else f"{slug}-{count}"


def collect_headings(lines, min_level=2, max_level=3):
    """Return (level, title, anchor) for every heading outside code blocks."""
    headings = []
    seen = {}
    in_fence = False
    for line in lines:
        # Headings inside fenced code blocks are not real headings.
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        match = HEADING.match(line)
        if not match:
            continue
        level = len(match.group(1))
        title = match.group(2)
        anchor = slugify(title, seen)
        # The anchor is computed even for skipped levels so that suffixes stay in sync.
        if min_level <= level <= max_level:
            headings.append((level, title, anchor))
    return headings


def render_toc(headings, min_level=2):
    """Render the headings as a nested bullet list."""
    rows = []
    for level, title, anchor in headings:
        indent = "  " * (level - min_level)
        rows.append(f"{indent}- [{title}](#{anchor})")
    return rows


def insert_toc(text, min_level=2, max_level=3):
    """Return the text with the table of contents inserted between the markers."""
    lines = text.splitlines()
    try:
        start = lines.index(START_MARKER)
        end = lines.index(END_MARKER, start)
    except ValueError:
        # Without both markers we leave the document untouched.
        return text
    headings = collect_headings(lines[end + 1:], min_level, max_level)
    toc = render_toc(headings, min_level)
    new_lines = lines[: start + 1] + [""] + toc + [""] + lines[end:]
    # Keep the trailing newline if the original had one.
    suffix = "\n" if text.endswith("\n") else ""
    return "\n".join(new_lines) + suffix


def main(paths):
    changed = 0
    for name in paths:
        path = Path(name)
        original = path.read_text(encoding="utf-8")
        updated = insert_toc(original)
        if updated != original:
            path.write_text(updated, encoding="utf-8")
            print(f"updated {path}")
            changed += 1
    # Exit code 1 tells pre-commit that files were modified.
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
