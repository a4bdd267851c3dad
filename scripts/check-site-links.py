#!/usr/bin/env python3
"""Check the internal links of a built site: every relative link must resolve.

For each HTML page under SITE, every relative ``href`` (and ``src``) must name a file of the
site, and its ``#anchor``, if any, an ``id`` (or ``name``) on the target page. Links with a
scheme (https:, mailto:, ...) or starting with ``//`` are external and not fetched. Exits 1
and lists each broken link (page, target, why) if any is found.

Usage: python3 scripts/check-site-links.py SITE
"""
from __future__ import annotations

import os
import re
import sys
from html.parser import HTMLParser
from urllib.parse import unquote, urlsplit


class Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("id",) + (("name",) if tag == "a" else ()):
            if a.get(key):
                self.ids.add(a[key])
        if tag in ("a", "link") and a.get("href"):
            self.links.append(a["href"])
        if tag in ("img", "script") and a.get("src"):
            self.links.append(a["src"])


def main() -> int:
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        print(__doc__.strip().splitlines()[-1])
        return 2
    site = os.path.abspath(sys.argv[1])
    pages: dict[str, Page] = {}
    for d, _, files in os.walk(site):
        for f in files:
            if f.endswith(".html"):
                p = Page()
                with open(os.path.join(d, f), encoding="utf-8", errors="replace") as fh:
                    p.feed(fh.read())
                pages[os.path.join(d, f)] = p

    broken, checked = [], 0
    for path, page in sorted(pages.items()):
        for href in page.links:
            if re.match(r"^[a-z][a-z0-9+.-]*:", href, re.I) or href.startswith("//"):
                continue                                    # external: not fetched
            parts = urlsplit(href)
            checked += 1
            target = path
            if parts.path:
                target = os.path.normpath(os.path.join(os.path.dirname(path),
                                                       unquote(parts.path)))
                if os.path.isdir(target):
                    target = os.path.join(target, "index.html")
            why = None
            if not target.startswith(site + os.sep):
                why = "outside the site"
            elif not os.path.isfile(target):
                why = "no such file"
            elif parts.fragment and target.endswith(".html"):
                if target not in pages or unquote(parts.fragment) not in pages[target].ids:
                    why = f"no anchor #{parts.fragment}"
            if why:
                broken.append((os.path.relpath(path, site), href, why))
    for page, href, why in broken:
        print(f"broken link: {page}: {href} ({why})")
    print(f"check-site-links: {len(pages)} pages, {checked} internal links, "
          f"{len(broken)} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
