"""Invoice calculations for the Fernhill Print Shop order system.

All amounts are handled as Decimal and rounded to whole cents only when a
value is shown to the customer or stored on the invoice.
"""

from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal

CENT = Decimal("0.01")
BULK_THRESHOLD = 250  # units of a single product
BULK_DISCOUNT = Decimal("0.10")


def to_cents(amount):
    """Round a Decimal amount to whole cents, half up."""
    return amount.quantize(CENT, rounding=ROUND_HALF_UP)


@dataclass
class LineItem:
    description: str
    quantity: int
    unit_price: Decimal
    vat_exempt: bool = False

    @property
    def net(self):
        subtotal = self.unit_price * self.quantity
        if self.quantity >= BULK_THRESHOLD:
            subtotal -= subtotal * BULK_DISCOUNT
        return subtotal

    @property
    def vat(self):
        if self.vat_exempt:
            return Decimal("0")
        return self.net * Decimal("0.20")

    @property
    def gross(self):
        return self.net + self.vat


@dataclass
class Invoice:
    number: str
    customer: str
    lines: list = field(default_factory=list)
    shipping_net: Decimal = Decimal("0")

    def add(self, description, quantity, unit_price, vat_exempt=False):
        self.lines.append(LineItem(description, quantity, Decimal(unit_price), vat_exempt))

    @property
    def net_total(self):
        return to_cents(sum((line.net for line in self.lines), Decimal("0")) + self.shipping_net)

    @property
    def vat_total(self):
        line_vat = sum((line.vat for line in self.lines), Decimal("0"))
        shipping_vat = self.shipping_net * Decimal("0.20")
        return to_cents(line_vat + shipping_vat)

    @property
    def gross_total(self):
        return self.net_total + self.vat_total

    def summary_lines(self):
        rows = [f"Invoice {self.number} for {self.customer}"]
        for line in self.lines:
            flag = " (VAT exempt)" if line.vat_exempt else ""
            rows.append(
                f"  {line.quantity:>5} x {line.description:<28} {to_cents(line.net):>10}{flag}"
            )
        if self.shipping_net:
            rows.append(f"  {'Shipping':<36} {to_cents(self.shipping_net):>10}")
        rows.append(f"  {'Net total':<36} {self.net_total:>10}")
        rows.append(f"  {'VAT':<36} {self.vat_total:>10}")
        rows.append(f"  {'Total due':<36} {self.gross_total:>10}")
        return rows


def net_from_gross(gross):
    """Work out the net price from a VAT-inclusive price entered at the counter."""
    return to_cents(Decimal(gross) / (1 + Decimal("0.20")))


if __name__ == "__main__":
    invoice = Invoice("FH-2024-0193", "Larkspur Bakery")
    invoice.add("A5 flyers, 170gsm, 2-sided", 500, "0.084")
    invoice.add("Business cards, matt finish", 200, "0.21")
    invoice.add("Charity run leaflets", 300, "0.05", vat_exempt=True)
    invoice.shipping_net = Decimal("6.50")
    print("\n".join(invoice.summary_lines()))
    print("Counter price 18.00 incl. VAT is net", net_from_gross("18.00"))
