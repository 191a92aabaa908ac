"""Parse web-server access-log lines and compute simple traffic statistics."""

import re
from collections import Counter
from datetime import datetime, timedelta

LOG_PATTERN = re.compile(
    r'(?P<ip>\S+) \S+ \S+ \[(?P<ts>[^\]]+)\] '
    r'"(?P<method>[A-Z]+) (?P<path>\S+) [^"]*" '
    r'(?P<status>\d{3}) (?P<size>\d+|-)'
)
TIMESTAMP_FORMAT = "%d/%b/%Y:%H:%M:%S %z"


class LogEntry:
    def __init__(self, ip, timestamp, method, path, status, size):
        self.ip = ip
        self.timestamp = timestamp
        self.method = method
        self.path = path
        self.status = status
        self.size = size

    @property
    def is_error(self):
        return self.status >= 500

    def __repr__(self):
        return f"LogEntry({self.method} {self.path} -> {self.status})"


def parse_line(line):
    match = LOG_PATTERN.match(line)
    if not match:
        return None
    size = match.group("size")
    return LogEntry(
        ip=match.group("ip"),
        timestamp=datetime.strptime(match.group("ts"), TIMESTAMP_FORMAT),
        method=match.group("method"),
        path=match.group("path"),
        status=int(match.group("status")),
        size=0 if size == "-" else int(size),
    )


def parse_lines(lines):
    entries = []
    skipped = 0
    for line in lines:
        entry = parse_line(line)
        if entry is None:
            skipped += 1
        else:
            entries.append(entry)
    return entries, skipped


def status_counts(entries):
    return Counter(entry.status for entry in entries)


def top_paths(entries, n=10):
    counts = Counter(entry.path.split("?", 1)[0] for entry in entries)
    return counts.most_common(n)


def error_rate(entries):
    if not entries:
        return 0.0
    errors = sum(1 for entry in entries if entry.is_error)
    return errors / len(entries)


def bytes_by_ip(entries):
    totals = {}
    for entry in entries:
        totals[entry.ip] = totals.get(entry.ip, 0) + entry.size
    return totals


def bucket_by_minute(entries, width=1):
    buckets = {}
    for entry in entries:
        ts = entry.timestamp.replace(second=0, microsecond=0)
        key = ts - timedelta(minutes=ts.minute % width)
        buckets.setdefault(key, []).append(entry)
    return dict(sorted(buckets.items()))


def peak_minute(entries):
    buckets = bucket_by_minute(entries)
    if not buckets:
        return None, 0
    start, group = max(buckets.items(), key=lambda item: len(item[1]))
    return start, len(group)


def summarize(lines, top=5):
    entries, skipped = parse_lines(lines)
    peak_start, peak_count = peak_minute(entries)
    return {
        "requests": len(entries),
        "skipped": skipped,
        "error_rate": round(error_rate(entries), 4),
        "statuses": dict(status_counts(entries)),
        "top_paths": top_paths(entries, top),
        "peak_minute": peak_start.isoformat() if peak_start else None,
        "peak_requests": peak_count,
    }
