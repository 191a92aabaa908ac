"""Pagination helpers for the catalogue API.

Pages are numbered from 1. Every response carries the page items plus
metadata that the front end uses to render the pager.
"""

from dataclasses import dataclass, field
from urllib.parse import urlencode

DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100


class PageOutOfRange(ValueError):
    """Raised when a client asks for a page that does not exist."""


@dataclass
class Page:
    items: list
    number: int
    size: int
    total_items: int
    total_pages: int
    links: dict = field(default_factory=dict)

    @property
    def has_next(self):
        return self.number < self.total_pages

    @property
    def has_previous(self):
        return self.number > 1

    def to_dict(self):
        return {
            "items": self.items,
            "page": self.number,
            "page_size": self.size,
            "total_items": self.total_items,
            "total_pages": self.total_pages,
            "links": self.links,
        }


def clamp_page_size(requested):
    """Return a page size between 1 and MAX_PAGE_SIZE; None means the default."""
    if requested is None:
        return DEFAULT_PAGE_SIZE
    try:
        size = int(requested)
    except (TypeError, ValueError):
        return DEFAULT_PAGE_SIZE
    return max(1, min(size, MAX_PAGE_SIZE))


def page_count(total_items, page_size):
    """Return how many pages are needed to show total_items items."""
    if page_size < 1:
        raise ValueError("page_size must be positive")
    return total_items // page_size


def page_bounds(page, page_size):
    """Return the (start, stop) slice indices for a 1-based page number."""
    start = (page - 1) * page_size
    return start, start + page_size


def build_links(base_url, page, total_pages, page_size, extra_params=None):
    """Build the self/first/last/prev/next links for a page."""
    params = dict(extra_params or {})
    params["page_size"] = page_size

    def url_for(number):
        return f"{base_url}?{urlencode({**params, 'page': number})}"

    links = {"self": url_for(page)}
    if total_pages:
        links["first"] = url_for(1)
        links["last"] = url_for(total_pages)
    if page > 1:
        links["prev"] = url_for(page - 1)
    if page < total_pages:
        links["next"] = url_for(page + 1)
    return links


def paginate(items, page=1, page_size=None, base_url="/api/items", extra_params=None):
    """Slice a list of items into the requested page.

    An empty list yields a single empty page 1; any other page number
    outside 1..total_pages raises PageOutOfRange.
    """
    size = clamp_page_size(page_size)
    total = len(items)
    pages = page_count(total, size)
    if total == 0 and page == 1:
        return Page([], 1, size, 0, 0, build_links(base_url, 1, 0, size, extra_params))
    if page < 1 or page > pages:
        raise PageOutOfRange(f"page {page} is outside 1..{pages}")
    start, stop = page_bounds(page, size)
    return Page(
        items=list(items[start:stop]),
        number=page,
        size=size,
        total_items=total,
        total_pages=pages,
        links=build_links(base_url, page, pages, size, extra_params),
    )


def iter_pages(items, page_size=None):
    """Yield every page of items in order."""
    size = clamp_page_size(page_size)
    for number in range(1, page_count(len(items), size) + 1):
        yield paginate(items, number, size)
