"""Rotation von Datenbank-Backups.

Behält tägliche, wöchentliche und monatliche Sicherungen nach einem
festen Schema und löscht alle übrigen Dateien.
"""

import argparse
import re
import sys
from datetime import date, datetime
from pathlib import Path

# Dateinamen haben die Form "shopdb-2024-03-17.sql.gz"
BACKUP_PATTERN = re.compile(r"^(?P<name>[a-z0-9_]+)-(?P<date>\d{4}-\d{2}-\d{2})\.sql\.gz$")

# Wie viele Sicherungen pro Stufe aufbewahrt werden
KEEP_DAILY = 7
KEEP_WEEKLY = 5
KEEP_MONTHLY = 12


def find_backups(directory):
    """Liefert eine nach Datum absteigend sortierte Liste von (Datum, Pfad)-Paaren."""
    backups = []
    for path in Path(directory).iterdir():
        match = BACKUP_PATTERN.match(path.name)
        if not match:
            # Fremde Dateien werden stillschweigend ignoriert
            continue
        day = datetime.strptime(match.group("date"), "%Y-%m-%d").date()
        backups.append((day, path))
    # Neueste Sicherung zuerst
    backups.sort(reverse=True)
    return backups


def select_keep(backups, today):
    """Bestimmt, welche Sicherungen behalten werden sollen."""
    keep = set()
    weeks_seen = set()
    months_seen = set()

    for day, path in backups:
        if day > today:
            # Sicherungen aus der Zukunft deuten auf eine falsch gestellte Uhr hin
            print(f"Warnung: {path.name} liegt in der Zukunft", file=sys.stderr)
            keep.add(path)
            continue

        # Tägliche Stufe: alles aus den letzten KEEP_DAILY Tagen
        if (today - day).days < KEEP_DAILY:
            keep.add(path)

        # Wöchentliche Stufe: jeweils die neueste Sicherung einer ISO-Kalenderwoche
        week = day.isocalendar()[:2]
        if week not in weeks_seen and len(weeks_seen) < KEEP_WEEKLY:
            weeks_seen.add(week)
            keep.add(path)

        # Monatliche Stufe: jeweils die neueste Sicherung eines Kalendermonats
        month = (day.year, day.month)
        if month not in months_seen and len(months_seen) < KEEP_MONTHLY:
            months_seen.add(month)
            keep.add(path)

    return keep


def rotate(directory, today, dry_run=True):
    """Löscht alle Sicherungen, die nicht behalten werden, und gibt deren Anzahl zurück."""
    backups = find_backups(directory)
    if not backups:
        print("Keine Sicherungen gefunden.")
        return 0
    keep = select_keep(backups, today)
    removed = 0
    for _day, path in backups:
        if path in keep:
            continue
        if dry_run:
            # Im Probelauf nur anzeigen, nichts löschen
            print(f"würde löschen: {path.name}")
        else:
            path.unlink()
            print(f"gelöscht: {path.name}")
        removed += 1
    print(f"{len(keep)} behalten, {removed} entfernt")
    return removed


def main():
    parser = argparse.ArgumentParser(description="Datenbank-Backups rotieren")
    parser.add_argument("directory", help="Verzeichnis mit den Sicherungen")
    parser.add_argument("--apply", action="store_true", help="wirklich löschen")
    # Stichtag ist überschreibbar, damit sich das Verhalten testen lässt
    parser.add_argument("--today", type=date.fromisoformat, default=date.today())
    args = parser.parse_args()
    rotate(args.directory, args.today, dry_run=not args.apply)


if __name__ == "__main__":
    main()
