"""Warehouse inventory report.

Reads stock-level CSV exports from the warehouse system, merges them with
the product catalogue, and prints a reorder report for every item that has
fallen below its minimum stock level.
"""

import csv
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path


REORDER_MARGIN = 1.25  # order 25% above the minimum to avoid re-triggering at once


@dataclass
class StockItem:
    sku: str
    warehouse: str
    on_hand: int
    minimum: int

    @property
    def shortfall(self):
        return max(0, self.minimum - self.on_hand)


def normalize_sku(raw):
    """Return a canonical SKU: upper-case, no spaces, no leading zeros in the number."""
    sku = raw.strip().upper().replace(" ", "")
    if "-" not in sku:
        return sku
    prefix, _, number = sku.partition("-")
    number = number.lstrip("0") or "0"
    return f"{prefix}-{number}"


def load_stock(path):
    items = []
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        for row in reader:
            items.append(
                StockItem(
                    sku=normalize_sku(row["sku"]),
                    warehouse=row["warehouse"].strip(),
                    on_hand=int(row["on_hand"]),
                    minimum=int(row["minimum"]),
                )
            )
    return items


def load_catalogue(path):
    catalogue = {}
    with open(path, newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            catalogue[normalize_sku(row["sku"])] = {
                "name": row["name"].strip(),
                "supplier": row["supplier"].strip(),
                "pack_size": int(row.get("pack_size") or 1),
            }
    return catalogue


def reorder_quantity(item, pack_size):
    target = int(item.minimum * REORDER_MARGIN)
    needed = max(0, target - item.on_hand)
    packs = -(-needed // pack_size)  # ceiling division
    return packs * pack_size


def build_report(items, catalogue):
    by_supplier = defaultdict(list)
    for item in items:
        if item.shortfall == 0:
            continue
        info = catalogue.get(item.sku)
        if info is None:
            print(f"warning: {item.sku} not in catalogue", file=sys.stderr)
            continue
        qty = reorder_quantity(item, info["pack_size"])
        by_supplier[info["supplier"]].append((item, info["name"], qty))
    return by_supplier


def find_item(items, raw_sku, warehouse=None):
    wanted = normalize_sku(raw_sku)
    for item in items:
        if item.sku == wanted and (warehouse is None or item.warehouse == warehouse):
            return item
    return None


def print_report(by_supplier):
    for supplier in sorted(by_supplier):
        print(f"== {supplier} ==")
        for item, name, qty in sorted(by_supplier[supplier], key=lambda e: e[0].sku):
            print(f"  {item.sku:<12} {name:<30} {item.warehouse:<6} order {qty}")
        print()


def main(argv):
    if len(argv) < 3:
        print("usage: inventory_report.py STOCK.csv CATALOGUE.csv [SKU]", file=sys.stderr)
        return 2
    items = load_stock(Path(argv[1]))
    catalogue = load_catalogue(Path(argv[2]))
    if len(argv) > 3:
        item = find_item(items, argv[3])
        if item is None:
            print(f"no stock record for {normalize_sku(argv[3])}")
            return 1
        print(item)
        return 0
    print_report(build_report(items, catalogue))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
